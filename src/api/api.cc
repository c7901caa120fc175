#include "api/api.h"

#include <signal.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "api/console_page.h"
#include "api/exec_json.h"
#include "api/fleet_metrics.h"
#include "api/fleet_view.h"
#include "api/json_answers.h"
#include "api/request_target.h"
#include "api/tokens.h"
#include "core/base64.h"
#include "core/counters.h"
#include "core/log.h"
#include "core/units.h"
#include "sandbox/result_json.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

void fail(Responder& r, const ServiceError& e) { fail(r, e.status, e.field, e.message); }

json sandbox_json(const ApiSandbox& s) {
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
      {"spec", spec_json(spec)}};
}

// Streams a call's output as server-sent events; a client that goes away
// ends the call.
class SseSink : public OutputSink {
 public:
  SseSink(Responder& r, Sandbox& sb) : r_(r), sb_(sb) {}
  void on_started(uint32_t call_id, int pid) override {
    call_id_ = call_id;
    event("started", {{"pid", pid}});
  }
  void on_stdout(std::string_view d) override { data("stdout", d); }
  void on_stderr(std::string_view d) override { data("stderr", d); }
  void event(const std::string& name, const json& body) {
    if (gone_) return;
    if (!r_.write_chunk("event: " + name + "\ndata: " + body.dump() + "\n\n")) {
      gone_ = true;
      if (call_id_ != 0) (void)sb_.send_signal(call_id_, SIGKILL);
    }
  }
  bool gone() const { return gone_; }

 private:
  void data(const char* stream, std::string_view d) {
    json j;
    put_bytes(j, "data", std::string(d));
    event(stream, j);
  }
  Responder& r_;
  Sandbox& sb_;
  uint32_t call_id_ = 0;
  bool gone_ = false;
};

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

bool wants_sse(const Request& request) {
  const std::string_view accept = sv(request[http::field::accept]);
  return accept.find("text/event-stream") != std::string_view::npos;
}

}  // namespace

Api::Api(store::Store& store, SandboxService& sandboxes, ApiOptions options)
    : store_(store), tokens_(store), sandboxes_(sandboxes), mcp_(sandboxes), options_(options) {}

std::optional<Api::Caller> Api::authenticate(const Request& request, Responder& responder) {
  const std::vector<std::pair<std::string, std::string>> challenge = {
      {"WWW-Authenticate", "Bearer realm=\"ringfence\""}};
  const std::string_view auth = sv(request[http::field::authorization]);
  if (auth.empty()) {
    ++unauthorized_;
    answer(responder, 401,
           {{"error", "no token: send Authorization: Bearer <token> (ringfence token create)"}},
           challenge);
    return std::nullopt;
  }
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view token = auth;
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  if (token.size() > kBearer.size() && lower(token.substr(0, kBearer.size())) == "bearer ") {
    token.remove_prefix(kBearer.size());
  } else {
    ++unauthorized_;
    answer(responder, 401, {{"error", "the Authorization header is not \"Bearer <token>\""}},
           challenge);
    return std::nullopt;
  }
  if (!looks_like_token(token)) {
    ++unauthorized_;
    answer(responder, 401, {{"error", "that is not a ringfence API token (rft_...)"}}, challenge);
    return std::nullopt;
  }
  const std::string hash = hash_token(token);
  const auto now = std::chrono::steady_clock::now();
  std::optional<store::TokenRow> row;
  bool cached = false;
  {
    std::lock_guard lock(mu_);
    auto it = token_cache_.find(hash);
    if (it != token_cache_.end() && now - it->second.fetched < options_.token_cache) {
      row = it->second.row;
      cached = true;
    }
  }
  if (!cached) {
    auto found = tokens_.find_by_hash(hash);
    if (!found) {
      spdlog::error("serve: token lookup: {}", found.error().to_string());
      answer(responder, 503, {{"error", "the store cannot be read"}});
      return std::nullopt;
    }
    row = *found;
    if (row) (void)tokens_.touch(row->id, store_.clock_now());
    std::lock_guard lock(mu_);
    if (token_cache_.size() > 10000) token_cache_.clear();
    token_cache_[hash] = CachedToken{row, now};
  }
  if (!row || !row->live(store_.clock_now())) {
    ++unauthorized_;
    const std::string why = !row              ? "unknown token"
                            : row->revoked_at ? "token " + row->id + " is revoked"
                                              : "token " + row->id + " has expired";
    answer(responder, 401, {{"error", why}}, challenge);
    return std::nullopt;
  }
  return Caller{row->id, row->name, row->project};
}

