// The API's sandboxes (issues 14, 39): made, listed, shown and destroyed;
// calls run in them (as JSON, or streamed as server-sent events); files read,
// written and listed. They live on workers (api/sandbox_service.h,
// WorkerSandboxes); these routes are the front door. A token sees its own
// project's only; another project's sandbox answers 404 as an unknown one
// does. A call whose client goes away, streaming or not, printing or silent,
// is killed.
#include <strings.h>

#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/exec_json.h"
#include "api/json_answers.h"
#include "api/port_tokens.h"
#include "core/log.h"
#include "core/printable.h"
#include "sandbox/file_tree.h"
#include "sandbox/lifetime_request.h"
#include "sandbox/port_request.h"
#include "sandbox/result_json.h"
#include "store/audit_log.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

void fail_with(Responder& r, const ServiceError& e) { fail(r, e.status, e.field, e.message); }

// Streams a call's output as server-sent events. A write that fails means
// the client left; the call is then killed (the service asks the connection
// every 100 ms, so also when the command prints nothing).
class SseSink : public OutputSink {
 public:
  explicit SseSink(Responder& r) : r_(r) {}
  void on_started(uint32_t, int pid) override { event("started", {{"pid", pid}}); }
  void on_stdout(std::string_view d) override { data("stdout", d); }
  void on_stderr(std::string_view d) override { data("stderr", d); }
  void event(const std::string& name, const json& body) {
    if (gone_) return;
    if (!r_.write_chunk("event: " + name + "\ndata: " + body.dump() + "\n\n")) gone_ = true;
  }
  bool gone() const { return gone_; }

 private:
  void data(const char* stream, std::string_view d) {
    json j;
    put_bytes(j, "data", std::string(d));
    event(stream, j);
  }
  Responder& r_;
  std::atomic<bool> gone_{false};
};

bool wants_sse(const Request& request) {
  return sv(request[http::field::accept]).find("text/event-stream") != std::string_view::npos;
}

// ?path=/workspace/...: absolute, or a 400 was sent.
std::optional<std::string> path_of(const Target& t, Responder& out) {
  auto it = t.query.find("path");
  if (it == t.query.end() || it->second.empty()) {
    fail(out, 400, "path", "the query needs ?path=/workspace/...");
    return std::nullopt;
  }
  if (it->second[0] != '/') {
    fail(out, 400, "path", "expected an absolute path");
    return std::nullopt;
  }
  return it->second;
}

}  // namespace

void Api::sandboxes_create(Ctx& c) {
  auto made = sandboxes_.create(c.who.project, c.who.actor(), c.request.body());
  if (auto* e = std::get_if<ServiceError>(&made)) {
    if (e->status == 403) ++denied_;
    return fail_with(c.out, *e);
  }
  const json& s = std::get<json>(made);
  answer(c.out, 201, s, {{"Location", "/v1/sandboxes/" + s.value("id", "")}});
}

void Api::sandboxes_list(Ctx& c) {
  auto project = project_of(c);
  if (!project) return;
  // Filters (issue 41): ?name=N, ?state=running|paused, ?metadata=K=V&K2=V2
  // (the pairs URL-encoded as one value, as E2B's clients send them).
  const auto& q = c.target.query;
  std::optional<std::string> name, state;
  if (auto it = q.find("name"); it != q.end()) name = it->second;
  if (auto it = q.find("state"); it != q.end()) {
    state = it->second;
    if (*state != "running" && *state != "paused")
      return fail(c.out, 400, "state", "expected running or paused");
  }
  std::map<std::string, std::string> wanted;
  if (auto it = q.find("metadata"); it != q.end()) {
    auto pairs = httpd::split_target("/?" + it->second);
    if (!pairs.ok) return fail(c.out, 400, "metadata", "expected K=V pairs joined by &");
    for (const auto& [k, v] : pairs.query) {
      if (k.empty()) return fail(c.out, 400, "metadata", "a pair without its key");
      wanted[k] = v;
    }
  }
  json list = json::array();
  for (auto& s : sandboxes_.list(*project)) {
    if (name) {
      const json n = s.value("name", json());
      if (!n.is_string() || n.get<std::string>() != *name) continue;
    }
    if (state && *state != "running") continue;  // none is paused (yet)
    bool all = true;
    for (const auto& [k, v] : wanted) {
      const json& m = s.contains("metadata") ? s["metadata"] : json();
      all = all && m.is_object() && m.contains(k) && m[k] == v;
    }
    if (all) list.push_back(std::move(s));
  }
  answer(c.out, 200, {{"sandboxes", list}});
}

