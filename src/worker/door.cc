#include "worker/door.h"

#include <sodium.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>

#include "core/json_input.h"
#include "core/log.h"
#include "httpd/request_target.h"
#include "sandbox/exec_json.h"
#include "sandbox/file_tree.h"
#include "sandbox/lifetime_request.h"
#include "sandbox/port_relay.h"
#include "sandbox/port_request.h"
#include "sandbox/process_request.h"
#include "sandbox/result_json.h"
#include "sandbox/watch_stream.h"

namespace rf::worker {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

void answer(httpd::Responder& out, int status, const json& body) {
  (void)out.respond(status, kJson, body.dump() + "\n");
}

// A refusal of the door's own, marked so that a front door relaying a port's
// answers (which may be any status) tells the two apart.
void refuse(httpd::Responder& out, const DoorRefusal& r) {
  json body = {{"error", r.message}, {"status", r.status}};
  if (!r.field.empty()) body["field"] = r.field;
  (void)out.respond(r.status, kJson, body.dump() + "\n", {{"X-Ringfence-Refused", "1"}});
}

std::string random_key() {
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  std::string hex;
  for (unsigned char b : bytes) {
    char h[3];
    std::snprintf(h, sizeof h, "%02x", b);
    hex += h;
  }
  sodium_memzero(bytes, sizeof bytes);
  return hex;
}

// A call's output as server-sent events; a write that fails is a client
// gone (the call's watch kills it).
class EventSink final : public OutputSink {
 public:
  explicit EventSink(httpd::Responder& out) : out_(out) {}
  void on_started(uint32_t, int pid) override { event("started", {{"pid", pid}}); }
  void on_stdout(std::string_view d) override { data("stdout", d); }
  void on_stderr(std::string_view d) override { data("stderr", d); }
  void event(const char* name, const json& body) {
    std::lock_guard lock(mu_);
    if (gone_) return;
    if (!out_.write_chunk(std::string("event: ") + name + "\ndata: " + body.dump() + "\n\n"))
      gone_ = true;
  }
  bool gone() const {
    std::lock_guard lock(mu_);
    return gone_;
  }

 private:
  void data(const char* stream, std::string_view d) {
    json j;
    put_bytes(j, "data", std::string(d));
    event(stream, j);
  }
  httpd::Responder& out_;
  mutable std::mutex mu_;
  bool gone_ = false;
};

}  // namespace

json door_sandbox_json(const DoorSandbox& s, const std::string& worker_id) {
  const SandboxSpec& spec = s.sandbox->spec();
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now() - s.created);
  return {
      {"id", s.id()},
      {"project", s.project},
      {"backend", std::string(to_string(spec.backend))},
      {"image", spec.image},
      {"network", std::string(to_string(spec.network))},
      {"created_at",
       std::chrono::duration_cast<std::chrono::milliseconds>(s.created.time_since_epoch()).count()},
      {"age_s", age.count()},
      {"setup_ms", static_cast<double>(s.setup.count()) / 1000.0},
      {"calls_running", s.running.load()},
      {"state", s.sandbox->paused() ? "paused" : "running"},
      {"worker", worker_id},
      {"spec", spec_json(spec)},
      {"name", s.name.empty() ? json(nullptr) : json(s.name)},
      {"metadata", s.metadata},
      {"cwd", s.cwd.empty() ? json("/workspace") : json(s.cwd)},
      {"expires_at", s.expires_at.load() == 0 ? json(nullptr) : json(s.expires_at.load())},
      {"idle_timeout_s", s.idle_timeout_ms == 0
                             ? json(nullptr)
                             : json(static_cast<double>(s.idle_timeout_ms) / 1000)},
      {"volumes", [&] {
         json v = json::array();
         for (const VolumeMount& m : s.volumes)
           v.push_back({{"name", m.name}, {"path", m.path}, {"readonly", m.readonly}});
         return v;
       }()}};
}