void Api::handle(const Request& request, Responder& responder) {
  ++requests_;
  const Target t = split_target(sv(request.target()));
  if (t.segments.size() == 1 && t.segments[0] == "healthz") {
    answer(responder, 200, {{"ok", true}});
    return;
  }
  // The console's page is static and holds nothing: it asks for a token and
  // reads everything through the API with it.
  if (t.ok && t.segments.empty() &&
      (request.method() == http::verb::get || request.method() == http::verb::head)) {
    (void)responder.respond(200, "text/html; charset=utf-8", console_page(),
                            {{"Content-Security-Policy",
                              "default-src 'self'; script-src 'unsafe-inline'; "
                              "style-src 'unsafe-inline'; connect-src 'self'"},
                             {"X-Frame-Options", "DENY"}});
    return;
  }
  auto caller = authenticate(request, responder);
  if (!caller) return;
  {
    std::lock_guard lock(mu_);
    int& n = in_flight_[caller->token_id];
    if (n >= options_.max_requests_per_token) {
      ++throttled_;
      answer(responder, 429,
             {{"error", "token " + caller->token_id + " has " + std::to_string(n) +
                            " requests in flight, the most allowed"}},
             {{"Retry-After", "1"}});
      return;
    }
    ++n;
  }
  route(*caller, t, request, responder);
  std::lock_guard lock(mu_);
  if (--in_flight_[caller->token_id] == 0) in_flight_.erase(caller->token_id);
}

