// `ringfence sandbox create | find | set-timeout | delete --api URL`: a
// project's sandboxes on a fleet, through `serve` (issue 41): made with a
// lifetime, a name and metadata, found again by name or metadata, given a new
// timeout, deleted. The token is the project's (RINGFENCE_TOKEN or
// --token-file, never argv), as for `call --api` (call_via_api.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/call_via_api.h"
#include "cli/commands.h"
#include "cli/process_via_api.h"
#include "core/io.h"
#include "core/printable.h"
#include "core/utc_time.h"
#include "http_client/http_client.h"
#include "httpd/request_target.h"
#include "sandbox/lifetime_request.h"

namespace rf::cli {
namespace {

using json = nlohmann::json;

struct ApiFlags {
  std::string api, token_file;
  std::string timeout, idle_timeout, name, cwd, state;
  std::vector<std::string> metadata, env;  // K=V
  std::vector<std::string> volumes;        // NAME:PATH[:ro]
  std::string size;
  std::string id;
  bool json_out = false;
};

void add_api_flags(CLI::App* cmd, ApiFlags* f) {
  cmd->add_option("--api", f->api, "serve's URL (default: $RINGFENCE_API)")
      ->envname("RINGFENCE_API")
      ->required();
  cmd->add_option("--token-file", f->token_file,
                  "A file whose first line is the project's token (default: $RINGFENCE_TOKEN)");
}

// K=V pairs into an object; the error names the flag and the pair.
Result<json> pairs(const std::vector<std::string>& given, const char* flag) {
  json out = json::object();
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string& p = given[i];
    const size_t eq = p.find('=');
    // Not echoed: an --env value may be a credential.
    if (eq == 0 || eq == std::string::npos)
      return make_error(
          flag, "expected KEY=VALUE (pair " + std::to_string(i + 1) + " has no key or no '=')");
    out[p.substr(0, eq)] = p.substr(eq + 1);
  }
  return out;
}

// One request to serve; the answer's JSON, or the exit code to return.
std::variant<json, int> exchange(const ApiFlags& f, const std::string& method,
                                 const std::string& target, const std::string& body,
                                 unsigned expected) {
  auto token = api_token(f.token_file);
  if (!token) return fail(token.error().to_string(), kExitUsage);
  const std::string base = api_base(f.api);
  http::Options o;
  o.timeout = std::chrono::seconds(120);
  auto r = http::fetch(
      {.method = method,
       .url = base + target,
       .headers = {{"Authorization", "Bearer " + *token}, {"Accept", "application/json"}},
       .body = body},
      o);
  if (!r) return fail(r.error().to_string(), kExitRuntime);
  const json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (r->status != expected) {
    const std::string why = api_error_line(r->status, r->body);
    const bool theirs = r->status == 400 || r->status == 403 || r->status == 404 ||
                        r->status == 409 || r->status == 413;
    return fail(method + " " + target + ": " + why, theirs ? kExitUsage : kExitRuntime);
  }
  return j;
}

void print_sandbox(const json& s) {
  const std::string name = s.value("name", json()).is_string() ? s["name"].get<std::string>() : "-";
  const std::string expires = s.value("expires_at", json()).is_number_integer()
                                  ? iso_utc(s["expires_at"].get<int64_t>())
                                  : std::string("never");
  std::printf("%-18s %-20s %-10s %-22s %s\n", printable(s.value("id", "")).c_str(),
              printable(name).c_str(), printable(s.value("backend", "")).c_str(), expires.c_str(),
              printable(s.value("metadata", json::object()).dump()).c_str());
}

int run_create(const ApiFlags& f) {
  json body = json::object();
  auto meta = pairs(f.metadata, "--metadata");
  if (!meta) return fail(meta.error().to_string(), kExitUsage);
  auto env = pairs(f.env, "--env");
  if (!env) return fail(env.error().to_string(), kExitUsage);
  if (!f.timeout.empty()) body["timeout"] = f.timeout;
  if (!f.idle_timeout.empty()) body["idle_timeout"] = f.idle_timeout;
  if (!f.name.empty()) body["name"] = f.name;
  if (!f.cwd.empty()) body["cwd"] = f.cwd;
  if (!meta->empty()) body["metadata"] = *meta;
  if (!env->empty()) body["env"] = *env;
  for (size_t i = 0; i < f.volumes.size(); ++i) {
    const std::string& v = f.volumes[i];
    const size_t colon = v.find(':');
    const bool ro = v.size() > 3 && v.compare(v.size() - 3, 3, ":ro") == 0;
    const std::string path =
        colon == std::string::npos ? "" : v.substr(colon + 1, v.size() - colon - 1 - (ro ? 3 : 0));
    if (colon == std::string::npos || colon == 0 || path.empty())
      return fail("--volume " + v + ": expected NAME:PATH or NAME:PATH:ro", kExitUsage);
    body["volumes"].push_back({{"name", v.substr(0, colon)}, {"path", path}, {"readonly", ro}});
  }
  // Checked here first, as serve checks them: the error names the flag.
  json probe = body;
  if (auto l = take_lifetime(probe); !l) {
    return fail("--" + l.error().where + ": " + l.error().message, kExitUsage);
  }
  auto made = exchange(f, "POST", "/v1/sandboxes", body.dump(), 201);
  if (auto* code = std::get_if<int>(&made)) return *code;
  const json& s = std::get<json>(made);
  if (f.json_out) {
    std::printf("%s\n", printable_json(s).c_str());
  } else {
    std::printf("%s\n", printable(s.value("id", "")).c_str());
  }
  return 0;
}

int run_find(const ApiFlags& f) {
  std::string q;
  auto add = [&](const std::string& k, const std::string& v) {
    q += (q.empty() ? "?" : "&") + k + "=" + httpd::query_escaped(v);
  };
  if (!f.name.empty()) add("name", f.name);
  if (!f.state.empty()) add("state", f.state);
  if (!f.metadata.empty()) {
    auto meta = pairs(f.metadata, "--metadata");
    if (!meta) return fail(meta.error().to_string(), kExitUsage);
    std::string inner;
    for (const auto& [k, v] : meta->items()) {
      inner += (inner.empty() ? "" : "&") + httpd::query_escaped(k) + "=" +
               httpd::query_escaped(v.get<std::string>());
    }
    add("metadata", inner);
  }
  auto listed = exchange(f, "GET", "/v1/sandboxes" + q, "", 200);
  if (auto* code = std::get_if<int>(&listed)) return *code;
  const json& all = std::get<json>(listed);
  if (f.json_out) {
    std::printf("%s\n", printable_json(all.value("sandboxes", json::array())).c_str());
    return 0;
  }
  std::printf("%-18s %-20s %-10s %-22s %s\n", "ID", "NAME", "BACKEND", "EXPIRES", "METADATA");
  for (const auto& s : all.value("sandboxes", json::array())) print_sandbox(s);
  return 0;
}

int run_set_timeout(const ApiFlags& f) {
  auto set = exchange(f, "PUT", "/v1/sandboxes/" + httpd::query_escaped(f.id) + "/timeout",
                      json{{"timeout", f.timeout}}.dump(), 200);
  if (auto* code = std::get_if<int>(&set)) return *code;
  const json& s = std::get<json>(set);
  std::printf("%s expires at %s\n", printable(f.id).c_str(),
              s.value("expires_at", json()).is_number_integer()
                  ? iso_utc(s["expires_at"].get<int64_t>()).c_str()
                  : "never");
  return 0;
}

int run_delete(const ApiFlags& f) {
  auto gone = exchange(f, "DELETE", "/v1/sandboxes/" + httpd::query_escaped(f.id), "", 204);
  if (auto* code = std::get_if<int>(&gone)) return *code;
  return 0;
}

int run_process_start(const ApiFlags& f, const std::vector<std::string>& command,
                      const std::string& tag, bool keep_stdin) {
  if (command.empty())
    return fail("process start: no command (start ID -- CMD [ARG...])", kExitUsage);
  json body = {{"argv", command}};
  auto env = pairs(f.env, "--env");
  if (!env) return fail(env.error().to_string(), kExitUsage);
  if (!env->empty()) body["env"] = *env;
  if (!f.cwd.empty()) body["cwd"] = f.cwd;
  if (!tag.empty()) body["tag"] = tag;
  if (keep_stdin) body["stdin"] = true;
  auto made = exchange(f, "POST", "/v1/sandboxes/" + httpd::query_escaped(f.id) + "/processes",
                       body.dump(), 201);
  if (auto* code = std::get_if<int>(&made)) return *code;
  const json& p = std::get<json>(made);
  if (f.json_out) {
    std::printf("%s\n", printable_json(p).c_str());
  } else {
    std::printf("%d\n", p.value("pid", 0));
  }
  return 0;
}

int run_process_list(const ApiFlags& f) {
  auto listed =
      exchange(f, "GET", "/v1/sandboxes/" + httpd::query_escaped(f.id) + "/processes", "", 200);
  if (auto* code = std::get_if<int>(&listed)) return *code;
  const json all = std::get<json>(listed).value("processes", json::array());
  if (f.json_out) {
    std::printf("%s\n", printable_json(all).c_str());
    return 0;
  }
  std::printf("%-8s %-8s %-5s %-12s %s\n", "PID", "STATE", "EXIT", "TAG", "COMMAND");
  for (const auto& p : all) {
    std::string cmd;
    for (const auto& a : p.value("argv", json::array()))
      cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
    const json code = p.value("exit_code", json());
    std::printf("%-8d %-8s %-5s %-12s %s\n", p.value("pid", 0),
                printable(p.value("state", "")).c_str(),
                code.is_number_integer() ? std::to_string(code.get<int>()).c_str() : "-",
                printable(p.value("tag", "")).c_str(), printable(cmd).c_str());
  }
  return 0;
}

int run_process_kill(const ApiFlags& f, int pid, const std::string& signal) {
  const std::string one =
      "/v1/sandboxes/" + httpd::query_escaped(f.id) + "/processes/" + std::to_string(pid);
  auto sent = signal.empty()
                  ? exchange(f, "DELETE", one, "", 204)
                  : exchange(f, "POST", one + "/signal", json{{"signal", signal}}.dump(), 204);
  if (auto* code = std::get_if<int>(&sent)) return *code;
  return 0;
}

// `sandbox port ID PORT [PATH]`: the answer of a server inside (its body on
// stdout; exit 0 for a 2xx, 1 for another status); with --share, a URL that
// opens that port alone, for a browser.
int run_port(const ApiFlags& f, const std::string& port, std::string path, bool share) {
  const std::string one =
      "/v1/sandboxes/" + httpd::query_escaped(f.id) + "/ports/" + httpd::query_escaped(port);
  if (share) {
    json body = json::object();
    if (!f.timeout.empty()) body["ttl"] = f.timeout;
    auto made = exchange(f, "POST", one + ":share", body.dump(), 201);
    if (auto* code = std::get_if<int>(&made)) return *code;
    std::printf("%s%s\n", api_base(f.api).c_str(),
                printable(std::get<json>(made).value("url", "")).c_str());
    return 0;
  }
  auto token = api_token(f.token_file);
  if (!token) return fail(token.error().to_string(), kExitUsage);
  if (path.empty() || path[0] != '/') path.insert(0, "/");
  http::Options o;
  o.timeout = std::chrono::seconds(120);
  auto r = http::fetch({.method = "GET",
                        .url = api_base(f.api) + one + path,
                        .headers = {{"Authorization", "Bearer " + *token}}},
                       o);
  if (!r) return fail(r.error().to_string(), kExitRuntime);
  (void)write_all(STDOUT_FILENO, r->body);
  if (r->status < 200 || r->status > 299) {
    // serve's own refusals (no such sandbox, nothing listening) are JSON
    // naming the field; the port's own answers are whatever it sent.
    std::fprintf(stderr, "ringfence: GET %s: HTTP %u\n", (one + path).c_str(), r->status);
    return 1;
  }
  return 0;
}

}  // namespace