void Api::sandbox_timeout(Ctx& c) {
  auto body = body_object(c.request, c.out);
  if (!body) return;
  auto set = sandboxes_.set_timeout(c.who.project, c.param("id"), *body);
  if (auto* e = std::get_if<ServiceError>(&set)) {
    if (e->status == 403) ++denied_;
    return fail_with(c.out, *e);
  }
  const auto& sb = std::get<std::optional<json>>(set);
  if (!sb) return fail(c.out, 404, "id", "no sandbox " + c.param("id"));
  answer(c.out, 200, *sb);
}

// POST /v1/sandboxes/{id}:pause and :resume (issue 42). A request to a
// paused sandbox other than reading or deleting it resumes it first.
void Api::sandbox_pause(Ctx& c) { set_paused(c, true); }
void Api::sandbox_resume(Ctx& c) { set_paused(c, false); }

void Api::set_paused(Ctx& c, bool paused) {
  auto set = sandboxes_.set_paused(c.who.project, c.param("id"), paused, c.who.actor());
  if (auto* e = std::get_if<ServiceError>(&set)) return fail_with(c.out, *e);
  const auto& sb = std::get<std::optional<json>>(set);
  if (!sb) return fail(c.out, 404, "id", "no sandbox " + c.param("id"));
  answer(c.out, 200, *sb);
}

void Api::sandbox_get(Ctx& c) {
  auto sb = sandboxes_.find(c.who.project, c.param("id"));
  if (!sb) return fail(c.out, 404, "id", "no sandbox " + c.param("id"));
  answer(c.out, 200, *sb);
}

void Api::sandbox_delete(Ctx& c) {
  auto gone = sandboxes_.destroy(c.who.project, c.param("id"), c.who.actor());
  if (auto* e = std::get_if<ServiceError>(&gone)) return fail_with(c.out, *e);
  if (!std::get<bool>(gone)) return fail(c.out, 404, "id", "no sandbox " + c.param("id"));
  (void)c.out.respond(204, "", "");
}

void Api::sandbox_exec(Ctx& c) {
  const std::string& id = c.param("id");
  auto body = body_object(c.request, c.out);
  if (!body) return;
  // The request's own faults first, as a 400 naming the field.
  if (auto parsed = parse_exec(*body); std::holds_alternative<ServiceError>(parsed)) {
    return fail_with(c.out, std::get<ServiceError>(parsed));
  }
  ++execs_;
  // A refusal is an HTTP answer, not an event inside a 200 stream.
  if (body->contains("timeout")) {
    auto policy = sandboxes_.policy_of(c.who.project);
    if (!policy) return fail(c.out, 503, "", policy.error().to_string());
    auto call = std::get<ExecCall>(parse_exec(*body));
    if (auto s = policy->bound_timeout(call.timeout, true, "timeout"); !s) {
      ++denied_;
      return fail(c.out, 403, s.error().where, s.error().message);
    }
  }
  Responder& out = c.out;
  const std::function<bool()> gone = [&out] { return out.client_gone(); };
  if (wants_sse(c.request)) {
    if (!sandboxes_.find(c.who.project, id)) return fail(c.out, 404, "id", "no sandbox " + id);
    ++streams_open_;
    if (!c.out.begin_stream(200, "text/event-stream")) {
      --streams_open_;
      return;
    }
    SseSink sink(c.out);
    auto result = sandboxes_.exec(c.who.project, id, *body, sink, gone);
    if (auto* r = std::get_if<ExecResult>(&result)) {
      sink.event("exit", exec_result_json(*r, id));
    } else {
      ++exec_errors_;
      const auto& e = std::get<ServiceError>(result);
      json j = {{"error", e.message}, {"status", e.status}};
      if (!e.field.empty()) j["field"] = e.field;
      sink.event("error", j);
    }
    if (!sink.gone()) (void)c.out.end_stream();
    --streams_open_;
    return;
  }
  CollectSink sink;
  auto result = sandboxes_.exec(c.who.project, id, *body, sink, gone);
  if (auto* e = std::get_if<ServiceError>(&result)) {
    if (e->status != 404) ++exec_errors_;
    if (e->status == 403) ++denied_;
    return fail_with(c.out, *e);
  }
  answer(c.out, 200, exec_answer(std::get<ExecResult>(result), id, sink));
}