void Api::route(const Caller& caller, const Target& t, const Request& request,
                Responder& responder) {
  if (!t.ok) {
    fail(responder, 400, "path", "bad percent-encoding in the request target");
    return;
  }
  const auto& seg = t.segments;
  const http::verb method = request.method();
  auto not_found = [&] {
    fail(responder, 404, "",
         "no such route: " + std::string(request.method_string()) + " " +
             std::string(sv(request.target()).substr(0, 200)));
  };
  auto not_allowed = [&](const char* allowed) {
    (void)responder.respond(405, kJson,
                            json{{"error", std::string("allowed: ") + allowed}}.dump() + "\n",
                            {{"Allow", allowed}});
  };

  if (seg.size() == 1 && seg[0] == "metrics") {
    if (method != http::verb::get) return not_allowed("GET");
    (void)responder.respond(200, "text/plain; version=0.0.4", metrics_text());
    return;
  }
  if (seg.size() == 1 && seg[0] == "mcp") {
    if (method != http::verb::post) return not_allowed("POST");
    serve_mcp(caller, request, responder);
    return;
  }
  if (seg.size() < 2 || seg[0] != "v1") return not_found();
  // GET /v1/fleet: the workers that may serve the caller's project, with the
  // load of that project only (a token sees nothing of another project's).
  if (seg.size() == 2 && seg[1] == "fleet") {
    if (method != http::verb::get) return not_allowed("GET");
    auto fleet = store_.fleet(caller.project);
    if (!fleet) return fail(responder, 500, "", fleet.error().to_string());
    answer(responder, 200, fleet_json(*fleet, store::now_ms()));
    return;
  }
  if (seg[1] == "secrets") {
    route_secrets(caller, t, request, responder);
    return;
  }
  if (seg[1] == "workflows" || seg[1] == "runs" || seg[1] == "calls" || seg[1] == "approvals" ||
      seg[1] == "audit" || seg[1] == "audit:verify" || seg[1] == "console") {
    if (seg[1] == "audit" && seg.size() > 2) {
      route_audit_proofs(caller, t, request, responder);
      return;
    }
    route_records(caller, t, request, responder);
    return;
  }
  if (seg[1] != "sandboxes") return not_found();

  // /v1/sandboxes
  if (seg.size() == 2) {
    if (method == http::verb::post) {
      auto made = sandboxes_.create(caller.project, request.body());
      if (auto* e = std::get_if<ServiceError>(&made)) return fail(responder, *e);
      const auto& s = std::get<std::shared_ptr<ApiSandbox>>(made);
      answer(responder, 201, sandbox_json(*s), {{"Location", "/v1/sandboxes/" + s->id()}});
      return;
    }
    if (method == http::verb::get) {
      json list = json::array();
      for (const auto& s : sandboxes_.list(caller.project)) list.push_back(sandbox_json(*s));
      answer(responder, 200, {{"sandboxes", list}});
      return;
    }
    return not_allowed("GET, POST");
  }

  auto sb = sandboxes_.find(caller.project, seg[2]);
  if (!sb) {
    fail(responder, 404, "id", "no sandbox " + seg[2]);
    return;
  }
  if (seg.size() == 3) {
    if (method == http::verb::get) return answer(responder, 200, sandbox_json(*sb));
    if (method == http::verb::delete_) {
      auto gone = sandboxes_.destroy(caller.project, seg[2]);
      if (!gone) return fail(responder, 500, "", gone.error().to_string());
      if (!*gone) return fail(responder, 404, "id", "no sandbox " + seg[2]);
      (void)responder.respond(204, "", "");
      return;
    }
    return not_allowed("GET, DELETE");
  }
  if (seg.size() != 4) return not_found();
  const std::string& op = seg[3];

  if (op == "exec") {
    if (method != http::verb::post) return not_allowed("POST");
    const json body = json::parse(request.body(), nullptr, false);
    if (body.is_discarded()) return fail(responder, 400, "body", "not valid JSON");
    auto parsed = parse_exec(body);
    if (auto* e = std::get_if<ServiceError>(&parsed)) return fail(responder, *e);
    ExecCall call = std::get<ExecCall>(std::move(parsed));
    ++sb->running;
    ++execs_;
    struct Done {
      ApiSandbox& s;
      ~Done() { --s.running; }
    } done{*sb};
    if (wants_sse(request)) {
      ++streams_open_;
      if (!responder.begin_stream(200, "text/event-stream")) {
        --streams_open_;
        return;
      }
      SseSink sink(responder, *sb->sandbox);
      auto result = sb->sandbox->exec(call, sink);
      if (result) {
        sink.event("exit", exec_result_json(*result, sb->id()));
      } else {
        ++exec_errors_;
        sink.event("error", {{"error", result.error().to_string()}});
      }
      if (!sink.gone()) (void)responder.end_stream();
      --streams_open_;
      return;
    }
    CollectSink sink;
    auto result = sb->sandbox->exec(call, sink);
    if (!result) {
      ++exec_errors_;
      // The sandbox was deleted under the call, or its runner is gone.
      return fail(responder, sandboxes_.find(caller.project, seg[2]) ? 500 : 409, "",
                  result.error().to_string());
    }
    answer(responder, 200, exec_answer(*result, sb->id(), sink));
    return;
  }

  if (op == "files" || op == "files:list") {
    auto path_it = t.query.find("path");
    if (path_it == t.query.end() || path_it->second.empty()) {
      return fail(responder, 400, "path", "the query needs ?path=/workspace/...");
    }
    const std::string& path = path_it->second;
    if (path[0] != '/') return fail(responder, 400, "path", "expected an absolute path");
    if (op == "files:list") {
      if (method != http::verb::get) return not_allowed("GET");
      auto entries = sb->sandbox->list_dir(path);
      if (!entries) return fail(responder, 404, "path", entries.error().to_string());
      json list = json::array();
      for (const auto& e : *entries) {
        list.push_back({{"name", e.name},
                        {"type", e.type},
                        {"size", e.size},
                        {"mode", e.mode},
                        {"mtime", e.mtime}});
      }
      answer(responder, 200, {{"path", path}, {"entries", list}});
      return;
    }
    if (method == http::verb::get) {
      auto data = sb->sandbox->read_file(path);
      if (!data) return fail(responder, 404, "path", data.error().to_string());
      (void)responder.respond(200, "application/octet-stream", *data);
      return;
    }
    if (method == http::verb::put) {
      uint32_t mode = 0644;
      if (auto m = t.query.find("mode"); m != t.query.end()) {
        char* end = nullptr;
        const unsigned long v = std::strtoul(m->second.c_str(), &end, 8);
        if (m->second.empty() || *end != '\0' || v > 07777) {
          return fail(responder, 400, "mode", "expected octal permissions such as 0644");
        }
        mode = static_cast<uint32_t>(v);
      }
      auto wrote = sb->sandbox->write_file(path, request.body(), mode);
      if (!wrote) return fail(responder, 400, "path", wrote.error().to_string());
      answer(responder, 201, {{"path", path}, {"size", request.body().size()}});
      return;
    }
    return not_allowed("GET, PUT");
  }
  not_found();
}

