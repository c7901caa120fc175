// `ringfence serve` (the HTTP API, issue 14) and `ringfence token create |
// list | revoke` (its bearer tokens).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/mcp_stdio.h"
#include "api/tokens.h"
#include "cli/backends.h"
#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/tls_front.h"
#include "core/log.h"
#include "core/no_core_dumps.h"
#include "core/units.h"
#include "core/utc_time.h"
#include "httpd/http_server.h"
#include "policy/load.h"
#include "policy/principal.h"
#include "proof/signing_key.h"
#include "store/audit_log.h"
#include "store/db.h"
#include "store/store_pool.h"
#include "store/token_store.h"

namespace rf::cli {
namespace {

// Connections serve opens for the call routes on PostgreSQL, beside its own.
constexpr size_t kCallConnections = 8;

using json = nlohmann::json;

// The event of a token's creation or revocation, written with it (one
// transaction: store::TokenStore::TokenAudit).
store::TokenStore::TokenAudit audit(const std::string& kind) {
  return [kind](const store::TokenRow& t) {
    store::AuditEvent e;
    e.kind = kind;
    e.actor = "cli";
    e.project_id = t.project;
    json d = {{"token", t.id}, {"name", t.name}, {"role", t.role}};
    if (t.user) d["user"] = *t.user;
    e.detail_json = d.dump();
    return std::vector{std::move(e)};
  };
}

struct TokenFlags {
  std::string state_dir, project, name, expires, id, user, role = "agent";
  bool json = false;
};

int token_create(const TokenFlags& f) {
  if (f.project.empty()) return fail("token create: --project is required", kExitUsage);
  std::optional<int64_t> expires_ms;
  if (!f.expires.empty()) {
    auto d = parse_duration(f.expires);
    if (!d || d->count() <= 0) {
      return fail("token create: --expires \"" + f.expires +
                      "\": expected a duration such as 30d, 12h or 90m",
                  kExitUsage);
    }
    expires_ms = d->count();
  }
  if (auto role = policy::parse_role(f.role); !role) {
    return fail("token create: --role: " + role.error().message, kExitUsage);
  }
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  const api::NewToken made = api::make_token();
  store::TokenRow row;
  row.id = made.id;
  row.project = f.project;
  row.name = f.name;
  row.role = f.role;
  if (!f.user.empty()) row.user = f.user;
  row.created_at = (*st)->clock_now();
  if (expires_ms) row.expires_at = row.created_at + *expires_ms;
  if (auto added = store::TokenStore(**st).add(row, made.hash, audit("token.create")); !added) {
    return fail(added.error().to_string(), kExitRuntime);
  }
  if (f.json) {
    json j = {{"id", row.id},
              {"project", row.project},
              {"name", row.name},
              {"role", row.role},
              {"token", made.token}};
    j["user"] = row.user ? json(*row.user) : json(nullptr);
    if (row.expires_at) j["expires_at"] = iso_utc(*row.expires_at);
    std::printf("%s\n", j.dump().c_str());
  } else {
    // The token alone on stdout (TOKEN=$(ringfence token create ...)); the rest on stderr.
    std::printf("%s\n", made.token.c_str());
    std::fprintf(stderr, "ringfence: %s token %s of project %s%s%s: shown once, keep it\n",
                 row.role.c_str(), row.id.c_str(), row.project.c_str(),
                 row.user ? (", acting as user " + *row.user).c_str() : ", bound to no user",
                 row.expires_at ? (", expires " + iso_utc(*row.expires_at)).c_str() : "");
  }
  return 0;
}

int token_list(const TokenFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  auto rows = store::TokenStore(**st).list(f.project);
  if (!rows.ok()) return fail(rows.error().to_string(), kExitRuntime);
  const int64_t now = (*st)->clock_now();
  auto state = [&](const store::TokenRow& r) {
    return r.revoked_at ? "revoked" : r.live(now) ? "active" : "expired";
  };
  if (f.json) {
    json out = json::array();
    for (const auto& r : *rows) {
      json j = {{"id", r.id},
                {"project", r.project},
                {"name", r.name},
                {"role", r.role},
                {"user", r.user ? json(*r.user) : json(nullptr)},
                {"state", state(r)},
                {"created_at", iso_utc(r.created_at)}};
      j["expires_at"] = r.expires_at ? json(iso_utc(*r.expires_at)) : json(nullptr);
      j["last_used_at"] = r.last_used_at ? json(iso_utc(*r.last_used_at)) : json(nullptr);
      out.push_back(j);
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("%-18s %-16s %-16s %-9s %-12s %-8s %-21s %s\n", "ID", "PROJECT", "NAME", "ROLE",
              "USER", "STATE", "CREATED", "LAST USED");
  for (const auto& r : *rows) {
    std::printf("%-18s %-16s %-16s %-9s %-12s %-8s %-21s %s\n", r.id.c_str(), r.project.c_str(),
                r.name.c_str(), r.role.c_str(), r.user ? r.user->c_str() : "-", state(r),
                iso_utc(r.created_at).c_str(),
                r.last_used_at ? iso_utc(*r.last_used_at).c_str() : "-");
  }
  return 0;
}

int token_revoke(const TokenFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::TokenStore tokens(**st);
  auto done = tokens.revoke(f.id, audit("token.revoke"));
  if (!done.ok()) return fail(done.error().to_string(), kExitRuntime);
  if (!*done) return fail("token revoke: there is no token " + f.id + " (token list)", 1);
  std::fprintf(stderr, "ringfence: token %s revoked\n", f.id.c_str());
  return 0;
}

struct ServeFlags {
  std::string listen = "127.0.0.1:8080";
  std::string state_dir;
  bool allow_host_network = false;
  int64_t max_per_project = 64;
  int64_t max_requests_per_token = 64;
  std::string max_body = "64m";
  std::string request_timeout = "10s";
  std::string tls_cert, tls_key;
  std::string port_domain;
};

int serve(const ServeFlags& f) {
  // Secret values and the sealing key pass through this process.
  if (auto s = forbid_core_dumps(); !s)
    std::fprintf(stderr, "ringfence: warning: %s\n", s.error().to_string().c_str());
  auto address = httpd::parse_listen_address(f.listen);
  if (!address) return fail(address.error().to_string(), kExitUsage);
  const bool tls = !f.tls_cert.empty() || !f.tls_key.empty();
  if (tls && (f.tls_cert.empty() || f.tls_key.empty()))
    return fail("--tls-cert and --tls-key go together", kExitUsage);
  if (tls && address->unix_socket)
    return fail("--tls-cert: TLS is for a HOST:PORT --listen, not " + f.listen, kExitUsage);
  httpd::ServerLimits limits;
  auto body = parse_size(f.max_body);
  if (!body || *body == 0)
    return fail("--max-body \"" + f.max_body + "\": expected a size such as 64m", kExitUsage);
  limits.body_bytes = *body;
  auto head = parse_duration(f.request_timeout);
  if (!head || head->count() <= 0) {
    return fail("--request-timeout \"" + f.request_timeout + "\": expected a duration such as 10s",
                kExitUsage);
  }
  limits.head_timeout = *head;
  // Behind the TLS front every client comes through one unix socket: one
  // "address", which must not be capped below the whole server's bound.
  if (tls) limits.max_connections_per_address = limits.max_connections;
  // Below 1, every request (or sandbox) would be refused: refused here instead.
  if (f.max_requests_per_token < 1 || f.max_requests_per_token > INT_MAX) {
    return fail("--max-requests-per-token " + std::to_string(f.max_requests_per_token) +
                    ": expected 1 or more requests",
                kExitUsage);
  }
  if (f.max_per_project < 1) {
    return fail("--max-sandboxes-per-project " + std::to_string(f.max_per_project) +
                    ": expected 1 or more sandboxes",
                kExitUsage);
  }
  // Signals wait for the main thread (sigwait below): blocked before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const std::string state_dir = state_dir_or_default(f.state_dir);
  auto st = open_client_store(state_dir);
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  // serve is a front door: its clients' sandboxes live on the workers of
  // this store, each reached through its worker's door.
  store::Store& store = **st;
  api::WorkerSandboxesOptions options;
  options.allow_host_network = f.allow_host_network;
  options.max_per_project = static_cast<size_t>(f.max_per_project);
  api::WorkerSandboxes sandboxes(store, options, [&store](const std::string& project) {
    return policy::load_policy(store, project);
  });
  api::ApiOptions api_options;
  api_options.max_requests_per_token = static_cast<int>(f.max_requests_per_token);
  auto signing_key = proof::SigningKey::load_or_create(state_dir);
  if (!signing_key) return fail(signing_key.error().to_string(), kExitRuntime);
  api_options.signing_key = &*signing_key;
  api_options.state_dir = state_dir;
  api_options.port_domain = f.port_domain;
  // On PostgreSQL, the call routes get connections of their own: many
  // `call --api` clients at once (SQLite writes one at a time anyway).
  std::optional<store::StorePool> call_stores;
  const std::string target = store_target("", state_dir);
  if (store::is_postgres_uri(target)) {
    call_stores.emplace(target, kCallConnections);
    api_options.call_stores = &*call_stores;
  }
  api::Api api(**st, sandboxes, api_options);
  // With TLS, serve itself listens on a unix socket only root can reach, and
  // ringfence-serve-tls takes the --listen socket (cli/tls_front.h).
  httpd::ListenAddress own = *address;
  UniqueFd public_listener;
  std::string public_address;
  if (tls) {
    auto bound = httpd::bind_listener(*address, &public_address);
    if (!bound) return fail(bound.error().to_string(), kExitRuntime);
    public_listener = std::move(*bound);
    own =
        httpd::ListenAddress{true, state_dir + "/serve-" + std::to_string(::getpid()) + ".sock", 0};
  }
  auto server = httpd::HttpServer::listen(
      own, limits,
      [&api](const httpd::Request& req, httpd::Responder& res) { api.handle(req, res); });
  if (!server) return fail(server.error().to_string(), kExitRuntime);
  // No tenant's egress rule reaches this server (where clients reach it).
  const std::string listening = tls ? public_address : (*server)->address();
  if (!listening.starts_with("unix:")) sandboxes.reserve({listening});
  std::unique_ptr<TlsFront> front;
  if (tls) {
    if (::chmod(own.host.c_str(), 0600) != 0)
      return fail("chmod " + own.host + ": " + std::strerror(errno), kExitRuntime);
    auto started = TlsFront::start(std::move(public_listener), own.host, f.tls_cert, f.tls_key);
    if (!started) return fail(started.error().to_string(), kExitRuntime);
    front = std::move(*started);
  }
  // The first line on stdout says where (tests and scripts read it).
  if (tls) {
    std::printf("listening on https://%s\n", public_address.c_str());
  } else {
    std::printf("listening on %s%s\n", address->unix_socket ? "" : "http://",
                (*server)->address().c_str());
  }
  std::fflush(stdout);
  spdlog::info("serve: listening on {} (state {}); sandboxes live on the store's workers",
               (*server)->address(), state_dir);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("serve: signal {}: stopping (the workers keep their sandboxes)", sig);
  front.reset();  // no new connections through TLS
  (*server)->stop();
  if (tls) ::unlink(own.host.c_str());
  return 0;
}

struct McpFlags {
  std::string project;
  std::string backend = "native";
  std::string docker_host;
  int64_t max_per_project = 16;
};

// `ringfence mcp`: the MCP server on stdio, for one project, its sandboxes
// living as long as the process.
int mcp(const McpFlags& f) {
  auto kind = parse_backend_kind(f.backend);
  if (!kind) return fail("--backend: " + kind.error().message, kExitUsage);
  if (f.max_per_project < 1) {
    return fail(
        "--max-sandboxes " + std::to_string(f.max_per_project) + ": expected 1 or more sandboxes",
        kExitUsage);
  }
  ::signal(SIGPIPE, SIG_IGN);
  register_backends(BackendConfig{f.docker_host, {}, {}});
  api::LocalOptions options;
  options.backend = *kind;
  options.max_per_project = static_cast<size_t>(f.max_per_project);
  api::LocalSandboxes sandboxes(options, [](BackendKind k) { return make_backend(k); });
  api::McpServer server(sandboxes, "mcp", /*local=*/true);
  const int code = api::serve_mcp_stdio(server, f.project, STDIN_FILENO, STDOUT_FILENO);
  sandboxes.destroy_all();
  return code;
}

}  // namespace

void add_mcp_command(CLI::App* cmd, CommandResult* result) {
  auto f = std::make_shared<McpFlags>();
  cmd->add_option("--project", f->project, "The project the sandboxes are made for")
      ->check(project_name())
      ->default_val("default");
  cmd->add_option("--backend", f->backend, "The backend of the sandboxes")->default_val("native");
  cmd->add_option("--docker-host", f->docker_host, "The Docker daemon, for --backend docker");
  cmd->add_option("--max-sandboxes", f->max_per_project, "Live sandboxes at once")->default_val(16);
  cmd->callback([f, result] { result->exit_code = mcp(*f); });
}

void add_token_commands(CLI::App* token, CommandResult* result) {
  token->require_subcommand(1);
  auto f = std::make_shared<TokenFlags>();
  auto* create =
      token->add_subcommand("create", "Make an API token of one project; prints it once (stdout)");
  create->add_option("--project", f->project, "The project the token acts for")
      ->check(project_name())
      ->required();
  create->add_option("--name", f->name, "What the token is for (shown by list)");
  create->add_option("--expires", f->expires, "Lifetime: 30d, 12h, 90m (default: never)");
  create->add_option("--user", f->user,
                     "The one user the token acts as (its user-level identity); default: none, "
                     "so it cannot ask for a user's identity");
  create
      ->add_option("--role", f->role,
                   "agent: its project's routes; operator: server-wide ones too (metrics, "
                   "the fleet, every project's approvals and audit)")
      ->default_val("agent");
  create->add_option("--state-dir", f->state_dir, "The store's directory");
  create->add_flag("--json", f->json, "Print a JSON object (with the token)");
  create->callback([f, result] { result->exit_code = token_create(*f); });

  auto* list = token->add_subcommand("list", "The tokens (never their secrets)");
  list->add_option("--project", f->project, "Only this project's");
  list->add_option("--state-dir", f->state_dir, "The store's directory");
  list->add_flag("--json", f->json, "Print JSON");
  list->callback([f, result] { result->exit_code = token_list(*f); });

  auto* revoke = token->add_subcommand("revoke", "Revoke a token by id (tok_...)");
  revoke->add_option("id", f->id, "The token's id, from token list")->required();
  revoke->add_option("--state-dir", f->state_dir, "The store's directory");
  revoke->callback([f, result] { result->exit_code = token_revoke(*f); });
}

void add_serve_command(CLI::App* serve_cmd, CommandResult* result) {
  auto f = std::make_shared<ServeFlags>();
  serve_cmd->add_option("--listen", f->listen, "HOST:PORT or unix:PATH")
      ->default_val("127.0.0.1:8080");
  serve_cmd->add_option("--state-dir", f->state_dir, "The store's directory (tokens, workers)");
  serve_cmd->add_option("--tls-cert", f->tls_cert,
                        "HTTPS: the certificate chain (PEM, leaf first) to serve --listen with");
  serve_cmd->add_option("--tls-key", f->tls_key, "HTTPS: the private key of --tls-cert (PEM)");
  serve_cmd->add_flag("--allow-host-network", f->allow_host_network,
                      "Let API clients make sandboxes with network host (trusted clients only)");
  serve_cmd
      ->add_option("--max-sandboxes-per-project", f->max_per_project,
                   "Live API sandboxes one project may hold (on all the workers)")
      ->default_val(64);
  serve_cmd
      ->add_option("--max-requests-per-token", f->max_requests_per_token,
                   "Requests one token may have in flight; more get 429")
      ->default_val(64);
  serve_cmd->add_option("--max-body", f->max_body, "The largest request body (uploads)")
      ->default_val("64m");
  serve_cmd
      ->add_option("--request-timeout", f->request_timeout,
                   "A request's head must arrive within this (slow clients get 408)")
      ->default_val("10s");
  serve_cmd
      ->add_option("--port-domain", f->port_domain,
                   "Serve sandboxes' ports by host name too: {port}-{sandbox}.DOMAIN "
                   "(a wildcard DNS name that reaches this server)")
      ->check([](const std::string& d) -> std::string {
        if (d.empty() || d.front() == '.' || d.back() == '.' ||
            d.find_first_of(" /:*") != std::string::npos)
          return "expected a domain such as ports.example.com";
        return "";
      });
  serve_cmd->callback([f, result] { result->exit_code = serve(*f); });
}

}  // namespace rf::cli