Result<std::unique_ptr<Door>> Door::open(DoorSandboxes& sandboxes, const DoorOptions& options,
                                         std::string worker_id) {
  std::unique_ptr<Door> door(new Door(sandboxes, std::move(worker_id), random_key()));
  httpd::ListenAddress where;
  if (options.listen.empty()) {
    where.unix_socket = true;
    where.host = options.state_dir + "/door-" + std::to_string(::getpid()) + ".sock";
    door->unix_path_ = where.host;
  } else {
    auto parsed = httpd::parse_listen_address(options.listen);
    if (!parsed) return make_error("--door-listen", parsed.error().message);
    where = *parsed;
  }
  Door* raw = door.get();
  httpd::ServerLimits limits;
  // Every client is a front door on behalf of many: one address, many calls.
  limits.max_connections_per_address = limits.max_connections;
  auto server = httpd::HttpServer::listen(
      where, limits,
      [raw](const httpd::Request& request, httpd::Responder& out) { raw->handle(request, out); });
  if (!server) return make_error("worker door", server.error().to_string());
  // Only root (the worker's user) may connect on this host; the key is checked besides.
  if (where.unix_socket && ::chmod(where.host.c_str(), 0600) != 0) {
    return sys_error("worker door: chmod " + where.host);
  }
  door->server_ = std::move(*server);
  return door;
}

Door::~Door() { stop(); }

const std::string& Door::address() const { return server_->address(); }

void Door::stop() {
  if (server_) server_->stop();
}