namespace {
// ?NAME=true|false (absent: false); nullopt when it is anything else (a 400 was sent).
std::optional<bool> flag_of(const Target& t, const char* name, Responder& out) {
  auto it = t.query.find(name);
  if (it == t.query.end() || it->second == "false") return false;
  if (it->second == "true") return true;
  fail(out, 400, name, "expected true or false");
  return std::nullopt;
}
}  // namespace

void Api::sandbox_file_delete(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  auto recursive = flag_of(c.target, "recursive", c.out);
  if (!recursive) return;
  auto done = sandboxes_.change_file(
      c.who.project, c.param("id"),
      *recursive ? SandboxService::FileOp::kRemoveRecursive : SandboxService::FileOp::kRemove,
      *path);
  if (auto* e = std::get_if<ServiceError>(&done)) return fail_with(c.out, *e);
  (void)c.out.respond(204, "", "");
}

void Api::sandbox_file_mkdir(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  auto parents = flag_of(c.target, "parents", c.out);
  if (!parents) return;
  auto done = sandboxes_.change_file(
      c.who.project, c.param("id"),
      *parents ? SandboxService::FileOp::kMkdirParents : SandboxService::FileOp::kMkdir, *path);
  if (auto* e = std::get_if<ServiceError>(&done)) return fail_with(c.out, *e);
  answer(c.out, 201, {{"path", *path}});
}

void Api::sandbox_file_move(Ctx& c) {
  auto body = body_object(c.request, c.out);
  if (!body) return;
  for (auto it = body->begin(); it != body->end(); ++it) {
    if (it.key() != "from" && it.key() != "to")
      return fail(c.out, 400, it.key(), "unknown field (allowed: from, to)");
  }
  for (const char* k : {"from", "to"}) {
    if (!body->contains(k) || !(*body)[k].is_string() || (*body)[k].get<std::string>().empty() ||
        (*body)[k].get<std::string>()[0] != '/') {
      return fail(c.out, 400, k, "expected an absolute path");
    }
  }
  const std::string from = (*body)["from"], to = (*body)["to"];
  auto done =
      sandboxes_.change_file(c.who.project, c.param("id"), SandboxService::FileOp::kMove, from, to);
  if (auto* e = std::get_if<ServiceError>(&done)) return fail_with(c.out, *e);
  answer(c.out, 200, {{"from", from}, {"to", to}});
}

// A directory watched (issue 41): server-sent events from inotify inside
// the sandbox until it ends or the client leaves (the watch then ends
// inside within 100 ms). The stream begins with the watch: a path that
// cannot be watched is a plain 400.
void Api::sandbox_file_watch(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  auto recursive = flag_of(c.target, "recursive", c.out);
  if (!recursive) return;
  if (!wants_sse(c.request)) {
    return fail(c.out, 406, "Accept", "a watch is a stream: send Accept: text/event-stream");
  }
  std::optional<SseSink> sink;
  bool cannot = false;
  Responder& out = c.out;
  ++streams_open_;
  auto followed = sandboxes_.watch_dir(
      c.who.project, c.param("id"), *path, *recursive,
      [&](const char* name, const json& data) {
        if (!sink && !cannot) {
          if (out.begin_stream(200, "text/event-stream")) {
            sink.emplace(out);
          } else {
            cannot = true;
          }
        }
        if (sink) sink->event(name, data);
      },
      [&] { return cannot || (sink && sink->gone()) || out.client_gone(); });
  --streams_open_;
  if (auto* e = std::get_if<ServiceError>(&followed)) {
    if (!sink) return fail_with(c.out, *e);
    json j = {{"error", e->message}, {"status", e->status}};
    sink->event("error", j);
  }
  if (sink && !sink->gone()) (void)c.out.end_stream();
}

