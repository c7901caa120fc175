#include "api/api.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/console_page.h"
#include "api/fleet_metrics.h"
#include "api/fleet_view.h"
#include "api/json_answers.h"
#include "api/tokens.h"
#include "core/counters.h"
#include "core/log.h"
#include "core/printable.h"
#include "store/audit_log.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;
using policy::Principal;

namespace {

// One segment of a route's path against one of the request's: a literal, or
// "{name}" (any segment), or "{name}:action" (a segment ending in ":action",
// with something before it). Routes are tried in the table's order.
bool segment_matches(std::string_view pattern, const std::string& segment,
                     std::map<std::string, std::string>* params) {
  if (pattern.empty() || pattern.front() != '{') return pattern == segment;
  const auto close = pattern.find('}');
  const std::string name(pattern.substr(1, close - 1));
  const std::string_view suffix = pattern.substr(close + 1);
  if (suffix.empty()) {
    if (segment.empty()) return false;
    (*params)[name] = segment;
    return true;
  }
  if (segment.size() <= suffix.size() || !segment.ends_with(suffix)) return false;
  (*params)[name] = segment.substr(0, segment.size() - suffix.size());
  return true;
}

// The value of cookie `name` in a Cookie header ("" when absent).
std::string cookie_value(std::string_view header, const std::string& name) {
  while (!header.empty()) {
    const size_t end = header.find(';');
    std::string_view pair = header.substr(0, end);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name)
      return std::string(pair.substr(eq + 1));
    if (end == std::string_view::npos) break;
    header.remove_prefix(end + 1);
  }
  return "";
}

bool path_matches(std::string_view path, const std::vector<std::string>& segments,
                  std::map<std::string, std::string>* params, bool rest = false) {
  size_t i = 0;
  while (!path.empty()) {
    path.remove_prefix(1);  // '/'
    const auto end = path.find('/');
    const std::string_view pattern = path.substr(0, end);
    path = end == std::string_view::npos ? std::string_view() : path.substr(end);
    if (pattern.empty()) break;  // "/"
    if (rest && path.empty() && pattern.front() == '{') {
      // The last {name} of a rest route: every segment left, none included.
      std::string all;
      for (; i < segments.size(); ++i) all += (all.empty() ? "" : "/") + segments[i];
      (*params)[std::string(pattern.substr(1, pattern.size() - 2))] = all;
      return true;
    }
    if (i >= segments.size() || !segment_matches(pattern, segments[i], params)) return false;
    ++i;
  }
  return i == segments.size();
}

}  // namespace

