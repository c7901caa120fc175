#include "cli/process_via_api.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/call_via_api.h"
#include "cli/commands.h"
#include "cli/terminal.h"
#include "core/io.h"
#include "core/printable.h"
#include "core/unique_fd.h"
#include "http_client/event_stream.h"
#include "http_client/http_client.h"
#include "httpd/request_target.h"
#include "sandbox/exec_json.h"

namespace rf::cli {
namespace {

using json = nlohmann::json;

// A terminal stays attached for as long as its shell runs, up to a day.
constexpr std::chrono::hours kAttachBound{24};

struct ProcessSession {
  std::string base, token, prefix;  // prefix: base + /v1/sandboxes/{id}/processes

  http::Headers headers(const char* accept) const {
    return {{"Authorization", "Bearer " + token}, {"Accept", accept}};
  }
  // One request; the answer, or an error line naming it.
  Result<http::Response> ask(const std::string& method, const std::string& target,
                             const std::string& body, unsigned expected) const {
    http::Options o;
    o.timeout = std::chrono::seconds(60);
    auto r = http::fetch({.method = method,
                          .url = prefix + target,
                          .headers = headers("application/json"),
                          .body = body},
                         o);
    if (!r) return r.take_error();
    if (r->status != expected) {
      return make_error(method + " " + prefix + target, api_error_line(r->status, r->body));
    }
    return r;
  }
};

Result<ProcessSession> process_session(const ProcessTarget& t) {
  auto token = api_token(t.token_file);
  if (!token) return token.take_error();
  ProcessSession s;
  s.base = api_base(t.api);
  s.token = *token;
  s.prefix = s.base + "/v1/sandboxes/" + httpd::query_escaped(t.sandbox) + "/processes";
  return s;
}

int process_exit_code(const json& process) {
  if (process.value("state", "") == "exited" && process["exit_code"].is_number_integer())
    return process["exit_code"].get<int>();
  return kExitRuntime;
}

// A stream of serve's events at `url`, each (name, JSON data) to `on_event`
// until it returns false (the end it waited for) or the stream ends. The
// `end` event's data when there was one; else why the stream stopped.
Result<json> read_events(const ProcessSession& s, const std::string& url,
                         const std::function<bool(const std::string&, const json&)>& on_event,
                         const std::string& ended_early) {
  http::EventStream events;
  std::optional<json> ended;
  std::string broken;
  http::Options o;
  o.timeout = kAttachBound;
  o.on_body = [&](std::string_view bytes) {
    auto got = events.feed(bytes);
    if (!got) {
      broken = got.error().to_string();
      return false;
    }
    for (const http::Event& e : *got) {
      const json data = json::parse(e.data, nullptr, /*allow_exceptions=*/false);
      if (!data.is_object()) continue;
      if (e.name == "end") {
        ended = data;
        return false;
      }
      if (e.name == "error") {
        broken = data.value("error", std::string("an error event"));
        return false;
      }
      if (!on_event(e.name, data)) return false;
    }
    return true;
  };
  auto r = http::fetch({.method = "GET", .url = url, .headers = s.headers("text/event-stream")}, o);
  if (ended) return *ended;
  if (!r) return r.take_error();
  if (r->status != 200) return make_error("GET " + url, api_error_line(r->status, r->body));
  if (!broken.empty()) return make_error("GET " + url, broken);
  return make_error("GET " + url, ended_early);
}

// Follows `pid`'s output to our stdout and stderr until it ends.
Result<json> follow_output(const ProcessSession& s, int pid, const std::string& from) {
  return read_events(
      s, s.prefix + "/" + std::to_string(pid) + "/output?from=" + from,
      [](const std::string& name, const json& data) {
        if (name == "stdout" || name == "stderr") {
          auto bytes = bytes_of(data, "data");
          if (bytes) (void)write_all(name == "stdout" ? STDOUT_FILENO : STDERR_FILENO, *bytes);
        } else if (name == "skipped") {
          std::fprintf(stderr, "[ringfence: %s bytes of older output are no longer kept]\n",
                       data.value("bytes", json(0)).dump().c_str());
        }
        return true;
      },
      "the stream ended before the process did");
}

}  // namespace

int follow_process_via_api(const ProcessTarget& t, const std::string& from, bool keep_following) {
  auto s = process_session(t);
  if (!s) return fail(s.error().to_string(), kExitUsage);
  if (!keep_following) {
    auto r = s->ask("GET", "/" + std::to_string(t.pid) + "/output?from=" + from, "", 200);
    if (!r) return fail(r.error().to_string(), kExitRuntime);
    const json j = json::parse(r->body, nullptr, false);
    if (!j.is_object()) return fail("serve's answer is not JSON", kExitRuntime);
    if (auto out = bytes_of(j, "stdout")) (void)write_all(STDOUT_FILENO, *out);
    if (auto err = bytes_of(j, "stderr")) (void)write_all(STDERR_FILENO, *err);
    return 0;
  }
  auto ended = follow_output(*s, t.pid, from);
  if (!ended) return fail(ended.error().to_string(), kExitRuntime);
  if (ended->contains("error") && (*ended)["error"].is_string()) {
    return fail((*ended)["error"].get<std::string>(), kExitRuntime);
  }
  const json& p = (*ended)["process"];
  if (p.value("error", json()).is_string()) {
    std::fprintf(stderr, "ringfence: process %d: %s\n", t.pid,
                 p["error"].get<std::string>().c_str());
  }
  return process_exit_code(p);
}

int attach_shell_via_api(const ProcessTarget& t) {
  auto s = process_session(t);
  if (!s) return fail(s.error().to_string(), kExitUsage);
  int rows = 24, cols = 80;
  const bool tty = ::isatty(STDIN_FILENO) == 1;
  if (tty) terminal_size(STDIN_FILENO, &rows, &cols);
  int pid = t.pid;
  if (pid == 0) {
    const json start = {
        {"argv", {"/bin/sh", "-c", "command -v bash >/dev/null && exec bash -l; exec sh -l"}},
        {"pty", true},
        {"rows", rows},
        {"cols", cols},
        {"tag", "shell"}};
    auto r = s->ask("POST", "", start.dump(), 201);
    if (!r) return fail(r.error().to_string(), kExitRuntime);
    const json p = json::parse(r->body, nullptr, false);
    if (!p.is_object() || !p["pid"].is_number_integer())
      return fail("serve's answer has no pid", kExitRuntime);
    pid = p["pid"].get<int>();
  } else if (tty) {
    // An existing terminal takes this window's size (and redraws).
    (void)s->ask("POST", "/" + std::to_string(pid) + "/resize",
                 json{{"rows", rows}, {"cols", cols}}.dump(), 204);
  }
  // SIGWINCH comes to the signalfd only: blocked before the output thread starts.
  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  pthread_sigmask(SIG_BLOCK, &winch, nullptr);
  UniqueFd sig_fd(::signalfd(-1, &winch, SFD_CLOEXEC | SFD_NONBLOCK));
  UniqueFd done_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!done_fd) return fail("eventfd failed", kExitRuntime);
  RawTerminal raw(STDIN_FILENO);