void Door::handle(const httpd::Request& request, httpd::Responder& out) {
  // The key, compared in constant time.
  const std::string_view auth = sv(request[http::field::authorization]);
  constexpr std::string_view kScheme = "Door ";
  const bool keyed = auth.size() == kScheme.size() + key_.size() && auth.starts_with(kScheme) &&
                     sodium_memcmp(auth.data() + kScheme.size(), key_.data(), key_.size()) == 0;
  if (!keyed) return answer(out, 401, {{"error", "this is a worker's door: Door KEY is needed"}});
  const std::string project(sv(request["X-Ringfence-Project"]));
  const std::string actor(sv(request["X-Ringfence-Actor"]));
  if (project.empty()) {
    return answer(out, 400, {{"error", "X-Ringfence-Project is needed"}, {"field", "project"}});
  }
  const httpd::Target t = httpd::split_target(sv(request.target()));
  const auto& seg = t.segments;
  const http::verb method = request.method();
  if (t.ok && seg.size() == 4 && seg[0] == "door" && seg[1] == "v1" && seg[2] == "volumes") {
    // A project's volume's disk on this host (issue 41): removed.
    if (method != http::verb::delete_) return answer(out, 405, {{"error", "allowed: DELETE"}});
    auto gone = sandboxes_.remove_volume(project, seg[3]);
    if (auto* r = std::get_if<DoorRefusal>(&gone)) return refuse(out, *r);
    (void)out.respond(204, "", "");
    return;
  }
  if (!t.ok || seg.size() < 3 || seg[0] != "door" || seg[1] != "v1" || seg[2] != "sandboxes") {
    return answer(out, 404, {{"error", "no such route"}});
  }
  if (seg.size() == 3) {
    if (method != http::verb::post) return answer(out, 405, {{"error", "allowed: POST"}});
    auto spec =
        parse_json(request.body().empty() ? std::string_view("{}") : request.body(), "spec");
    if (!spec) return refuse(out, {400, "spec", "the body is " + spec.error().message});
    auto made = sandboxes_.create(project, actor, *spec);
    if (auto* r = std::get_if<DoorRefusal>(&made)) return refuse(out, *r);
    return answer(out, 201,
                  door_sandbox_json(*std::get<std::shared_ptr<DoorSandbox>>(made), worker_id_));
  }
  const std::string& id = seg[3];
  auto sb = sandboxes_.find(project, id);
  if (!sb) return refuse(out, {404, "id", "no sandbox " + id});
  // Pause and resume (issue 42); any other request to a paused sandbox but
  // reading or deleting it (or reading what its processes printed, kept
  // here) resumes it first: nothing inside answers while it is paused.
  if (seg.size() == 5 && (seg[4] == "pause" || seg[4] == "resume")) {
    if (method != http::verb::post) return answer(out, 405, {{"error", "allowed: POST"}});
    auto done =
        seg[4] == "pause" ? sandboxes_.pause(*sb, actor) : sandboxes_.resume(*sb, actor, "asked");
    if (auto* r = std::get_if<DoorRefusal>(&done)) return refuse(out, *r);
    return answer(out, 200, door_sandbox_json(*sb, worker_id_));
  }
  // Reading a process's buffered output or the process list needs nothing
  // inside: those leave it paused.
  const bool reads_host_side = seg.size() > 4 && seg[4] == "processes" && method == http::verb::get;
  if (seg.size() > 4 && sb->sandbox->paused() && !reads_host_side) {
    auto resumed = sandboxes_.resume(*sb, actor, "auto");
    if (auto* r = std::get_if<DoorRefusal>(&resumed)) return refuse(out, *r);
  }
  if (seg.size() == 4) {
    if (method == http::verb::get) return answer(out, 200, door_sandbox_json(*sb, worker_id_));
    if (method == http::verb::delete_) {
      auto gone = sandboxes_.destroy(project, id, actor);
      if (!gone) return refuse(out, {500, "", gone.error().to_string()});
      if (!*gone) return refuse(out, {404, "id", "no sandbox " + id});
      (void)out.respond(204, "", "");
      return;
    }
    return answer(out, 405, {{"error", "allowed: GET, DELETE"}});
  }
  if (seg[4] == "ports" && seg.size() >= 6) {
    return port(*sb, seg[5], request, out);
  }
  if (seg[4] == "ports" && seg.size() == 5) {
    if (method != http::verb::get) return answer(out, 405, {{"error", "allowed: GET"}});
    sandboxes_.attach(*sb, true);
    auto found = listening_ports(*sb->sandbox);
    sandboxes_.attach(*sb, false);
    if (!found) return refuse(out, {502, "", found.error().to_string()});
    json list = json::array();
    for (const auto& p : *found) list.push_back({{"port", p.port}, {"address", p.address}});
    return answer(out, 200, {{"ports", list}});
  }
  if (seg[4] == "processes") {
    return processes(*sb, std::vector<std::string>(seg.begin() + 4, seg.end()), t.query, request,
                     out);
  }
  if (seg.size() != 5) return answer(out, 404, {{"error", "no such route"}});
  const std::string& op = seg[4];
  if (op == "timeout") {
    if (method != http::verb::put) return answer(out, 405, {{"error", "allowed: PUT"}});
    auto body = parse_json(request.body(), "body");
    if (!body) return refuse(out, {400, "body", body.error().message});
    if (!body->is_object() || !body->contains("timeout"))
      return refuse(out, {400, "timeout", "expected {\"timeout\": seconds or \"10m\"}"});
    auto timeout = parse_lifetime_timeout((*body)["timeout"], "timeout");
    if (!timeout) return refuse(out, {400, "timeout", timeout.error().message});
    auto set = sandboxes_.set_timeout(*sb, *timeout);
    if (auto* r = std::get_if<DoorRefusal>(&set)) return refuse(out, *r);
    return answer(out, 200, door_sandbox_json(*sb, worker_id_));
  }
  if (op == "exec") {
    if (method != http::verb::post) return answer(out, 405, {{"error", "allowed: POST"}});
    auto body = parse_json(request.body(), "body");
    if (!body) return refuse(out, {400, "body", body.error().message});
    auto call = parse_exec_json(*body);
    if (!call) return refuse(out, {400, call.error().where, call.error().message});
    // A call that names no cwd runs where its sandbox was told to run them.
    if (!body->contains("cwd") && !sb->cwd.empty()) call->cwd = sb->cwd;
    if (!out.begin_stream(200, "text/event-stream")) return;
    EventSink events(out);
    httpd::Responder& client = out;
    // The end goes to the front door as soon as it is known; the call's
    // record is written after (the client does not wait for it).
    bool answered = false;
    auto on_result = [&](const Result<ExecResult>& r) {
      if (!r) return;
      events.event("exit", {{"result", exec_result_json(*r, id)}});
      if (!events.gone()) (void)out.end_stream();
      answered = true;
    };
    auto result = sandboxes_.exec(
        *sb, std::move(*call), body->is_object() && body->contains("timeout"), events,
        [&client] { return client.client_gone(); }, on_result);
    if (answered) return;
    if (auto* r = std::get_if<ExecResult>(&result)) {
      events.event("exit", {{"result", exec_result_json(*r, id)}});
    } else {
      const auto& refusal = std::get<DoorRefusal>(result);
      json j = {{"error", refusal.message}, {"status", refusal.status}};
      if (!refusal.field.empty()) j["field"] = refusal.field;
      events.event("error", j);
    }
    if (!events.gone()) (void)out.end_stream();
    return;
  }
  auto path_it = t.query.find("path");
  if (path_it == t.query.end() || path_it->second.empty() || path_it->second[0] != '/') {
    return refuse(out, {400, "path", "the query needs ?path=/workspace/... (an absolute path)"});
  }
  const std::string& path = path_it->second;
  // Protocol 0.4's file operations: the runner's errors name the path (400).
  auto done = [&](const Status& s) {
    if (!s) return refuse(out, {400, "path", s.error().to_string()});
    (void)out.respond(204, "", "");
  };
  auto flag = [&](const char* name) {
    auto it = t.query.find(name);
    return it != t.query.end() && it->second == "true";
  };
  if (op == "files" && method == http::verb::delete_) {
    return done(sb->sandbox->remove(path, flag("recursive")));
  }
  if (op == "files:mkdir" && method == http::verb::post) {
    return done(sb->sandbox->make_dir(path, flag("parents")));
  }
  if (op == "files:move" && method == http::verb::post) {
    auto to = t.query.find("to");
    if (to == t.query.end() || to->second.empty() || to->second[0] != '/') {
      return refuse(out, {400, "to", "the query needs &to=/workspace/... (an absolute path)"});
    }
    return done(sb->sandbox->move(path, to->second));
  }
  if (op == "files:stat" && method == http::verb::get) {
    auto info = sb->sandbox->stat(path);
    if (!info) return refuse(out, {404, "path", info.error().to_string()});
    return answer(out, 200,
                  {{"path", path},
                   {"type", info->type},
                   {"size", info->size},
                   {"mode", info->mode},
                   {"mtime", info->mtime}});
  }
  if (op == "files:list" && method == http::verb::get) {
    int depth = 1;
    if (auto d = t.query.find("depth"); d != t.query.end()) {
      auto given = parse_list_depth(d->second);
      if (!given) return refuse(out, {400, "depth", given.error().message});
      depth = *given;
    }
    auto entries = list_tree(*sb->sandbox, path, depth);
    if (!entries) {
      const bool too_many = entries.error().where == "depth";
      return refuse(out, {too_many ? 400 : 404, too_many ? "depth" : "path",
                          too_many ? entries.error().message : entries.error().to_string()});
    }
    json list = json::array();
    for (const auto& e : *entries) {
      list.push_back({{"name", e.name},
                      {"type", e.type},
                      {"size", e.size},
                      {"mode", e.mode},
                      {"mtime", e.mtime}});
    }
    return answer(out, 200, {{"path", path}, {"entries", list}});
  }
  if (op == "files:watch" && method == http::verb::get) {
    // The stream begins with the watch (a path it cannot watch is a 400).
    std::optional<EventSink> events;
    bool cannot = false;
    sandboxes_.attach(*sb, true);
    auto followed = follow_watch(
        *sb->sandbox, path, flag("recursive"),
        [&](const char* name, const json& data) {
          if (!events && !cannot) {
            if (out.begin_stream(200, "text/event-stream")) {
              events.emplace(out);
            } else {
              cannot = true;
            }
          }
          if (events) events->event(name, data);
        },
        [&] { return cannot || (events && events->gone()) || out.client_gone(); });
    sandboxes_.attach(*sb, false);
    if (!followed) return refuse(out, {400, "path", followed.error().to_string()});
    if (events && !events->gone()) (void)out.end_stream();
    return;
  }
  if (op == "files" && method == http::verb::get) {
    auto data = sb->sandbox->read_file(path);
    if (!data) return refuse(out, {404, "path", data.error().to_string()});
    (void)out.respond(200, "application/octet-stream", *data);
    return;
  }
  if (op == "files" && method == http::verb::put) {
    uint32_t mode = 0644;
    if (auto m = t.query.find("mode"); m != t.query.end()) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(m->second.c_str(), &end, 8);
      if (m->second.empty() || *end != '\0' || v > 07777) {
        return refuse(out, {400, "mode", "expected octal permissions such as 0644"});
      }
      mode = static_cast<uint32_t>(v);
    }
    auto wrote = sb->sandbox->write_file(path, request.body(), mode);
    if (!wrote) return refuse(out, {400, "path", wrote.error().to_string()});
    return answer(out, 201, {{"path", path}, {"size", request.body().size()}});
  }
  answer(out, 404, {{"error", "no such route"}});
}

}  // namespace rf::worker