// MCP's Streamable HTTP transport, statelessly: one JSON-RPC message per
// POST, answered as application/json (notifications: 202, no body).
void Api::serve_mcp(const Caller& caller, const Request& request, Responder& responder) {
  // A page in a browser must not drive the sandboxes (DNS rebinding): only
  // loopback origins, or none (not a browser).
  const std::string_view origin = sv(request[http::field::origin]);
  if (!origin.empty()) {
    const bool local = origin.rfind("http://127.0.0.1", 0) == 0 ||
                       origin.rfind("http://localhost", 0) == 0 ||
                       origin.rfind("http://[::1]", 0) == 0;
    if (!local)
      return fail(responder, 403, "Origin", "origin " + std::string(origin) + " is not allowed");
  }
  const std::string_view type = sv(request[http::field::content_type]);
  if (type.substr(0, type.find(';')) != "application/json") {
    return fail(responder, 415, "Content-Type", "MCP messages are application/json");
  }
  const json message = json::parse(request.body(), nullptr, false);
  if (message.is_discarded()) {
    answer(responder, 400,
           {{"jsonrpc", "2.0"},
            {"id", nullptr},
            {"error", {{"code", -32700}, {"message", "Parse error"}}}});
    return;
  }
  const std::string header_version(sv(request["MCP-Protocol-Version"]));
  auto reply = mcp_.handle(caller.project, message, header_version);
  if (!reply) {
    (void)responder.respond(202, "", "");
    return;
  }
  answer(responder, 200, *reply);
}

std::string Api::metrics_text() {
  const auto counts = sandboxes_.counts();
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line("# HELP ringfence_sandboxes_live Sandboxes this server holds, by backend.");
  line("# TYPE ringfence_sandboxes_live gauge");
  for (const auto& [b, n] : counts.live_by_backend) {
    line("ringfence_sandboxes_live{backend=\"" + b + "\"} " + std::to_string(n));
  }
  line("# TYPE ringfence_sandboxes_created_total counter");
  line("ringfence_sandboxes_created_total " + std::to_string(counts.created));
  line("# TYPE ringfence_sandboxes_destroyed_total counter");
  line("ringfence_sandboxes_destroyed_total " + std::to_string(counts.destroyed));
  line("# TYPE ringfence_sandbox_create_failures_total counter");
  line("ringfence_sandbox_create_failures_total " + std::to_string(counts.create_failures));
  line("# HELP ringfence_sandbox_setup_seconds Time to create a sandbox.");
  line("# TYPE ringfence_sandbox_setup_seconds histogram");
  const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  double sum = 0;
  for (double ms : counts.setup_ms) sum += ms / 1000.0;
  for (double b : bounds) {
    size_t n = 0;
    for (double ms : counts.setup_ms) n += ms / 1000.0 <= b;
    char le[32];
    std::snprintf(le, sizeof le, "%g", b);
    line("ringfence_sandbox_setup_seconds_bucket{le=\"" + std::string(le) + "\"} " +
         std::to_string(n));
  }
  line("ringfence_sandbox_setup_seconds_bucket{le=\"+Inf\"} " +
       std::to_string(counts.setup_ms.size()));
  line("ringfence_sandbox_setup_seconds_sum " + std::to_string(sum));
  line("ringfence_sandbox_setup_seconds_count " + std::to_string(counts.setup_ms.size()));
  line("# TYPE ringfence_api_requests_total counter");
  line("ringfence_api_requests_total " + std::to_string(requests_.load()));
  line("# TYPE ringfence_api_unauthorized_total counter");
  line("ringfence_api_unauthorized_total " + std::to_string(unauthorized_.load()));
  line("# TYPE ringfence_api_throttled_total counter");
  line("ringfence_api_throttled_total " + std::to_string(throttled_.load()));
  line("# TYPE ringfence_execs_total counter");
  line("ringfence_execs_total " + std::to_string(execs_.load()));
  line("# TYPE ringfence_exec_errors_total counter");
  line("ringfence_exec_errors_total " + std::to_string(exec_errors_.load()));
  line("# TYPE ringfence_sse_streams_open gauge");
  line("ringfence_sse_streams_open " + std::to_string(streams_open_.load()));
  // With this process's own counters (its sandboxes' egress decisions).
  return out + fleet_metrics_text(store_, store::now_ms(), counters::snapshot());
}

}  // namespace rf::api