std::span<const Api::Route> Api::routes() {
  using V = http::verb;
  static const Route kRoutes[] = {
      {V::get, "/healthz", Access::kPublic, &Api::healthz},
      {V::get, "/", Access::kPublic, &Api::console, "*"},
      {V::get, "/metrics", Access::kOperator, &Api::metrics},
      {V::post, "/mcp", Access::kToken, &Api::mcp},
      {V::get, "/v1/fleet", Access::kOperator, &Api::fleet, "project"},
      {V::post, "/v1/sandboxes", Access::kToken, &Api::sandboxes_create},
      {V::get, "/v1/sandboxes", Access::kToken, &Api::sandboxes_list,
       "project,name,state,metadata"},
      {V::get, "/v1/sandboxes/{id}", Access::kToken, &Api::sandbox_get},
      {V::delete_, "/v1/sandboxes/{id}", Access::kToken, &Api::sandbox_delete},
      {V::put, "/v1/sandboxes/{id}/timeout", Access::kToken, &Api::sandbox_timeout},
      {V::post, "/v1/sandboxes/{id}:pause", Access::kToken, &Api::sandbox_pause},
      {V::post, "/v1/sandboxes/{id}:resume", Access::kToken, &Api::sandbox_resume},
      {V::post, "/v1/sandboxes/{id}/exec", Access::kToken, &Api::sandbox_exec},
      {V::get, "/v1/sandboxes/{id}/files", Access::kToken, &Api::sandbox_file_get, "path"},
      {V::put, "/v1/sandboxes/{id}/files", Access::kToken, &Api::sandbox_file_put, "path,mode"},
      {V::get, "/v1/sandboxes/{id}/files:list", Access::kToken, &Api::sandbox_files_list,
       "path,depth"},
      {V::get, "/v1/sandboxes/{id}/files:stat", Access::kToken, &Api::sandbox_file_stat, "path"},
      {V::delete_, "/v1/sandboxes/{id}/files", Access::kToken, &Api::sandbox_file_delete,
       "path,recursive"},
      {V::post, "/v1/sandboxes/{id}/files:mkdir", Access::kToken, &Api::sandbox_file_mkdir,
       "path,parents"},
      {V::post, "/v1/sandboxes/{id}/files:move", Access::kToken, &Api::sandbox_file_move},
      {V::get, "/v1/sandboxes/{id}/files:watch", Access::kToken, &Api::sandbox_file_watch,
       "path,recursive"},
      {V::post, "/v1/sandboxes/{id}/processes", Access::kToken, &Api::sandbox_processes},
      {V::get, "/v1/sandboxes/{id}/processes", Access::kToken, &Api::sandbox_processes},
      {V::get, "/v1/sandboxes/{id}/processes/{pid}", Access::kToken, &Api::sandbox_processes},
      {V::delete_, "/v1/sandboxes/{id}/processes/{pid}", Access::kToken, &Api::sandbox_processes},
      {V::get, "/v1/sandboxes/{id}/processes/{pid}/output", Access::kToken, &Api::sandbox_processes,
       "from,wait_ms"},
      {V::post, "/v1/sandboxes/{id}/processes/{pid}/stdin", Access::kToken,
       &Api::sandbox_processes},
      {V::post, "/v1/sandboxes/{id}/processes/{pid}/stdin:close", Access::kToken,
       &Api::sandbox_processes},
      {V::post, "/v1/sandboxes/{id}/processes/{pid}/signal", Access::kToken,
       &Api::sandbox_processes},
      {V::post, "/v1/sandboxes/{id}/processes/{pid}/resize", Access::kToken,
       &Api::sandbox_processes},
      {V::post, "/v1/sandboxes/{id}/ports/{port}:share", Access::kToken, &Api::sandbox_port_share},
      {V::get, "/v1/sandboxes/{id}/ports", Access::kToken, &Api::sandbox_ports},
      {V::get, "/v1/sandboxes/{id}/ports/{port}/{path}", Access::kToken, &Api::sandbox_port, "*",
       true},
      {V::post, "/v1/sandboxes/{id}/ports/{port}/{path}", Access::kToken, &Api::sandbox_port, "*",
       true},
      {V::put, "/v1/sandboxes/{id}/ports/{port}/{path}", Access::kToken, &Api::sandbox_port, "*",
       true},
      {V::patch, "/v1/sandboxes/{id}/ports/{port}/{path}", Access::kToken, &Api::sandbox_port, "*",
       true},
      {V::delete_, "/v1/sandboxes/{id}/ports/{port}/{path}", Access::kToken, &Api::sandbox_port,
       "*", true},
      {V::post, "/v1/volumes", Access::kToken, &Api::volumes_create},
      {V::get, "/v1/volumes", Access::kToken, &Api::volumes_list},
      {V::get, "/v1/volumes/{name}", Access::kToken, &Api::volume_get},
      {V::delete_, "/v1/volumes/{name}", Access::kToken, &Api::volume_delete},
      {V::get, "/v1/secrets", Access::kToken, &Api::secrets_list},
      {V::get, "/v1/secrets/{name}", Access::kToken, &Api::secret_get},
      {V::put, "/v1/secrets/{name}", Access::kToken, &Api::secret_put},
      {V::delete_, "/v1/secrets/{name}", Access::kToken, &Api::secret_delete, "hard"},
      {V::post, "/v1/workflows/runs", Access::kToken, &Api::runs_start},
      {V::get, "/v1/runs", Access::kToken, &Api::runs_list, "project"},
      {V::get, "/v1/runs/{id}", Access::kToken, &Api::run_get},
      {V::post, "/v1/runs/{id}:cancel", Access::kToken, &Api::run_cancel},
      {V::post, "/v1/runs/{id}:replay", Access::kToken, &Api::run_replay},
      {V::get, "/v1/runs/{id}/events", Access::kToken, &Api::run_events},
      {V::post, "/v1/calls", Access::kToken, &Api::calls_create},
      {V::get, "/v1/calls/{id}", Access::kToken, &Api::call_get},
      {V::get, "/v1/approvals", Access::kToken, &Api::approvals_list, "project"},
      {V::get, "/v1/approvals/{id}", Access::kToken, &Api::approval_get},
      {V::post, "/v1/approvals/{id}:approve", Access::kToken, &Api::approval_approve},
      {V::post, "/v1/approvals/{id}:deny", Access::kToken, &Api::approval_deny},
      {V::get, "/v1/audit", Access::kToken, &Api::audit_list, "project,after,limit"},
      {V::get, "/v1/audit:verify", Access::kToken, &Api::audit_verify},
      {V::get, "/v1/audit/checkpoint", Access::kToken, &Api::audit_checkpoint},
      {V::get, "/v1/audit/proofs/inclusion", Access::kToken, &Api::audit_inclusion, "seq"},
      {V::get, "/v1/audit/proofs/consistency", Access::kToken, &Api::audit_consistency, "from,to"},
      {V::get, "/v1/console/events", Access::kToken, &Api::console_events, "project"},
  };
  return kRoutes;
}