namespace rf::worker {

void Door::processes(DoorSandbox& sb, const std::vector<std::string>& rest,
                     const std::map<std::string, std::string>& query, const httpd::Request& request,
                     httpd::Responder& out) {
  auto parsed =
      parse_process_request(sv(http::to_string(request.method())), rest, query, request.body());
  if (auto* r = std::get_if<ProcessRefusal>(&parsed)) {
    return refuse(out, {r->status, r->field, r->message});
  }
  ProcessRequest& req = std::get<ProcessRequest>(parsed);
  if (req.op == ProcessOp::kStart) {
    auto started = sandboxes_.start_process(sb, std::move(req.start));
    if (auto* r = std::get_if<DoorRefusal>(&started)) return refuse(out, *r);
    return answer(out, 201, process_json(std::get<ProcessInfo>(started)));
  }
  const bool stream =
      req.op == ProcessOp::kOutput &&
      sv(request[http::field::accept]).find("text/event-stream") != std::string_view::npos;
  if (!stream) {
    auto answered = answer_process_request(*sb.processes, req);
    if (auto* r = std::get_if<ProcessRefusal>(&answered)) {
      return refuse(out, {r->status, r->field, r->message});
    }
    const int status = process_success_status(req.op);
    if (status == 204) {
      (void)out.respond(204, "", "");
      return;
    }
    return answer(out, status, std::get<json>(answered));
  }
  if (!sb.processes->find(req.pid)) {
    return refuse(out, {404, "pid", "no process " + std::to_string(req.pid)});
  }
  // Its output as events: stdout/stderr {data, offset}, skipped {bytes}
  // when the asked offset fell out of the buffer, and last end {process}.
  if (!out.begin_stream(200, "text/event-stream")) return;
  EventSink events(out);
  sandboxes_.attach(sb, true);
  follow_process_output(
      *sb.processes, req.pid, req.from,
      [&events](const char* name, const json& data) { events.event(name, data); },
      // A client that left is noticed within 100 ms, printing or not.
      [&] { return events.gone() || out.client_gone(); });
  sandboxes_.attach(sb, false);
  if (!events.gone()) (void)out.end_stream();
}

}  // namespace rf::worker