void Api::sandbox_file_stat(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  auto info = sandboxes_.stat(c.who.project, c.param("id"), *path);
  if (auto* e = std::get_if<ServiceError>(&info)) return fail_with(c.out, *e);
  const auto& f = std::get<proto::FileInfo>(info);
  answer(
      c.out, 200,
      {{"path", *path}, {"type", f.type}, {"size", f.size}, {"mode", f.mode}, {"mtime", f.mtime}});
}

void Api::sandbox_files_list(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  int depth = 1;
  if (auto d = c.target.query.find("depth"); d != c.target.query.end()) {
    auto given = parse_list_depth(d->second);
    if (!given) return fail(c.out, 400, "depth", given.error().message);
    depth = *given;
  }
  auto entries = sandboxes_.list_dir(c.who.project, c.param("id"), *path, depth);
  if (auto* e = std::get_if<ServiceError>(&entries)) return fail_with(c.out, *e);
  json list = json::array();
  for (const auto& e : std::get<std::vector<proto::FileInfo>>(entries)) {
    list.push_back({{"name", e.name},
                    {"type", e.type},
                    {"size", e.size},
                    {"mode", e.mode},
                    {"mtime", e.mtime}});
  }
  answer(c.out, 200, {{"path", *path}, {"entries", list}});
}

void Api::sandbox_file_get(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  auto data = sandboxes_.read_file(c.who.project, c.param("id"), *path);
  if (auto* e = std::get_if<ServiceError>(&data)) return fail_with(c.out, *e);
  (void)c.out.respond(200, "application/octet-stream", std::get<std::string>(data));
}

void Api::sandbox_file_put(Ctx& c) {
  auto path = path_of(c.target, c.out);
  if (!path) return;
  uint32_t mode = 0644;
  if (auto m = c.target.query.find("mode"); m != c.target.query.end()) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(m->second.c_str(), &end, 8);
    if (m->second.empty() || *end != '\0' || v > 07777) {
      return fail(c.out, 400, "mode", "expected octal permissions such as 0644");
    }
    mode = static_cast<uint32_t>(v);
  }
  auto wrote = sandboxes_.write_file(c.who.project, c.param("id"), *path, c.request.body(), mode);
  if (auto* e = std::get_if<ServiceError>(&wrote)) return fail_with(c.out, *e);
  answer(c.out, 201, {{"path", *path}, {"size", c.request.body().size()}});
}

// Background processes (issue 41; sandbox/process_request.h). A process's
// output with Accept: text/event-stream is followed as events until it ends
// (the terminal's way: output streamed here, input as POSTs to /stdin).
void Api::sandbox_processes(Ctx& c) {
  const std::string& id = c.param("id");
  const auto& seg = c.target.segments;  // v1 sandboxes {id} processes ...
  auto parsed = parse_process_request(sv(http::to_string(c.request.method())),
                                      std::vector<std::string>(seg.begin() + 3, seg.end()),
                                      c.target.query, c.request.body());
  if (auto* r = std::get_if<ProcessRefusal>(&parsed))
    return fail(c.out, r->status, r->field, r->message);
  const ProcessRequest& req = std::get<ProcessRequest>(parsed);
  if (req.op == ProcessOp::kOutput && wants_sse(c.request)) {
    // Unknown first, as an HTTP answer rather than an event in a 200 stream.
    ProcessRequest get;
    get.op = ProcessOp::kGet;
    get.pid = req.pid;
    auto known = sandboxes_.process(c.who.project, id, get);
    if (auto* e = std::get_if<ServiceError>(&known)) return fail_with(c.out, *e);
    ++streams_open_;
    if (!c.out.begin_stream(200, "text/event-stream")) {
      --streams_open_;
      return;
    }
    SseSink sink(c.out);
    Responder& out = c.out;
    auto followed = sandboxes_.follow_process(
        c.who.project, id, req.pid, req.from,
        [&sink](const char* name, const json& data) { sink.event(name, data); },
        [&] { return sink.gone() || out.client_gone(); });
    if (auto* e = std::get_if<ServiceError>(&followed)) {
      json j = {{"error", e->message}, {"status", e->status}};
      if (!e->field.empty()) j["field"] = e->field;
      sink.event("error", j);
    }
    if (!sink.gone()) (void)c.out.end_stream();
    --streams_open_;
    return;
  }
  auto answered = sandboxes_.process(c.who.project, id, req);
  if (auto* e = std::get_if<ServiceError>(&answered)) {
    if (e->status == 403) ++denied_;
    return fail_with(c.out, *e);
  }
  const int status = process_success_status(req.op);
  if (status == 204) {
    (void)c.out.respond(204, "", "");
    return;
  }
  answer(c.out, status, std::get<json>(answered));
}