std::vector<std::string> Api::route_names() {
  std::vector<std::string> out;
  for (const Route& r : routes()) {
    out.push_back(std::string(http::to_string(r.method)) + " " + std::string(r.path));
  }
  return out;
}

Api::Api(store::Store& store, SandboxService& sandboxes, ApiOptions options)
    : store_(store),
      tokens_(store),
      sandboxes_(sandboxes),
      mcp_(sandboxes),
      options_(std::move(options)) {
  if (!options_.state_dir.empty()) {
    auto tokens = PortTokens::open(options_.state_dir);
    if (tokens) {
      port_tokens_ = std::move(*tokens);
    } else {
      spdlog::warn("port tokens: {}; POST .../ports/PORT:share answers 503",
                   tokens.error().to_string());
    }
  }
}

std::optional<Principal> Api::authenticate(const Request& request, Responder& responder) {
  const std::vector<std::pair<std::string, std::string>> challenge = {
      {"WWW-Authenticate", "Bearer realm=\"ringfence\""}};
  auto refuse = [&](const std::string& why) {
    ++unauthorized_;
    answer(responder, 401, {{"error", why}}, challenge);
    return std::nullopt;
  };
  const std::string_view auth = sv(request[http::field::authorization]);
  if (auth.empty()) {
    return refuse("no token: send Authorization: Bearer <token> (ringfence token create)");
  }
  constexpr std::string_view kBearer = "bearer ";
  std::string scheme(auth.substr(0, std::min(auth.size(), kBearer.size())));
  for (char& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (auth.size() <= kBearer.size() || scheme != kBearer) {
    return refuse("the Authorization header is not \"Bearer <token>\"");
  }
  const std::string_view token = auth.substr(kBearer.size());
  if (!looks_like_token(token)) return refuse("that is not a ringfence API token (rft_...)");
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
  if (!row) return refuse("unknown token");
  if (!row->live(store_.clock_now())) {
    return refuse(row->revoked_at ? "token " + row->id + " is revoked"
                                  : "token " + row->id + " has expired");
  }
  auto role = policy::parse_role(row->role);
  return Principal::token(row->id, row->name, row->project, row->user,
                          role ? *role : policy::Role::kAgent);
}

bool Api::take_slot(const Principal& who, Responder& responder) {
  std::lock_guard lock(mu_);
  int& n = in_flight_[who.token_id];
  if (n >= options_.max_requests_per_token) {
    ++throttled_;
    answer(responder, 429,
           {{"error", "token " + who.token_id + " has " + std::to_string(n) +
                          " requests in flight, the most allowed"}},
           {{"Retry-After", "1"}});
    return false;
  }
  ++n;
  return true;
}

void Api::give_slot(const Principal& who) {
  std::lock_guard lock(mu_);
  if (--in_flight_[who.token_id] == 0) in_flight_.erase(who.token_id);
}

void Api::handle(const Request& request, Responder& responder) {
  ++requests_;
  const Target t = split_target(sv(request.target()));
  http::verb method = request.method();
  if (method == http::verb::head) method = http::verb::get;

  // The route first, by path then method; what needs no token answers now.
  const Route* route = nullptr;
  std::map<std::string, std::string> params;
  std::string allowed;
  if (t.ok) {
    for (const Route& r : routes()) {
      std::map<std::string, std::string> p;
      if (!path_matches(r.path, t.segments, &p, r.rest)) continue;
      if (r.method == method) {
        route = &r;
        params = std::move(p);
        break;
      }
      if (allowed.find(std::string(http::to_string(r.method))) == std::string::npos)
        allowed += (allowed.empty() ? "" : ", ") + std::string(http::to_string(r.method));
    }
  }
  // A port by host name: every path under it is the port's.
  bool host_form = false;
  if (!options_.port_domain.empty()) {
    if (auto ph = parse_port_host(sv(request[http::field::host]), options_.port_domain)) {
      host_form = true;
      route = nullptr;
      for (const Route& r : routes()) {
        if (r.fn == &Api::sandbox_port && r.method == method) route = &r;
      }
      params = {{"id", ph->sandbox}, {"port", std::to_string(ph->port)}, {"path", ""}};
      if (route == nullptr) {
        return fail(responder, 405, "", "a port takes GET, HEAD, POST, PUT, PATCH and DELETE");
      }
    }
  }
  static const Principal kAnonymous =
      Principal::token("", "", "", std::nullopt, policy::Role::kAgent);
  if (route != nullptr && route->access == Access::kPublic) {
    Ctx c{kAnonymous, t, request, responder, std::move(params)};
    (this->*route->fn)(c);
    return;
  }
  // A browser's request to one port, with that port's own token (issue 41):
  // it opens this port of this sandbox and nothing else.
  if (route != nullptr && route->fn == &Api::sandbox_port &&
      sv(request[http::field::authorization]).empty()) {
    std::string from_query, token;
    if (auto q = t.query.find(PortTokens::kQueryName); q != t.query.end()) from_query = q->second;
    token =
        from_query.empty()
            ? cookie_value(sv(request[http::field::cookie]),
                           PortTokens::cookie_name(params["id"], std::atoi(params["port"].c_str())))
            : from_query;
    if (!token.empty()) {
      auto project = port_tokens_
                         ? port_tokens_->check(token, params["id"],
                                               std::atoi(params["port"].c_str()), store::now_ms())
                         : Result<std::string>(
                               make_error("rf_port_token", "this server makes no port tokens"));
      if (!project) {
        ++unauthorized_;
        return fail(responder, 401, "rf_port_token", project.error().message);
      }
      const Principal port_principal =
          Principal::token("port-token", "port", *project, std::nullopt, policy::Role::kAgent);
      Ctx c{port_principal, t, request, responder, std::move(params)};
      c.port_token = from_query;
      c.host_form = host_form;
      (this->*route->fn)(c);
      return;
    }
  }
  auto who = authenticate(request, responder);
  if (!who) return;
  if (!t.ok) return fail(responder, 400, "path", "bad percent-encoding in the request target");
  if (route == nullptr) {
    if (!allowed.empty()) {
      (void)responder.respond(405, kJson, json{{"error", "allowed: " + allowed}}.dump() + "\n",
                              {{"Allow", allowed}});
      return;
    }
    return fail(responder, 404, "",
                "no such route: " + std::string(request.method_string()) + " " +
                    std::string(sv(request.target()).substr(0, 200)));
  }
  if (route->access == Access::kOperator) {
    if (auto s = who->require_operator(std::string(http::to_string(route->method)) + " " +
                                       std::string(route->path));
        !s) {
      ++denied_;
      return fail(responder, 403, "", s.error().message);
    }
  }
  if (route->query != "*") {
    for (const auto& [name, value] : t.query) {
      if (("," + std::string(route->query) + ",").find("," + name + ",") != std::string::npos) {
        continue;
      }
      return fail(responder, 400, printable(name, 64),
                  route->query.empty()
                      ? "unknown query parameter (this route takes none)"
                      : "unknown query parameter (allowed: " + std::string(route->query) + ")");
    }
  }
  if (!take_slot(*who, responder)) return;
  Ctx c{*who, t, request, responder, std::move(params)};
  c.host_form = host_form;
  (this->*route->fn)(c);
  give_slot(*who);
}

std::optional<std::string> Api::project_of(Ctx& c) {
  auto it = c.target.query.find("project");
  if (it == c.target.query.end() || it->second.empty() || it->second == c.who.project) {
    return c.who.project;
  }
  // Another project: only an operator's, and for anyone else exactly what an
  // unknown project answers (nothing of it).
  if (c.who.is_operator()) return it->second;
  fail(c.out, 404, "project", "no project " + it->second);
  return std::nullopt;
}

void Api::healthz(Ctx& c) { answer(c.out, 200, {{"ok", true}}); }

// The audit chain's verdict, verified at most once every 5 s however many
// consoles follow it (a whole-log walk each time would be any token's to
// make this server do 4 times a second per stream).
std::optional<bool> Api::audit_intact() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(verdict_mu_);
  if (!verdict_ || now - verdict_at_ > std::chrono::seconds(5)) {
    auto v = store::AuditLog(store_).verify();
    verdict_ = v ? std::optional<bool>(v->intact) : std::nullopt;
    verdict_at_ = now;
  }
  return verdict_;
}