namespace rf::worker {

// A request to a port inside (issue 41 item 5): relayed through the
// sandbox's runner as bytes (sandbox/port_relay.h), its answer streamed as
// it comes; a WebSocket handshake takes the connection over both ways.
void Door::port(DoorSandbox& sb, const std::string& port_text, const httpd::Request& request,
                httpd::Responder& out) {
  auto port = parse_port(port_text);
  if (!port) return refuse(out, {400, "port", port.error().message});
  HeaderList headers;
  for (const auto& f : request) {
    headers.emplace_back(std::string(sv(f.name_string())), std::string(sv(f.value())));
  }
  const std::string target = target_after(sv(request.target()), 6);
  sandboxes_.attach(sb, true);
  struct Detach {
    DoorSandboxes& sandboxes;
    DoorSandbox& sb;
    ~Detach() { sandboxes.attach(sb, false); }
  } detach{sandboxes_, sb};
  if (is_websocket_upgrade(headers)) {
    auto raw = out.take_over();
    if (!raw) return;
    (void)relay_port_upgrade(*sb.sandbox, *port, port_upgrade_request_text(target, headers, *port),
                             raw->fd, std::move(raw->early), raw->stop_fd);
    return;
  }
  const std::string method(sv(request.method_string()));
  bool streaming = false;
  PortAnswerSink sink;
  sink.head = [&](int status, HeaderList&& passing) {
    auto [type, rest] = content_type_and_rest(std::move(passing));
    if (method == "HEAD" || status == 204 || status == 304) {
      return out.respond(status, type, "", rest).ok();
    }
    streaming = true;
    return out.begin_stream(status, type, rest).ok();
  };
  sink.body = [&](std::string_view bytes) { return out.write_chunk(bytes).ok(); };
  bool told = false;
  Status s = relay_port_answer(*sb.sandbox, *port,
                               port_request_text(method, target, headers, request.body(), *port),
                               method == "HEAD", sink, &told);
  if (!s && !told) {
    return refuse(
        out, {502, "port",
              "sandbox " + sb.id() + ": " + s.error().to_string() +
                  " (does a process listen on 127.0.0.1:" + std::to_string(*port) + " inside?)"});
  }
  if (!s) {
    out.close_connection();  // cut midway: no end of the chunked body
    return;
  }
  if (streaming) (void)out.end_stream();
}

}  // namespace rf::worker