// A request to a port a process listens on inside the sandbox (issue 41
// item 5), relayed through the worker's door and the sandbox's runner: the
// client's method, path below .../ports/{port}, query, headers (but its
// token) and body; the port's answer as it gave it.
void Api::sandbox_port(Ctx& c) {
  auto port = parse_port(c.param("port"));
  if (!port) return fail(c.out, 400, "port", port.error().message);
  HeaderList headers;
  for (const auto& f : c.request) {
    headers.emplace_back(std::string(sv(f.name_string())), std::string(sv(f.value())));
  }
  std::string target =
      c.host_form ? std::string(sv(c.request.target())) : target_after(sv(c.request.target()), 5);
  if (target.empty() || target[0] != '/') target.insert(0, "/");
  // A port token is ringfence's: the port never sees it.
  if (const size_t q = target.find('?'); q != std::string::npos) {
    std::string kept;
    std::string_view query(target);
    query.remove_prefix(q + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      if (!pair.starts_with(std::string(PortTokens::kQueryName) + "="))
        kept += (kept.empty() ? "" : "&") + std::string(pair);
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
    target = target.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  }
  for (auto& [k, v] : headers) {
    if (k.size() == 6 && ::strncasecmp(k.c_str(), "cookie", 6) == 0) {
      std::string kept;
      size_t at = 0;
      while (at < v.size()) {
        size_t end = v.find(';', at);
        if (end == std::string::npos) end = v.size();
        std::string pair = v.substr(at, end - at);
        while (!pair.empty() && pair.front() == ' ') pair.erase(0, 1);
        if (!pair.starts_with("rf_port_")) kept += (kept.empty() ? "" : "; ") + pair;
        at = end + 1;
      }
      v = kept;
    }
  }
  // Each request is audited once it is over (port.request: its method,
  // path, status and size; port.websocket: how long it was open), after the
  // client has its answer.
  auto audit = [&](const char* kind, json detail) {
    store::AuditEvent ev;
    ev.kind = kind;
    ev.actor = c.who.actor();
    ev.project_id = c.who.project;
    ev.sandbox_id = c.param("id");
    detail["port"] = *port;
    detail["path"] = printable(target, 200);
    ev.detail_json = detail.dump();
    warn_unless_ok(store::AuditLog(*borrow_store()).append(ev), "auditing a port request");
  };
  if (is_websocket_upgrade(headers)) {
    // The connection becomes the WebSocket's, relayed until either side closes.
    const auto opened = std::chrono::steady_clock::now();
    auto relayed = sandboxes_.port_upgrade(c.who.project, c.param("id"), *port, target, headers,
                                           [&] { return c.out.take_over(); });
    if (auto* e = std::get_if<ServiceError>(&relayed)) return fail_with(c.out, *e);
    audit("port.websocket",
          {{"seconds",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count()}});
    return;
  }
  // The answer as it comes (chunked), whatever its size.
  const std::string cookie_path =
      c.host_form ? "/" : "/v1/sandboxes/" + c.param("id") + "/ports/" + c.param("port") + "/";
  bool streaming = false;
  PortAnswerSink sink;
  sink.head = [&](int status, HeaderList&& passing) {
    auto [type, rest] = content_type_and_rest(std::move(passing));
    if (!c.port_token.empty()) {
      rest.emplace_back("Set-Cookie", PortTokens::cookie_name(c.param("id"), *port) + "=" +
                                          c.port_token + "; Path=" + cookie_path +
                                          "; HttpOnly; SameSite=Strict");
    }
    if (c.request.method() == boost::beast::http::verb::head || status == 204 || status == 304) {
      return c.out.respond(status, type, "", rest).ok();
    }
    streaming = true;
    return c.out.begin_stream(status, type, rest).ok();
  };
  uint64_t sent = 0;
  int answered = 0;
  const auto head = sink.head;
  sink.head = [&](int status, HeaderList&& passing) {
    answered = status;
    return head(status, std::move(passing));
  };
  sink.body = [&](std::string_view bytes) {
    sent += bytes.size();
    return c.out.write_chunk(bytes).ok();
  };
  auto relayed = sandboxes_.port_request(c.who.project, c.param("id"), *port,
                                         std::string(sv(c.request.method_string())), target,
                                         headers, c.request.body(), sink);
  const std::string method(sv(c.request.method_string()));
  if (auto* e = std::get_if<ServiceError>(&relayed)) {
    fail_with(c.out, *e);
    return audit("port.request", {{"method", method}, {"status", e->status}, {"bytes", 0}});
  }
  if (!std::get<bool>(relayed)) {
    // Broke off midway: no end of the chunked body, so the client sees it was cut.
    c.out.close_connection();
  } else if (streaming) {
    (void)c.out.end_stream();
  }
  audit("port.request", {{"method", method},
                         {"status", answered},
                         {"bytes", sent},
                         {"whole", std::get<bool>(relayed)}});
}

// The ports processes of a sandbox listen on now, each with where it is
// reached: its path, and its host name when serve has a --port-domain.
void Api::sandbox_ports(Ctx& c) {
  auto found = sandboxes_.ports(c.who.project, c.param("id"));
  if (auto* e = std::get_if<ServiceError>(&found)) return fail_with(c.out, *e);
  json out = std::get<json>(found);
  if (out.contains("ports") && out["ports"].is_array()) {
    for (auto& p : out["ports"]) {
      if (!p.is_object() || !p.contains("port") || !p["port"].is_number_integer()) continue;
      const std::string port = std::to_string(p["port"].get<int>());
      p["url"] = "/v1/sandboxes/" + c.param("id") + "/ports/" + port + "/";
      if (!options_.port_domain.empty())
        p["host"] = port + "-" + c.param("id") + "." + options_.port_domain;
    }
  }
  answer(c.out, 200, out);
}

// A token for one port of one sandbox, to hand to a browser (issue 41;
// api/port_tokens.h): {"ttl": seconds or "1h"} (default 1h, at most 24h).
void Api::sandbox_port_share(Ctx& c) {
  auto port = parse_port(c.param("port"));
  if (!port) return fail(c.out, 400, "port", port.error().message);
  if (!port_tokens_) return fail(c.out, 503, "", "this server makes no port tokens (no state dir)");
  auto body = body_object(c.request, c.out);
  if (!body) return;
  std::chrono::milliseconds ttl = std::chrono::hours(1);
  for (auto it = body->begin(); it != body->end(); ++it) {
    if (it.key() != "ttl") return fail(c.out, 400, it.key(), "unknown field (allowed: ttl)");
  }
  if (body->contains("ttl")) {
    auto given = parse_lifetime_timeout((*body)["ttl"], "ttl");
    if (!given) return fail(c.out, 400, "ttl", given.error().message);
    if (*given > std::chrono::hours(24)) return fail(c.out, 400, "ttl", "at most 24h");
    ttl = *given;
  }
  if (!sandboxes_.find(c.who.project, c.param("id"))) {
    return fail(c.out, 404, "id", "no sandbox " + c.param("id"));
  }
  const int64_t expires = store::now_ms() + ttl.count();
  const std::string token = port_tokens_->make(c.who.project, c.param("id"), *port, expires);
  store::AuditEvent ev;
  ev.kind = "port.share";
  ev.actor = c.who.actor();
  ev.project_id = c.who.project;
  ev.sandbox_id = c.param("id");
  ev.detail_json = json{{"port", *port}, {"expires_at", expires}}.dump();
  (void)store::AuditLog(store_).append(ev);
  const std::string url = "/v1/sandboxes/" + c.param("id") + "/ports/" + c.param("port") + "/?" +
                          PortTokens::kQueryName + "=" + token;
  answer(c.out, 201, {{"token", token}, {"url", url}, {"expires_at", expires}, {"port", *port}});
}

}  // namespace rf::api