void add_sandbox_api_commands(CLI::App* sandbox, CommandResult* result) {
  auto create = sandbox->add_subcommand(
      "create", "A sandbox on a fleet through serve, with a lifetime (prints its id)");
  auto cf = std::make_shared<ApiFlags>();
  add_api_flags(create, cf.get());
  create->add_option("--timeout", cf->timeout,
                     "How long it lives (e.g. 30m; default: the project's policy, 1h built in)");
  create->add_option("--idle-timeout", cf->idle_timeout, "Ended after this long with no call");
  create->add_option("--name", cf->name, "Unique among the project's live sandboxes");
  create->add_option("--metadata", cf->metadata, "KEY=VALUE (repeatable)");
  create->add_option("--env", cf->env, "KEY=VALUE every call sees (repeatable)");
  create->add_option("--cwd", cf->cwd, "Where calls run when they do not say");
  create->add_option("--volume", cf->volumes,
                     "NAME:PATH[:ro]: the project's volume NAME at PATH (repeatable)");
  create->add_flag("--json", cf->json_out, "The whole sandbox as JSON");
  create->callback([cf, result] { result->exit_code = run_create(*cf); });

  auto find = sandbox->add_subcommand("find", "A project's sandboxes on a fleet, through serve");
  auto ff = std::make_shared<ApiFlags>();
  add_api_flags(find, ff.get());
  find->add_option("--name", ff->name, "Only the sandbox of this name");
  find->add_option("--metadata", ff->metadata,
                   "Only those with KEY=VALUE (repeatable: all of them)");
  find->add_option("--state", ff->state, "running or paused");
  find->add_flag("--json", ff->json_out, "One JSON array");
  find->callback([ff, result] { result->exit_code = run_find(*ff); });

  auto timeout = sandbox->add_subcommand(
      "set-timeout", "A new lifetime from now for a sandbox on a fleet: set-timeout ID DURATION");
  auto tf = std::make_shared<ApiFlags>();
  add_api_flags(timeout, tf.get());
  timeout->add_option("id", tf->id, "The sandbox")->required();
  timeout->add_option("timeout", tf->timeout, "How long from now (e.g. 30m)")->required();
  timeout->callback([tf, result] { result->exit_code = run_set_timeout(*tf); });

  auto process = sandbox->add_subcommand(
      "process", "Background processes of a sandbox on a fleet, through serve");
  process->require_subcommand(1);
  {
    auto pf = std::make_shared<ApiFlags>();
    auto argv = std::make_shared<std::vector<std::string>>();
    auto tag = std::make_shared<std::string>();
    auto keep_stdin = std::make_shared<bool>(false);
    auto start = process->add_subcommand(
        "start",
        "Start a command that outlives this one: start ID -- CMD [ARG...] (prints its pid)");
    add_api_flags(start, pf.get());
    start->add_option("id", pf->id, "The sandbox")->required();
    start->add_option("command", *argv, "The command and its arguments (after --)");
    start->add_option("--tag", *tag, "A label to find it by");
    start->add_option("--env", pf->env, "KEY=VALUE for it (repeatable)");
    start->add_option("--cwd", pf->cwd, "Where it runs (default: the sandbox's)");
    start->add_flag("--stdin", *keep_stdin, "Keep its stdin open for input");
    start->add_flag("--json", pf->json_out, "The process as JSON");
    start->callback([pf, argv, tag, keep_stdin, result] {
      result->exit_code = run_process_start(*pf, command_words(*argv, *result), *tag, *keep_stdin);
    });

    auto lf = std::make_shared<ApiFlags>();
    auto list = process->add_subcommand("list", "A sandbox's background processes: list ID");
    add_api_flags(list, lf.get());
    list->add_option("id", lf->id, "The sandbox")->required();
    list->add_flag("--json", lf->json_out, "One JSON array");
    list->callback([lf, result] { result->exit_code = run_process_list(*lf); });

    auto target = std::make_shared<ProcessTarget>();
    auto from = std::make_shared<std::string>("start");
    auto follow = std::make_shared<bool>(false);
    auto logs = process->add_subcommand(
        "logs",
        "A background process's output: logs ID PID (--follow: until it ends, then its "
        "exit code)");
    logs->add_option("--api", target->api, "serve's URL (default: $RINGFENCE_API)")
        ->envname("RINGFENCE_API")
        ->required();
    logs->add_option("--token-file", target->token_file,
                     "A file whose first line is the project's token (default: $RINGFENCE_TOKEN)");
    logs->add_option("id", target->sandbox, "The sandbox")->required();
    logs->add_option("pid", target->pid, "The process")->required();
    logs->add_option("--from", *from, "start (what its buffer holds), now, or a byte offset");
    logs->add_flag("-f,--follow", *follow, "Keep following until it ends");
    logs->callback([target, from, follow, result] {
      result->exit_code = follow_process_via_api(*target, *from, *follow);
    });

    auto kf = std::make_shared<ApiFlags>();
    auto kpid = std::make_shared<int>(0);
    auto ksig = std::make_shared<std::string>();
    auto kill = process->add_subcommand(
        "kill", "End a background process (SIGKILL, or --signal): kill ID PID");
    add_api_flags(kill, kf.get());
    kill->add_option("id", kf->id, "The sandbox")->required();
    kill->add_option("pid", *kpid, "The process")->required();
    kill->add_option("--signal", *ksig, "TERM, INT, HUP, ... instead of KILL");
    kill->callback(
        [kf, kpid, ksig, result] { result->exit_code = run_process_kill(*kf, *kpid, *ksig); });
  }

  {
    auto target = std::make_shared<ProcessTarget>();
    auto path = std::make_shared<std::string>();
    auto recursive = std::make_shared<bool>(false);
    auto watch = sandbox->add_subcommand(
        "watch",
        "What changes under a directory of a sandbox on a fleet, a line each, until it ends: "
        "watch ID PATH");
    watch->add_option("--api", target->api, "serve's URL (default: $RINGFENCE_API)")
        ->envname("RINGFENCE_API")
        ->required();
    watch->add_option("--token-file", target->token_file,
                      "A file whose first line is the project's token (default: $RINGFENCE_TOKEN)");
    watch->add_option("id", target->sandbox, "The sandbox")->required();
    watch->add_option("path", *path, "An absolute path in it")->required();
    watch->add_flag("-r,--recursive", *recursive, "Directories below it too");
    watch->callback([target, path, recursive, result] {
      result->exit_code = watch_via_api(*target, *path, *recursive);
    });
  }

  {
    auto pf = std::make_shared<ApiFlags>();
    auto port = std::make_shared<std::string>();
    auto path = std::make_shared<std::string>();
    auto share = std::make_shared<bool>(false);
    auto cmd = sandbox->add_subcommand(
        "port",
        "A server a process runs inside a sandbox on a fleet: port ID PORT [PATH] prints its "
        "answer; --share prints a URL that opens that port alone, for a browser");
    add_api_flags(cmd, pf.get());
    cmd->add_option("id", pf->id, "The sandbox")->required();
    cmd->add_option("port", *port, "The port it listens on, at 127.0.0.1 inside")->required();
    cmd->add_option("path", *path, "The path and query (default /)");
    cmd->add_flag("--share", *share, "Print a URL with a token for this port alone");
    cmd->add_option("--ttl", pf->timeout, "With --share: how long the token lives (default 1h)");
    cmd->callback([pf, port, path, share, result] {
      result->exit_code = run_port(*pf, *port, *path, *share);
    });
  }

  {
    auto lf = std::make_shared<ApiFlags>();
    auto ports = sandbox->add_subcommand(
        "ports", "The ports processes listen on inside a sandbox on a fleet: ports ID");
    add_api_flags(ports, lf.get());
    ports->add_option("id", lf->id, "The sandbox")->required();
    ports->add_flag("--json", lf->json_out, "One JSON array");
    ports->callback([lf, result] {
      auto listed =
          exchange(*lf, "GET", "/v1/sandboxes/" + httpd::query_escaped(lf->id) + "/ports", "", 200);
      if (auto* code = std::get_if<int>(&listed)) {
        result->exit_code = *code;
        return;
      }
      const json all = std::get<json>(listed).value("ports", json::array());
      if (lf->json_out) {
        std::printf("%s\n", printable_json(all).c_str());
        return;
      }
      std::printf("%-6s %-16s %s\n", "PORT", "ADDRESS", "URL");
      for (const auto& p : all) {
        std::printf("%-6d %-16s %s\n", p.value("port", 0),
                    printable(p.value("address", "")).c_str(),
                    printable(p.value("host", p.value("url", ""))).c_str());
      }
    });
  }

  for (const char* verb : {"pause", "resume"}) {
    auto pf = std::make_shared<ApiFlags>();
    const bool pausing = std::string(verb) == "pause";
    auto cmd = sandbox->add_subcommand(
        verb, pausing ? "Freeze every process of a sandbox on a fleet (no CPU, memory kept): "
                        "pause ID; any request to it resumes it"
                      : "Let a paused sandbox on a fleet go on: resume ID");
    add_api_flags(cmd, pf.get());
    cmd->add_option("id", pf->id, "The sandbox")->required();
    cmd->callback([pf, pausing, result] {
      auto done = exchange(
          *pf, "POST",
          "/v1/sandboxes/" + httpd::query_escaped(pf->id) + (pausing ? ":pause" : ":resume"), "",
          200);
      if (auto* code = std::get_if<int>(&done)) {
        result->exit_code = *code;
        return;
      }
      std::printf("%s %s\n", printable(pf->id).c_str(),
                  printable(std::get<json>(done).value("state", "")).c_str());
    });
  }

  auto del = sandbox->add_subcommand("delete", "Delete a sandbox on a fleet: delete ID");
  auto df = std::make_shared<ApiFlags>();
  add_api_flags(del, df.get());
  del->add_option("id", df->id, "The sandbox")->required();
  del->callback([df, result] { result->exit_code = run_delete(*df); });
}