// The console's page is static and holds nothing: it asks for a token and
// reads everything through the API with it.
void Api::console(Ctx& c) {
  (void)c.out.respond(200, "text/html; charset=utf-8", console_page(),
                      {{"Content-Security-Policy",
                        "default-src 'self'; script-src 'unsafe-inline'; "
                        "style-src 'unsafe-inline'; connect-src 'self'"},
                       {"X-Frame-Options", "DENY"}});
}

void Api::metrics(Ctx& c) { (void)c.out.respond(200, "text/plain; version=0.0.4", metrics_text()); }

// GET /v1/fleet: every worker, its host, labels and load (operators only:
// it names hosts and every project's load).
void Api::fleet(Ctx& c) {
  auto project = project_of(c);
  if (!project) return;
  auto fleet = store_.fleet(c.target.query.count("project") ? std::optional<std::string>(*project)
                                                            : std::nullopt);
  if (!fleet) return fail(c.out, 500, "", fleet.error().to_string());
  answer(c.out, 200, fleet_json(*fleet, store::now_ms()));
}

// MCP's Streamable HTTP transport, statelessly: one JSON-RPC message per
// POST, answered as application/json (notifications: 202, no body).
void Api::mcp(Ctx& c) {
  // A page in a browser must not drive the sandboxes (DNS rebinding): only
  // loopback origins, or none (not a browser). The origin is parsed, not
  // matched as a prefix: http://127.0.0.1.evil.example is not loopback.
  const std::string_view origin = sv(c.request[http::field::origin]);
  if (!origin.empty() && !httpd::is_loopback_origin(origin)) {
    return fail(c.out, 403, "Origin", "origin " + std::string(origin) + " is not allowed");
  }
  const std::string_view type = sv(c.request[http::field::content_type]);
  if (type.substr(0, type.find(';')) != "application/json") {
    return fail(c.out, 415, "Content-Type", "MCP messages are application/json");
  }
  auto message = parse_json(c.request.body(), "body");
  if (!message) {
    answer(c.out, 400,
           {{"jsonrpc", "2.0"},
            {"id", nullptr},
            {"error", {{"code", -32700}, {"message", "Parse error: " + message.error().message}}}});
    return;
  }
  const std::string header_version(sv(c.request["MCP-Protocol-Version"]));
  Responder& out = c.out;
  auto reply =
      mcp_.handle(c.who.project, *message, header_version, [&out] { return out.client_gone(); });
  if (!reply) {
    (void)c.out.respond(202, "", "");
    return;
  }
  answer(c.out, 200, *reply);
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
  line("# HELP ringfence_api_denied_total Requests refused for their principal or policy.");
  line("# TYPE ringfence_api_denied_total counter");
  line("ringfence_api_denied_total " + std::to_string(denied_.load()));
  line("# TYPE ringfence_api_throttled_total counter");
  line("ringfence_api_throttled_total " + std::to_string(throttled_.load()));
  line("# TYPE ringfence_execs_total counter");
  line("ringfence_execs_total " + std::to_string(execs_.load()));
  line("# TYPE ringfence_exec_errors_total counter");
  line("ringfence_exec_errors_total " + std::to_string(exec_errors_.load()));
  line("# HELP ringfence_execs_abandoned_total Calls killed because their client went away.");
  line("# TYPE ringfence_execs_abandoned_total counter");
  line("ringfence_execs_abandoned_total " + std::to_string(counts.abandoned));
  line("# TYPE ringfence_sse_streams_open gauge");
  line("ringfence_sse_streams_open " + std::to_string(streams_open_.load()));
  // With this process's own counters (its sandboxes' egress decisions).
  return out + fleet_metrics_text(store_, store::now_ms(), counters::snapshot());
}

}  // namespace rf::api