  Result<json> ended = make_error("", "not ended");
  std::thread output([&] {
    ended = follow_output(*s, pid, "start");
    const uint64_t one = 1;
    (void)::write(done_fd.get(), &one, sizeof one);
  });
  const std::string one = "/" + std::to_string(pid);
  bool stdin_open = true;
  for (;;) {
    pollfd fds[3] = {{done_fd.get(), POLLIN, 0},
                     {sig_fd.get(), POLLIN, 0},
                     {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents != 0) {
      signalfd_siginfo info;
      while (::read(sig_fd.get(), &info, sizeof info) == sizeof info) {
      }
      terminal_size(STDIN_FILENO, &rows, &cols);
      (void)s->ask("POST", one + "/resize", json{{"rows", rows}, {"cols", cols}}.dump(), 204);
    }
    if (fds[2].revents != 0) {
      char buf[4096];
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0) {
        // Refused once the shell ended: its end event is on its way.
        (void)s->ask("POST", one + "/stdin", std::string(buf, static_cast<size_t>(n)), 204);
      } else if (n == 0 || errno != EINTR) {
        stdin_open = false;
        (void)s->ask("POST", one + "/stdin:close", "", 204);
      }
    }
  }
  output.join();
  if (!ended) return fail(ended.error().to_string(), kExitRuntime);
  if (ended->contains("error") && (*ended)["error"].is_string())
    return fail((*ended)["error"].get<std::string>(), kExitRuntime);
  const json& p = (*ended)["process"];
  if (p.value("error", json()).is_string()) {
    std::fprintf(stderr, "\r\nringfence: %s\r\n", p["error"].get<std::string>().c_str());
  }
  return process_exit_code(p);
}

int watch_via_api(const ProcessTarget& t, const std::string& path, bool recursive) {
  auto s = process_session(t);
  if (!s) return fail(s.error().to_string(), kExitUsage);
  const std::string url = s->base + "/v1/sandboxes/" + httpd::query_escaped(t.sandbox) +
                          "/files:watch?path=" + httpd::query_escaped(path) +
                          (recursive ? "&recursive=true" : "");
  auto ended = read_events(
      *s, url,
      [](const std::string& name, const json& data) {
        if (name == "fs") {
          const std::string line = printable(data.value("type", "") + " " + data.value("path", "") +
                                             (data.value("dir", false) ? "/" : "")) +
                                   "\n";
          (void)write_all(STDOUT_FILENO, line);
        }
        return true;
      },
      "the stream ended before the watch did");
  if (!ended) return fail(ended.error().to_string(), kExitRuntime);
  std::fprintf(stderr, "ringfence: the watch ended: %s\n",
               printable(ended->value("reason", std::string())).c_str());
  return 0;
}

}  // namespace rf::cli