void add_volume_commands(CLI::App* volume, CommandResult* result) {
  volume->require_subcommand(1);
  auto cf = std::make_shared<ApiFlags>();
  auto create = volume->add_subcommand(
      "create", "A named volume of the token's project: create NAME [--size 1g]");
  add_api_flags(create, cf.get());
  create->add_option("name", cf->name, "Its name")->required();
  create->add_option("--size", cf->size, "Its size (default 1g, at most the policy's)");
  create->callback([cf, result] {
    json body = {{"name", cf->name}};
    if (!cf->size.empty()) body["size"] = cf->size;
    auto made = exchange(*cf, "POST", "/v1/volumes", body.dump(), 201);
    if (auto* code = std::get_if<int>(&made)) {
      result->exit_code = *code;
      return;
    }
    std::printf("%s %s\n", printable(cf->name).c_str(),
                printable(std::get<json>(made).value("size", "")).c_str());
  });

  auto lf = std::make_shared<ApiFlags>();
  auto list = volume->add_subcommand("list", "The token's project's volumes");
  add_api_flags(list, lf.get());
  list->add_flag("--json", lf->json_out, "One JSON array");
  list->callback([lf, result] {
    auto listed = exchange(*lf, "GET", "/v1/volumes", "", 200);
    if (auto* code = std::get_if<int>(&listed)) {
      result->exit_code = *code;
      return;
    }
    const json all = std::get<json>(listed).value("volumes", json::array());
    if (lf->json_out) {
      std::printf("%s\n", printable_json(all).c_str());
      return;
    }
    std::printf("%-24s %-8s %-24s %s\n", "NAME", "SIZE", "CREATED", "HOST");
    for (const auto& v : all) {
      const json host = v.value("host", json());
      std::printf("%-24s %-8s %-24s %s\n", printable(v.value("name", "")).c_str(),
                  printable(v.value("size", "")).c_str(),
                  iso_utc(v.value("created_at", int64_t{0})).c_str(),
                  host.is_string() ? printable(host.get<std::string>()).c_str() : "-");
    }
  });

  auto df = std::make_shared<ApiFlags>();
  auto del = volume->add_subcommand("delete", "Delete a volume and its data: delete NAME");
  add_api_flags(del, df.get());
  del->add_option("name", df->name, "Its name")->required();
  del->callback([df, result] {
    auto gone = exchange(*df, "DELETE", "/v1/volumes/" + httpd::query_escaped(df->name), "", 204);
    if (auto* code = std::get_if<int>(&gone)) result->exit_code = *code;
  });
}

}  // namespace rf::cli
