#include "store/store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <utility>

#include "core/io.h"
#include "core/unique_fd.h"
#include "store/migrations.h"
#include "store/sql.h"
#include "store/store_moved.h"

namespace rf::store {
namespace {

using namespace sql;

using json = nlohmann::json;

std::string call_name(int64_t id) { return "call " + std::to_string(id); }

// ---- enum names

template <class E>
struct Name {
  E value;
  std::string_view text;
};

constexpr Name<Environment> kEnvironments[] = {{Environment::production, "production"},
                                               {Environment::staging, "staging"},
                                               {Environment::development, "development"}};
constexpr Name<RunState> kRunStates[] = {{RunState::open, "open"}, {RunState::ended, "ended"}};
constexpr Name<CallState> kCallStates[] = {
    {CallState::queued, "queued"},           {CallState::claimed, "claimed"},
    {CallState::running, "running"},         {CallState::done, "done"},
    {CallState::interrupted, "interrupted"}, {CallState::failed, "failed"},
    {CallState::cancelled, "cancelled"},     {CallState::revoked, "revoked"}};
constexpr Name<SandboxState> kSandboxStates[] = {{SandboxState::pooled, "pooled"},
                                                 {SandboxState::active, "active"},
                                                 {SandboxState::destroyed, "destroyed"}};
constexpr Name<WorkerState> kWorkerStates[] = {{WorkerState::running, "running"},
                                               {WorkerState::stopped, "stopped"}};
constexpr Name<WorkerAdmin> kWorkerAdmins[] = {{WorkerAdmin::none, ""},
                                               {WorkerAdmin::cordoned, "cordoned"},
                                               {WorkerAdmin::draining, "draining"}};
constexpr std::string_view kSandboxModes[] = {"none", "per_tool", "per_run", "per_worker", "api"};

template <class E, size_t N>
std::string_view name_of(const Name<E> (&names)[N], E value) {
  for (const auto& n : names) {
    if (n.value == value) return n.text;
  }
  return "?";
}

template <class E, size_t N>
Result<E> parse_name(const Name<E> (&names)[N], std::string_view text, std::string_view what) {
  for (const auto& n : names) {
    if (n.text == text) return n.value;
  }
  return fail("unknown " + std::string(what) + " \"" + std::string(text) + "\"");
}

// ---- JSON of argv and env (stored as TEXT; refused when not UTF-8)

Status check_utf8(const std::string& text, const std::string& what) {
  try {
    (void)json(text).dump();
  } catch (const json::exception&) {
    return fail(what + " is not valid UTF-8");
  }
  return ok_status();
}

Status check_call_text(const NewCall& c) {
  for (size_t i = 0; i < c.argv.size(); ++i) {
    RF_TRY(check_utf8(c.argv[i], "argv[" + std::to_string(i) + "]"));
  }
  for (const auto& [key, value] : c.env) {
    RF_TRY(check_utf8(key, "an env name"));
    RF_TRY(check_utf8(value, "env " + key));
  }
  RF_TRY(check_utf8(c.sandbox_image, "sandbox_image"));
  return check_utf8(c.cwd, "cwd");
}

Result<std::vector<std::string>> argv_from_json(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_array()) return fail("its stored argv is not a JSON array");
  std::vector<std::string> argv;
  for (const json& arg : j) {
    if (!arg.is_string()) return fail("its stored argv holds a non-string");
    argv.push_back(arg.get<std::string>());
  }
  return argv;
}

Result<std::map<std::string, std::string>> env_from_json(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return fail("its stored env is not a JSON object");
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) return fail("its stored env " + key + " is not a string");
    env[key] = value.get<std::string>();
  }
  return env;
}

// ---- rows

Result<Project> read_project(const Statement& st) {
  auto env = parse_name(kEnvironments, st.text(1), "environment");
  if (!env.ok()) return env.take_error();
  return Project{st.text(0), *env, st.int64(2)};
}

constexpr std::string_view kCallColumns =
    "id, run_id, project_id, argv_json, state, worker_id, exit_code, result_json, error, "
    "enqueued_at, claimed_at, finished_at, requires_json";

Result<CallView> read_call(const Statement& st) {
  CallView v;
  v.id = st.int64(0);
  auto argv = argv_from_json(st.text(3));
  auto state = parse_name(kCallStates, st.text(4), "call state");
  if (!argv.ok()) return make_error(call_name(v.id), argv.error().to_string());
  if (!state.ok()) return make_error(call_name(v.id), state.error().to_string());
  v.run_id = st.text(1);
  v.project_id = st.text(2);
  v.argv = std::move(*argv);
  v.state = *state;
  v.worker_id = st.opt_text(5);
  v.exit_code = st.opt_int64(6);
  v.result_json = st.opt_text(7);
  v.error = st.opt_text(8);
  v.enqueued_at = st.int64(9);
  v.claimed_at = st.opt_int64(10);
  v.finished_at = st.opt_int64(11);
  auto labels = labels_from_json(st.text(12));
  if (!labels.ok())
    return make_error(call_name(v.id), "its required labels: " + labels.error().to_string());
  v.requires_labels = std::move(*labels);
  return v;
}

Result<OutputChunk> read_chunk(const Statement& st) {
  return OutputChunk{st.int64(0), static_cast<Stream>(st.int64(1)), st.blob(2)};
}

constexpr std::string_view kWorkerColumns =
    "id, pid, hostname, started_at, heartbeat_at, state, project, metrics_json, host_id, "
    "labels_json, epoch, door, door_key, admin, version";

Result<WorkerRow> read_worker(const Statement& st) {
  auto state = parse_name(kWorkerStates, st.text(5), "worker state");
  if (!state.ok()) return state.take_error();
  auto labels = labels_from_json(st.text(9));
  if (!labels.ok()) return make_error("worker " + st.text(0), labels.error().to_string());
  auto admin = parse_name(kWorkerAdmins, st.text(13), "worker admin state");
  if (!admin.ok()) return admin.take_error();
  // Rows from before host ids (schema v9) are on their hostname's host.
  std::string host_id = st.text(8).empty() ? st.text(2) : st.text(8);
  return WorkerRow{st.text(0),         st.int64(1),  st.text(2),
                   st.int64(3),        st.int64(4),  *state,
                   st.opt_text(6),     st.text(7),   std::move(host_id),
                   std::move(*labels), st.int64(10), st.opt_text(11),
                   st.opt_text(12),    *admin,       st.text(14)};
}

constexpr std::string_view kSandboxColumns =
    "id, backend, project_id, run_id, mode, worker_id, host_pid, state, created_at, "
    "destroyed_at, spec_json";

Result<SandboxRow> read_sandbox(const Statement& st) {
  auto state = parse_name(kSandboxStates, st.text(7), "sandbox state");
  if (!state.ok()) return state.take_error();
  return SandboxRow{st.text(0),  st.text(1),      st.opt_text(2),  st.opt_text(3),
                    st.text(4),  st.opt_text(5),  st.opt_int64(6), *state,
                    st.int64(8), st.opt_int64(9), st.opt_text(10)};
}

Result<Event> read_event(const Statement& st) {
  return Event{st.int64(0),     st.int64(1),    st.text(2),     st.opt_text(3), st.opt_text(4),
               st.opt_int64(5), st.opt_text(6), st.opt_text(7), st.opt_text(8)};
}

// ---- checks shared by several operations (inside their transaction)

Result<Project> require_project(Db& db, const std::string& id) {
  auto p = first_row<Project>(db, read_project,
                              "SELECT id, environment, created_at FROM projects WHERE id = ?1", id);
  if (!p.ok()) return p.take_error();
  if (!*p) return fail("project " + id + " does not exist");
  return std::move(**p);
}

struct Holder {
  std::string state;
  std::optional<std::string> worker_id;
  std::optional<int64_t> claim_epoch;
  std::optional<int64_t> worker_epoch;  // the holder's current registration
};

// The call must be claimed or running by `worker`, and the writer must hold
// the fence: `fence` (this process's registration of the worker; unknown:
// the current one) must be the worker's current epoch and the one the call
// was claimed under.
//
// Held writes run in claim transactions (no write lock), so this locks what
// it reads: the worker's row first, share-locked, then the call's row for
// update, the order every writer of both takes (claims, heartbeats, a
// registration, stop_worker), so none waits for another in a cycle. A
// registration of the same id (a new epoch) waits for this write, or this
// write sees the new epoch; a sweep or a cancel of the call waits for it and
// then finds the call ended.
//
// A lease that ran out does not by itself lose the call: until a sweep
// (interrupt_orphaned_calls) ends it, it is still the worker's, which a
// worker starved of CPU past its lease finishes (issue 40). Calls are never
// queued again, so nobody else can have taken it.
Status require_held(Db& db, int64_t call_id, const std::string& worker,
                    std::optional<int64_t> fence) {
  auto epoch = first_row<int64_t>(
      db, [](const Statement& st) -> Result<int64_t> { return st.int64(0); },
      "SELECT epoch FROM workers WHERE id = ?1" + share_locked(db), worker);
  if (!epoch.ok()) return epoch.take_error();
  auto read = [](const Statement& st) -> Result<Holder> {
    return Holder{st.text(0), st.opt_text(1), st.opt_int64(2), std::nullopt};
  };
  auto h = first_row<Holder>(db, read,
                             "SELECT state, worker_id, claim_epoch "
                             "FROM tool_calls WHERE id = ?1" +
                                 for_update(db),
                             call_id);
  if (!h.ok()) return h.take_error();
  if (!*h) return fail(call_name(call_id) + " does not exist");
  std::string lost = call_name(call_id) + " is not held by worker " + worker + " (lease lost): ";
  Holder held = **h;
  held.worker_epoch = *epoch;
  if (held.state != "claimed" && held.state != "running")
    return lease_lost(lost + "it is " + held.state);
  if (held.worker_id != worker) return lease_lost(lost + "worker " + *held.worker_id + " holds it");
  if (!held.worker_epoch) return ok_status();  // a worker row that is gone: nothing to fence
  if (fence && *fence != *held.worker_epoch) return fenced(worker, *fence, *held.worker_epoch);
  if (held.claim_epoch && *held.claim_epoch != *held.worker_epoch) {
    return lease_lost(lost + "it was claimed under epoch " + std::to_string(*held.claim_epoch) +
                      " of the worker, and the writer holds epoch " +
                      std::to_string(*held.worker_epoch) + " (fenced)");
  }
  return ok_status();
}

// Creates the run (open) or checks that it is an open run of `project`.
Status open_run(Db& db, const std::string& run, const std::string& project, int64_t now) {
  auto read = [](const Statement& st) -> Result<std::pair<std::string, std::string>> {
    return std::pair(st.text(0), st.text(1));
  };
  auto found = first_row<std::pair<std::string, std::string>>(
      db, read, "SELECT project_id, state FROM runs WHERE id = ?1", run);
  if (!found.ok()) return found.take_error();
  if (!*found) {
    return exec(db,
                "INSERT INTO runs (id, project_id, state, created_at) VALUES (?1, ?2, 'open', ?3)",
                run, project, now);
  }
  const auto& [owner, state] = **found;
  if (owner != project)
    return fail("run " + run + " belongs to project " + owner + ", not " + project);
  if (state != "open") return fail("run " + run + " has ended");
  return ok_status();
}

Status check_lease(std::chrono::milliseconds lease) {
  if (lease.count() > 0) return ok_status();
  return fail("the lease must be positive (got " + std::to_string(lease.count()) + " ms)");
}

Status validate_call(const NewCall& c) {
  if (c.project.empty()) return fail("the project id is empty");
  if (c.run.empty()) return fail("the run id is empty");
  if (c.argv.empty()) return fail("argv is empty");
  if (c.timeout.count() <= 0) {
    return fail("timeout must be positive (got " + std::to_string(c.timeout.count()) + " ms)");
  }
  if (auto labels = check_labels(c.requires_labels); !labels.ok())
    return fail("required labels: " + labels.error().to_string());
  return check_call_text(c);
}

// Until when a call's client waits for a worker (NewCall::wait_for_worker).
std::optional<int64_t> wait_until(const NewCall& c, int64_t enqueued_at) {
  if (!c.wait_for_worker) return std::nullopt;
  return enqueued_at + c.wait_for_worker->count();
}

std::optional<std::string> identity_json(const std::optional<IdentityScope>& scope, bool jit) {
  if (!scope) return std::nullopt;
  json j = {{"workflow", scope->workflow}, {"user", scope->user}};
  if (jit) j["jit"] = true;
  return j.dump();
}

// Reads the queued call in the current row; a row that cannot be decoded is
// marked failed by the caller and skipped.
Result<ClaimedCall> read_queued(const Statement& st) {
  ClaimedCall c;
  c.id = st.int64(0);
  auto argv = argv_from_json(st.text(3));
  if (!argv.ok()) return argv.take_error();
  auto env = env_from_json(st.text(4));
  if (!env.ok()) return env.take_error();
  c.call = NewCall{st.text(2),
                   st.text(1),
                   std::move(*argv),
                   std::move(*env),
                   st.text(5),
                   st.blob(6),
                   std::chrono::milliseconds(st.int64(7)),
                   st.text(8)};
  auto labels = labels_from_json(st.text(10));
  if (!labels.ok()) return fail("its required labels: " + labels.error().to_string());
  c.call.requires_labels = std::move(*labels);
  if (!st.is_null(9)) {
    json id = json::parse(st.text(9), nullptr, false);
    if (!id.is_object() || !id.value("workflow", json()).is_string() ||
        !id.value("user", json()).is_string())
      return fail("its stored identity is not {\"workflow\": \"...\", \"user\": \"...\"}");
    c.call.identity =
        IdentityScope{id["workflow"].get<std::string>(), id["user"].get<std::string>()};
    const auto jit = id.find("jit");
    c.call.jit = jit != id.end() && jit->is_boolean() && jit->get<bool>();
  }
  return c;
}

// The oldest queued call the filter allows, or nullopt. Rows that cannot be
// decoded fail (so they do not block the queue) and the next is taken.
// On PostgreSQL the row is locked (FOR UPDATE SKIP LOCKED): claimers on many
// hosts each take a different call without waiting for one another.
Result<std::optional<ClaimedCall>> next_queued(Db& db, const ClaimFilter& filter, int64_t now) {
  const std::string select =
      "SELECT id, run_id, project_id, argv_json, env_json, cwd, stdin, timeout_ms, sandbox_image, "
      "identity_json, requires_json FROM tool_calls WHERE state = 'queued' AND " +
      labels_held(db, "requires_json", 1);
  const std::string any = select + " ORDER BY id LIMIT 1" + skip_locked(db);
  const std::string of_project =
      select + " AND project_id = ?2 ORDER BY id LIMIT 1" + skip_locked(db);
  const std::string offered = labels_json(filter.labels);
  while (true) {
    auto st =
        filter.project ? query(db, of_project, offered, *filter.project) : query(db, any, offered);
    if (!st.ok()) return st.take_error();
    auto row = st->step();
    if (!row.ok()) return row.take_error();
    if (!*row) return std::optional<ClaimedCall>();
    auto call = read_queued(*st);
    if (call.ok()) return std::optional<ClaimedCall>(std::move(*call));
    RF_TRY(exec(
        db, "UPDATE tool_calls SET state = 'failed', error = ?2, finished_at = ?3 WHERE id = ?1",
        st->int64(0), call.error().to_string(), now));
  }
}

// A worker takes a queued call (claimed, or straight to running). Only a call
// still queued is taken, as cancel_queued_call cancels only a call still
// queued: whichever commits first wins, and the other changes nothing.
Status take_queued(Db& db, int64_t call_id, std::string_view state, const std::string& worker,
                   int64_t epoch, int64_t lease_expires_at, int64_t at) {
  RF_TRY(exec(db,
              "UPDATE tool_calls SET state = ?5, worker_id = ?2, lease_expires_at = ?3, "
              "claimed_at = ?4, claim_epoch = ?6 WHERE id = ?1 AND state = 'queued'",
              call_id, worker, lease_expires_at, at, state, epoch));
  if (db.changes() == 1) return ok_status();
  return fail(call_name(call_id) + " is no longer queued");
}

// Calls held (claimed or running) that match `condition` become interrupted
// with `error`; returns their ids.
template <class... Args>
Result<std::vector<int64_t>> interrupt_held(Db& db, std::string_view condition,
                                            const std::string& error, int64_t now,
                                            const Args&... args) {
  std::string sql =
      "UPDATE tool_calls SET state = 'interrupted', error = ?1, finished_at = ?2 "
      "WHERE state IN ('claimed', 'running') AND ";
  sql += condition;
  sql += " RETURNING id";
  return rows<int64_t>(db, read_int0, sql, error, now, args...);
}

// Appends chunks after the call's last one; returns the last seq (0: none).
Result<int64_t> insert_chunks(Db& db, int64_t call_id, const std::vector<PendingChunk>& chunks) {
  if (chunks.empty()) return int64_t{0};
  auto last = first_row<int64_t>(
      db, read_int0, "SELECT coalesce(max(seq), 0) FROM call_output WHERE call_id = ?1", call_id);
  if (!last.ok()) return last.take_error();
  int64_t seq = **last;
  auto st =
      db.prepare("INSERT INTO call_output (call_id, seq, stream, data) VALUES (?1, ?2, ?3, ?4)");
  if (!st.ok()) return st.take_error();
  for (const auto& c : chunks) {
    st->bind(1, call_id)
        .bind(2, ++seq)
        .bind(3, int64_t{static_cast<int>(c.stream)})
        .bind_blob(4, c.data);
    RF_TRY(st->run());
    st->reset();
  }
  return seq;
}

// The database's directory (0700 where it is made) and the file itself (0600
// where it is made; SQLite gives its journal and WAL the file's mode): the
// store holds what calls printed and the sealed secrets, for its owner only.
//
// A file that exists is never opened here: closing any descriptor of a file
// drops every POSIX lock this process holds on it, SQLite's included, and
// another process that then finds itself the last connection checkpoints
// and deletes the WAL under this process's open connections (a worker's
// second connection, issue 40, stopped seeing new calls so). O_EXCL: of two
// threads making it, one does.
Status make_private_db_file(const std::string& path) {
  RF_TRY(make_private_dirs(std::filesystem::path(path).parent_path().string()));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return ok_status();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd && errno != EACCES && errno != EEXIST) return sys_error("create " + path);
  return ok_status();
}

}  // namespace

std::string_view to_string(Environment e) { return name_of(kEnvironments, e); }
std::string_view to_string(RunState s) { return name_of(kRunStates, s); }
std::string_view to_string(CallState s) { return name_of(kCallStates, s); }
std::string_view to_string(SandboxState s) { return name_of(kSandboxStates, s); }
std::string_view to_string(WorkerState s) { return name_of(kWorkerStates, s); }
std::string_view to_string(WorkerAdmin a) { return name_of(kWorkerAdmins, a); }

Result<Environment> parse_environment(std::string_view text) {
  return parse_name(kEnvironments, text, "environment");
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// ---- opening

namespace {

// A process's bell and relay for one PostgreSQL store, shared by every Store
// it opens on that database: each listening connection is woken by every
// NOTIFY of every process, so a process with many Stores (serve's requests,
// a bench's clients) listens once.
struct SharedBell {
  pid_t pid = ::getpid();  // a forked child makes its own: the relay's threads are not in it
  std::unique_ptr<Doorbell> bell;
  std::unique_ptr<BellRelay> relay;  // declared after the bell: stops before it goes
};

Result<std::shared_ptr<SharedBell>> shared_bell(const std::string& uri) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<SharedBell>> bells;
  std::lock_guard lock(mu);
  std::weak_ptr<SharedBell>& slot = bells[uri];
  if (auto found = slot.lock(); found && found->pid == ::getpid()) return found;
  auto made = std::make_shared<SharedBell>();
  auto bell = Doorbell::open_private();
  if (!bell.ok()) return bell.take_error();
  made->bell = std::move(*bell);
  if (BellRelayMaker make = bell_relay_maker()) {
    auto relay = make(uri, *made->bell);
    if (!relay.ok()) return relay.take_error();
    made->relay = std::move(*relay);
  }
  slot = made;
  return made;
}

}  // namespace

namespace {
std::atomic<bool> one_connection_each{false};
}  // namespace

void Store::use_one_connection_each(bool on) { one_connection_each = on; }

Result<std::unique_ptr<Store>> Store::open(const std::string& target) {
  const bool postgres = is_postgres_uri(target);
  // A mistyped URI (postgress://, postgre://) would otherwise be taken for a
  // relative SQLite path and made as a file in the current directory.
  if (!postgres && target.find("://") != std::string::npos)
    return make_error("open store " + engine::redact_uri(target),
                      "an unknown scheme: expected postgres://, postgresql://, a keyword "
                      "string (host=... dbname=...), sqlite:PATH or a file path");
  const std::string path = postgres ? target : sqlite_path(target);
  if (!postgres) RF_TRY(within("open store " + path, make_private_db_file(path)));
  DbOptions options;
  options.one_shot_statements = postgres && one_connection_each;  // a client's
  auto db = Db::open(path, options);
  if (!db.ok()) return db.take_error();
  RF_TRY(migrate(*db));
  RF_TRY(refuse_moved(*db, "open store " + engine::redact_uri(path)));
  if (!postgres) {
    auto bell = Doorbell::open(path + "-bell");  // without it, waits sleep: slower, still correct
    return std::unique_ptr<Store>(
        new Store(std::move(*db), bell.ok() ? std::move(*bell) : nullptr));
  }
  // PostgreSQL: the processes sharing it live on many hosts, so each keeps a
  // bell of its own, and a relay (LISTEN/NOTIFY) rings it.
  const std::string name = db->path();  // the URI without its password
  if (one_connection_each) {
    // A client: its own connection listens, and its rings go out on it.
    RF_TRY(within("open store " + name, db->listen(kBellChannel)));
    auto bell = Doorbell::open_private();
    auto store = std::unique_ptr<Store>(new Store(
        std::move(*db), bell.ok() ? std::shared_ptr<Doorbell>(std::move(*bell)) : nullptr));
    store->listens_ = true;
    return store;
  }
  auto shared = shared_bell(path);
  if (!shared.ok()) return within("open store " + name, std::move(shared)).take_error();
  auto store = std::unique_ptr<Store>(
      new Store(std::move(*db), std::shared_ptr<Doorbell>(*shared, (*shared)->bell.get())));
  if ((*shared)->relay) store->relay_ = std::shared_ptr<BellRelay>(*shared, (*shared)->relay.get());
  return store;
}

void Store::ring(uint32_t slot) {
  if (bell_) bell_->ring(slot);
  if (relay_) relay_->publish(slot);
  if (listens_) {
    // Delivered when it commits, inside a transaction; at once outside. One
    // that cannot be sent costs its waiters their timeout (they look again).
    std::lock_guard lock(mu_);
    (void)exec(db_, "SELECT pg_notify(?1, ?2)", std::string(kBellChannel), std::to_string(slot));
  }
}

void Store::hear_rings() {
  std::vector<std::string> heard;
  {
    std::lock_guard lock(mu_);
    heard = db_.notifications();
  }
  if (!bell_) return;
  for (const std::string& payload : heard) {
    if (payload == "*") {
      bell_->ring_all();
      continue;
    }
    std::string_view rest = payload;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string number(rest.substr(0, comma));
      bell_->ring(static_cast<uint32_t>(std::strtoul(number.c_str(), nullptr, 10)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
}

void Store::wait_listening(uint32_t slot, uint32_t seen, std::chrono::microseconds timeout) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    hear_rings();
    if (!bell_ || bell_->version(slot) != seen) return;
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) return;
    int fd = -1;
    {
      std::lock_guard lock(mu_);
      fd = db_.notification_socket();
    }
    // Another thread's statement may read a notification off the socket
    // first (libpq queues it): the poll is bounded so it is heard soon.
    pollfd p{fd, POLLIN, 0};
    if (fd < 0 || ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100))) < 0) {
      std::this_thread::sleep_for(std::min(left, milliseconds(10)));
    }
  }
}

void Store::ring_queue() { ring(Doorbell::kQueueSlot); }

void Store::ring_call(int64_t call_id) { ring(Doorbell::call_slot(call_id)); }

void Store::ring_run_queue() { ring(Doorbell::kRunQueueSlot); }

namespace {
uint32_t queue_slot(Store::Queue queue) {
  return queue == Store::Queue::runs ? Doorbell::kRunQueueSlot : Doorbell::kQueueSlot;
}
}  // namespace

uint32_t Store::queue_version(Queue queue) const {
  return bell_ ? bell_->version(queue_slot(queue)) : 0;
}

uint32_t Store::call_version(int64_t call_id) const {
  return bell_ ? bell_->version(Doorbell::call_slot(call_id)) : 0;
}

namespace {
void sleep_instead(std::chrono::microseconds timeout) {
  std::this_thread::sleep_for(std::min(timeout, std::chrono::microseconds(1000)));
}
}  // namespace

void Store::wait_for_queue(uint32_t seen, std::chrono::microseconds timeout, Queue queue) const {
  if (listens_) return const_cast<Store*>(this)->wait_listening(queue_slot(queue), seen, timeout);
  if (!bell_) return sleep_instead(timeout);
  bell_->wait(queue_slot(queue), seen, timeout);
}

void Store::wait_for_call(int64_t call_id, uint32_t seen, std::chrono::microseconds timeout) const {
  if (listens_)
    return const_cast<Store*>(this)->wait_listening(Doorbell::call_slot(call_id), seen, timeout);
  if (!bell_) return sleep_instead(timeout);
  bell_->wait(Doorbell::call_slot(call_id), seen, timeout);
}

uint32_t Store::run_version(const std::string& run_id) const {
  return bell_ ? bell_->version(Doorbell::run_slot(run_id)) : 0;
}

void Store::wait_for_run(const std::string& run_id, uint32_t seen,
                         std::chrono::microseconds timeout) const {
  if (listens_)
    return const_cast<Store*>(this)->wait_listening(Doorbell::run_slot(run_id), seen, timeout);
  if (!bell_) return sleep_instead(timeout);
  bell_->wait(Doorbell::run_slot(run_id), seen, timeout);
}

void Store::ring_run(const std::string& run_id) { ring(Doorbell::run_slot(run_id)); }

void Store::set_clock(std::function<int64_t()> clock) {
  std::lock_guard lock(mu_);
  clock_ = std::move(clock);
}

// ---- projects

Status Store::ensure_project(const std::string& id, Environment environment) {
  std::lock_guard lock(mu_);
  std::string_view wanted = to_string(environment);
  auto ensure = [&]() -> Status {
    if (id.empty()) return fail("the project id is empty");
    auto existing = first_row<std::string>(db_, read_text0,
                                           "SELECT environment FROM projects WHERE id = ?1", id);
    if (!existing.ok()) return existing.take_error();
    if (!*existing) {
      return exec(db_, "INSERT INTO projects (id, environment, created_at) VALUES (?1, ?2, ?3)", id,
                  wanted, now());
    }
    if (**existing == wanted) return ok_status();
    return fail("project " + id + " is " + **existing + ", not " + std::string(wanted));
  };
  return within("ensure project " + id, write_transaction(db_, ensure));
}

Result<Project> Store::project(const std::string& id) {
  std::lock_guard lock(mu_);
  return within("read project " + id, require_project(db_, id));
}

// ---- tool calls, client side

Result<int64_t> Store::enqueue_call(const NewCall& c) {
  std::lock_guard lock(mu_);
  auto insert = [&]() -> Result<int64_t> {
    int64_t at = now();
    auto project = require_project(db_, c.project);
    if (!project.ok()) return project.take_error();
    RF_TRY(open_run(db_, c.run, c.project, at));
    return inserted_id(db_,
                       "INSERT INTO tool_calls (run_id, project_id, argv_json, env_json, cwd, "
                       "stdin, timeout_ms, state, enqueued_at, sandbox_image, identity_json, "
                       "requires_json, wait_until) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9, ?10, ?11, ?12) "
                       "RETURNING id",
                       c.run, c.project, json(c.argv).dump(), json(c.env).dump(), c.cwd,
                       Blob{c.stdin_bytes}, int64_t{c.timeout.count()}, at, c.sandbox_image,
                       identity_json(c.identity, c.jit), labels_json(c.requires_labels),
                       wait_until(c, at));
  };
  // The common case, a call into an open run of the project, is one
  // statement: it inserts only when the run is open (share-locking its row on
  // PostgreSQL, so end_run waits for it or it sees the run ended). Anything
  // else (a new run, a refusal to explain) takes the transaction above.
  auto into_open_run = [&]() -> Result<std::optional<int64_t>> {
    const int64_t at_fast = now();
    return first_row<int64_t>(
        db_, read_int0,
        "INSERT INTO tool_calls (run_id, project_id, argv_json, env_json, cwd, stdin, "
        "timeout_ms, state, enqueued_at, sandbox_image, identity_json, requires_json, "
        "wait_until) "
        "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9, ?10, ?11, ?12 FROM runs "
        "WHERE id = ?1 AND project_id = ?2 AND state = 'open'" +
            share_locked(db_) + " RETURNING id",
        c.run, c.project, json(c.argv).dump(), json(c.env).dump(), c.cwd, Blob{c.stdin_bytes},
        int64_t{c.timeout.count()}, at_fast, c.sandbox_image, identity_json(c.identity, c.jit),
        labels_json(c.requires_labels), wait_until(c, at_fast));
  };
  std::string operation = "enqueue call in run " + c.run;
  RF_TRY(within(operation, validate_call(c)));
  auto fast = within(operation, into_open_run());
  if (!fast.ok()) return fast.take_error();
  auto id = *fast ? Result<int64_t>(**fast) : within(operation, write_transaction(db_, insert));
  if (id.ok()) ring_queue();
  return id;
}

Result<int64_t> Store::start_call(const NewCall& c, const std::string& worker_id,
                                  std::chrono::milliseconds lease) {
  std::lock_guard lock(mu_);
  auto insert = [&]() -> Result<int64_t> {
    RF_TRY(check_lease(lease));
    auto epoch = require_running_worker(db_, worker_id, fence_of(worker_id));
    if (!epoch.ok()) return epoch.take_error();
    const int64_t at = now();
    auto project = require_project(db_, c.project);
    if (!project.ok()) return project.take_error();
    RF_TRY(open_run(db_, c.run, c.project, at));
    return inserted_id(
        db_,
        "INSERT INTO tool_calls (run_id, project_id, argv_json, env_json, cwd, stdin, "
        "timeout_ms, state, worker_id, lease_expires_at, enqueued_at, claimed_at, "
        "sandbox_image, identity_json, requires_json, claim_epoch) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, ?9, ?10, ?10, ?11, ?12, ?13, ?14) "
        "RETURNING id",
        c.run, c.project, json(c.argv).dump(), json(c.env).dump(), c.cwd, Blob{c.stdin_bytes},
        int64_t{c.timeout.count()}, worker_id, at + lease.count(), at, c.sandbox_image,
        identity_json(c.identity, c.jit), labels_json(c.requires_labels), *epoch);
  };
  const std::string operation = "start call in run " + c.run;
  RF_TRY(within(operation, validate_call(c)));
  return within(operation, write_transaction(db_, insert));
}

Status Store::check_new_call(const NewCall& c) {
  return within("enqueue call in run " + c.run, validate_call(c));
}

Result<CallView> Store::call(int64_t call_id) {
  std::lock_guard lock(mu_);
  auto read = [&]() -> Result<CallView> {
    auto v = first_row<CallView>(
        db_, read_call, "SELECT " + std::string(kCallColumns) + " FROM tool_calls WHERE id = ?1",
        call_id);
    if (!v.ok()) return v.take_error();
    if (!*v) return fail(call_name(call_id) + " does not exist");
    return std::move(**v);
  };
  return within("read " + call_name(call_id), read());
}

Result<std::vector<CallView>> Store::recent_calls(const std::string& project, int limit) {
  std::lock_guard lock(mu_);
  // Backwards along the primary key: a busy project's latest are found at once.
  return within(
      "read the calls of project " + project,
      rows<CallView>(db_, read_call,
                     "SELECT " + std::string(kCallColumns) +
                         " FROM tool_calls WHERE project_id = ?1 ORDER BY id DESC LIMIT ?2",
                     project, limit));
}

Result<std::vector<OutputChunk>> Store::output(int64_t call_id, int64_t after_seq, int limit) {
  std::lock_guard lock(mu_);
  // One statement, so no transaction (on PostgreSQL a client polling its call
  // saves three round trips); the call is looked for only when there is none.
  auto read = [&]() -> Result<std::vector<OutputChunk>> {
    auto chunks = rows<OutputChunk>(db_, read_chunk,
                                    "SELECT seq, stream, data FROM call_output "
                                    "WHERE call_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                                    call_id, after_seq, limit);
    if (!chunks.ok() || !chunks->empty()) return chunks;
    auto found = first_row<std::string>(db_, read_text0,
                                        "SELECT state FROM tool_calls WHERE id = ?1", call_id);
    if (!found.ok()) return found.take_error();
    if (!*found) return fail(call_name(call_id) + " does not exist");
    return chunks;
  };
  return within("read output of " + call_name(call_id), read());
}

Result<bool> Store::cancel_queued_call(int64_t call_id, const std::string& error) {
  std::lock_guard lock(mu_);
  auto cancel = [&]() -> Result<bool> {
    auto found = first_row<std::string>(db_, read_text0,
                                        "SELECT state FROM tool_calls WHERE id = ?1", call_id);
    if (!found.ok()) return found.take_error();
    if (!*found) return fail(call_name(call_id) + " does not exist");
    RF_TRY(exec(db_,
                "UPDATE tool_calls SET state = 'cancelled', error = ?2, finished_at = ?3 "
                "WHERE id = ?1 AND state = 'queued'",
                call_id, error, now()));
    return db_.changes() == 1;
  };
  auto cancelled = within("cancel " + call_name(call_id), write_transaction(db_, cancel));
  if (cancelled.ok() && *cancelled) ring_call(call_id);
  return cancelled;
}

// ---- tool calls, worker side

Result<std::optional<ClaimedCall>> Store::claim_next(const std::string& worker_id,
                                                     std::chrono::milliseconds lease,
                                                     const ClaimFilter& filter) {
  std::lock_guard lock(mu_);
  const std::optional<int64_t> fence = fence_of(worker_id);
  auto claim = [&]() -> Result<std::optional<ClaimedCall>> {
    RF_TRY(check_lease(lease));
    auto w = running_worker(db_, worker_id, fence);
    if (!w.ok()) return w.take_error();
    if (!w->takes_work()) return std::optional<ClaimedCall>();  // cordoned or draining
    int64_t at = now();
    auto next = next_queued(db_, filter, at);
    if (!next.ok() || !*next) return next;
    ClaimedCall& c = **next;
    c.lease_expires_at = at + lease.count();
    RF_TRY(take_queued(db_, c.id, "claimed", worker_id, w->epoch, c.lease_expires_at, at));
    return next;
  };
  return within("claim a call for worker " + worker_id, claim_transaction(db_, claim));
}

Result<std::vector<ClaimedCall>> Store::claim_running(const std::string& worker_id,
                                                      std::chrono::milliseconds lease, size_t max,
                                                      const ClaimFilter& filter) {
  std::lock_guard lock(mu_);
  const std::optional<int64_t> fence = fence_of(worker_id);
  auto claim = [&]() -> Result<std::vector<ClaimedCall>> {
    RF_TRY(check_lease(lease));
    auto w = running_worker(db_, worker_id, fence);
    if (!w.ok()) return w.take_error();
    int64_t at = now();
    std::vector<ClaimedCall> out;
    while (w->takes_work() && out.size() < max) {
      auto next = next_queued(db_, filter, at);
      if (!next.ok()) return next.take_error();
      if (!*next) break;
      ClaimedCall& c = **next;
      c.lease_expires_at = at + lease.count();
      RF_TRY(take_queued(db_, c.id, "running", worker_id, w->epoch, c.lease_expires_at, at));
      out.push_back(std::move(c));
    }
    return out;
  };
  // Most looks find the queue empty: a read does not take the write lock.
  // Calls that require labels this worker lacks are not looked at.
  auto any = [&]() -> Result<bool> {
    const std::string select = "SELECT 1 FROM tool_calls WHERE state = 'queued' AND " +
                               labels_held(db_, "requires_json", 1);
    const std::string offered = labels_json(filter.labels);
    auto st = filter.project
                  ? query(db_, select + " AND project_id = ?2 LIMIT 1", offered, *filter.project)
                  : query(db_, select + " LIMIT 1", offered);
    if (!st.ok()) return st.take_error();
    return st->step();
  };
  // One statement takes up to `max` queued calls, checking that the worker is
  // running under this process's epoch. On PostgreSQL it runs at once, looks
  // or not (every worker wakes on each enqueue: a read first would cost each
  // a round trip); taking calls, it share-locks the worker's row, as
  // require_running_worker does, and its last column says whether the worker
  // could claim (a row of NULLs stands for none taken). On SQLite a read
  // looks first, which leaves the write lock free.
  const bool pg = db_.engine() != Engine::sqlite;
  struct Taken {
    std::vector<ClaimedCall> calls;
    bool worker_ok = true;
  };
  auto take_batch = [&]() -> Result<Taken> {
    RF_TRY(check_lease(lease));
    const int64_t at = now();
    const std::string queued = "SELECT id FROM tool_calls WHERE state = 'queued' AND " +
                               labels_held(db_, "requires_json", 1) +
                               (filter.project ? " AND project_id = ?7" : " AND ?7 = ''") +
                               " ORDER BY id LIMIT ?5" + skip_locked(db_);
    const std::string running_worker =
        "workers WHERE id = ?2 AND state = 'running' AND admin = '' AND (?6 < 0 OR epoch = ?6)";
    const std::string returning =
        " RETURNING id, run_id, project_id, argv_json, env_json, cwd, stdin, timeout_ms, "
        "sandbox_image, identity_json, requires_json";
    const std::string sql =
        pg ? "WITH t AS (UPDATE tool_calls SET state = 'running', worker_id = ?2, "
             "lease_expires_at = ?3, claimed_at = ?4, "
             "claim_epoch = (SELECT epoch FROM workers WHERE id = ?2) WHERE id IN (" +
                 queued + ") AND EXISTS (SELECT 1 FROM " + running_worker + " FOR SHARE)" +
                 returning + ") SELECT t.*, (SELECT count(*) FROM " + running_worker +
                 ") FROM (SELECT 1) AS one LEFT JOIN t ON true"
           : "UPDATE tool_calls SET state = 'running', worker_id = ?2, lease_expires_at = ?3, "
             "claimed_at = ?4, claim_epoch = (SELECT epoch FROM workers WHERE id = ?2) "
             "WHERE id IN (" +
                 queued + ") AND EXISTS (SELECT 1 FROM " + running_worker + ")" + returning;
    auto st = query(db_, sql, labels_json(filter.labels), worker_id, at + lease.count(), at,
                    static_cast<int64_t>(max), fence.value_or(-1), filter.project.value_or(""));
    if (!st.ok()) return st.take_error();
    Taken out;
    std::vector<std::pair<int64_t, std::string>> bad;  // rows that do not read: failed below
    while (true) {
      auto row = st->step();
      if (!row.ok()) return row.take_error();
      if (!*row) break;
      if (pg) out.worker_ok = st->int64(11) > 0;
      if (st->is_null(0)) continue;  // none taken
      auto call = read_queued(*st);
      if (!call.ok()) {
        bad.emplace_back(st->int64(0), call.error().to_string());
        continue;
      }
      call->lease_expires_at = at + lease.count();
      out.calls.push_back(std::move(*call));
    }
    for (const auto& [id, why] : bad) {
      RF_TRY(exec(db_,
                  "UPDATE tool_calls SET state = 'failed', error = ?2, finished_at = ?3 "
                  "WHERE id = ?1",
                  id, why, at));
    }
    std::sort(out.calls.begin(), out.calls.end(),
              [](const ClaimedCall& a, const ClaimedCall& b) { return a.id < b.id; });
    return out;
  };
  const std::string operation = "claim calls for worker " + worker_id;
  if (max == 0) return std::vector<ClaimedCall>();
  if (pg) {
    auto taken = within(operation, take_batch());
    if (!taken.ok()) return taken.take_error();
    if (!taken->calls.empty() || taken->worker_ok) return std::move(taken->calls);
  }
  // An empty queue is no error, whoever looks.
  auto queued = within(operation, any());
  if (!queued.ok()) return queued.take_error();
  if (!*queued) return std::vector<ClaimedCall>();
  if (!pg) {
    auto taken = within(operation, take_batch());
    if (!taken.ok()) return taken.take_error();
    if (!taken->calls.empty()) return std::move(taken->calls);
  }
  // None taken: the worker may not claim, or others took the calls first.
  // The transaction says which (or takes what is left).
  return within(operation, claim_transaction(db_, claim));
}

Status Store::mark_running(int64_t call_id, const std::string& worker_id) {
  std::lock_guard lock(mu_);
  auto mark = [&]() -> Status {
    RF_TRY(require_held(db_, call_id, worker_id, fence_of(worker_id)));
    return exec(db_, "UPDATE tool_calls SET state = 'running' WHERE id = ?1", call_id);
  };
  return within("mark " + call_name(call_id) + " running", claim_transaction(db_, mark));
}

Result<int64_t> Store::append_output(int64_t call_id, const std::string& worker_id, Stream stream,
                                     std::string_view bytes) {
  std::lock_guard lock(mu_);
  auto append = [&]() -> Result<int64_t> {
    RF_TRY(require_held(db_, call_id, worker_id, fence_of(worker_id)));
    auto next = first_row<int64_t>(
        db_, [](const Statement& st) -> Result<int64_t> { return st.int64(0); },
        "SELECT coalesce(max(seq), 0) + 1 FROM call_output WHERE call_id = ?1", call_id);
    if (!next.ok()) return next.take_error();
    int64_t seq = **next;
    RF_TRY(exec(db_, "INSERT INTO call_output (call_id, seq, stream, data) VALUES (?1, ?2, ?3, ?4)",
                call_id, seq, static_cast<int>(stream), Blob{bytes}));
    return seq;
  };
  auto seq = within("append output of " + call_name(call_id), claim_transaction(db_, append));
  if (seq.ok()) ring_call(call_id);
  return seq;
}

Result<int64_t> Store::append_outputs(int64_t call_id, const std::string& worker_id,
                                      const std::vector<PendingChunk>& chunks) {
  std::lock_guard lock(mu_);
  auto append = [&]() -> Result<int64_t> {
    RF_TRY(require_held(db_, call_id, worker_id, fence_of(worker_id)));
    return insert_chunks(db_, call_id, chunks);
  };
  auto seq = within("append output of " + call_name(call_id), claim_transaction(db_, append));
  if (seq.ok()) ring_call(call_id);
  return seq;
}

Status Store::finish_call(int64_t call_id, const std::string& worker_id, int exit_code,
                          const std::string& result_json, const std::vector<PendingChunk>& output) {
  std::lock_guard lock(mu_);
  auto finish = [&]() -> Status {
    if (!json::accept(result_json)) return fail("the result is not valid JSON");
    int64_t at = now();
    RF_TRY(require_held(db_, call_id, worker_id, fence_of(worker_id)));
    auto appended = insert_chunks(db_, call_id, output);
    if (!appended.ok()) return appended.take_error();
    return exec(db_,
                "UPDATE tool_calls SET state = 'done', exit_code = ?2, result_json = ?3, "
                "finished_at = ?4 WHERE id = ?1",
                call_id, exit_code, result_json, at);
  };
  // The common case, a call with no output held back, held by this worker
  // under its current epoch, is one statement that checks all of it (the
  // worker's row share-locked on PostgreSQL, as require_held does). When it
  // changes nothing, the transaction above says why, or does it.
  if (output.empty() && json::accept(result_json)) {
    const int64_t at = now();
    const int64_t fence = fence_of(worker_id).value_or(-1);
    auto updated = exec(db_,
                        "UPDATE tool_calls SET state = 'done', exit_code = ?2, result_json = ?3, "
                        "finished_at = ?4 WHERE id = ?1 AND worker_id = ?5 "
                        "AND state IN ('claimed', 'running') "
                        "AND claim_epoch = (SELECT epoch FROM workers WHERE id = ?5" +
                            share_locked(db_) + ") AND (?6 < 0 OR claim_epoch = ?6)",
                        call_id, exit_code, result_json, at, worker_id, fence);
    if (!updated.ok()) return within("finish " + call_name(call_id), std::move(updated));
    if (db_.changes() == 1) {
      ring_call(call_id);
      return ok_status();
    }
  }
  auto done = within("finish " + call_name(call_id), claim_transaction(db_, finish));
  if (done.ok()) ring_call(call_id);
  return done;
}

Status Store::fail_call(int64_t call_id, const std::string& worker_id, const std::string& error,
                        const std::vector<PendingChunk>& output) {
  return end_held_call(call_id, worker_id, "failed", error, output);
}

Status Store::revoke_call(int64_t call_id, const std::string& worker_id, const std::string& error,
                          const std::vector<PendingChunk>& output) {
  return end_held_call(call_id, worker_id, "revoked", error, output);
}

Status Store::end_held_call(int64_t call_id, const std::string& worker_id, std::string_view state,
                            const std::string& error, const std::vector<PendingChunk>& output) {
  std::lock_guard lock(mu_);
  auto end_it = [&]() -> Status {
    int64_t at = now();
    RF_TRY(require_held(db_, call_id, worker_id, fence_of(worker_id)));
    auto appended = insert_chunks(db_, call_id, output);
    if (!appended.ok()) return appended.take_error();
    return exec(db_, "UPDATE tool_calls SET state = ?4, error = ?2, finished_at = ?3 WHERE id = ?1",
                call_id, error, at, state);
  };
  const std::string verb = state == "failed" ? "fail " : "revoke ";
  auto ended = within(verb + call_name(call_id), claim_transaction(db_, end_it));
  if (ended.ok()) ring_call(call_id);
  return ended;
}

Result<WorkerAdmin> Store::heartbeat(const std::string& worker_id, std::chrono::milliseconds lease,
                                     const std::optional<std::string>& metrics_json) {
  std::lock_guard lock(mu_);
  const std::optional<int64_t> fence = fence_of(worker_id);
  auto beat = [&]() -> Result<WorkerAdmin> {
    RF_TRY(check_lease(lease));
    auto worker = running_worker(db_, worker_id, fence);
    if (!worker.ok()) return worker.take_error();
    int64_t at = now();
    if (metrics_json) {
      RF_TRY(exec(db_, "UPDATE workers SET heartbeat_at = ?2, metrics_json = ?3 WHERE id = ?1",
                  worker_id, at, *metrics_json));
    } else {
      RF_TRY(exec(db_, "UPDATE workers SET heartbeat_at = ?2 WHERE id = ?1", worker_id, at));
    }
    // A lease that ran out is taken again while no sweep ended the call: a
    // worker starved past its lease keeps and finishes what it runs.
    RF_TRY(exec(db_,
                "UPDATE tool_calls SET lease_expires_at = ?2 WHERE worker_id = ?1 "
                "AND state IN ('claimed', 'running') "
                "AND (claim_epoch IS NULL OR claim_epoch = ?3)",
                worker_id, at + lease.count(), worker->epoch));
    // The workflow runs it holds (workflow_store.h) keep their leases the same way.
    RF_TRY(exec(db_,
                "UPDATE workflow_runs SET lease_expires_at = ?2 WHERE worker_id = ?1 "
                "AND state = 'running'",
                worker_id, at + lease.count()));
    return parse_name(kWorkerAdmins, worker->admin, "worker admin state");
  };
  return within("heartbeat of worker " + worker_id, write_transaction(db_, beat));
}

Result<int> Store::interrupt_orphaned_calls(int64_t now_at, const std::string& sparing) {
  std::lock_guard lock(mu_);
  // A process never sweeps the calls it holds itself: it is alive, however
  // late its heartbeat (-1: this Store registered no such worker).
  const int64_t spared_epoch = sparing.empty() ? -1 : fence_of(sparing).value_or(-1);
  auto sweep = [&]() -> Result<std::vector<int64_t>> {
    // The message names each call's own worker, so it is built in SQL.
    return rows<int64_t>(
        db_, read_int0,
        "UPDATE tool_calls SET state = 'interrupted', "
        "error = 'worker ' || worker_id || ' stopped heartbeating', finished_at = ?1 "
        "WHERE state IN ('claimed', 'running') AND lease_expires_at < ?1 "
        "AND (coalesce(worker_id, '') <> ?2 OR coalesce(claim_epoch, -1) <> ?3) RETURNING id",
        now_at, sparing, spared_epoch);
  };
  return ring_each(within("interrupt orphaned calls", write_transaction(db_, sweep)));
}

Result<int> Store::interrupt_calls_of_worker(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  auto sweep = [&]() -> Result<std::vector<int64_t>> {
    return interrupt_held(db_, "worker_id = ?3", "worker " + worker_id + " restarted", now(),
                          worker_id);
  };
  return ring_each(
      within("interrupt the calls of worker " + worker_id, write_transaction(db_, sweep)));
}

Result<int> Store::ring_each(Result<std::vector<int64_t>> ids) {
  if (!ids.ok()) return ids.take_error();
  for (int64_t id : *ids) ring_call(id);
  return static_cast<int>(ids->size());
}

Result<int> Store::fail_unserved_calls(const std::string& project, int64_t enqueued_before,
                                       const std::string& error) {
  std::lock_guard lock(mu_);
  auto sweep = [&]() -> Result<std::vector<int64_t>> {
    // The message names each call's own project, so it is built in SQL.
    return rows<int64_t>(
        db_, read_int0,
        "UPDATE tool_calls SET state = 'failed', "
        "error = 'project ' || project_id || ': ' || ?3, finished_at = ?4 "
        "WHERE state = 'queued' AND project_id <> ?1 AND enqueued_at < ?2 RETURNING id",
        project, enqueued_before, error, now());
  };
  return ring_each(within("fail unserved calls", write_transaction(db_, sweep)));
}

namespace {

struct UnmatchedCall {
  int64_t id = 0;
  std::string project;
  Labels requires_labels;
};

bool serves(const WorkerRow& w, const std::string& project) {
  return !w.project || *w.project == project;
}

}  // namespace

std::optional<std::string> unmatched_reason(const std::vector<WorkerRow>& workers,
                                            const std::string& project, const Labels& labels,
                                            std::string_view what) {
  std::string lacks;
  int listed = 0, serving = 0;
  for (const WorkerRow& w : workers) {
    if (!serves(w, project)) continue;
    ++serving;
    Labels missing = missing_labels(labels, w.labels);
    if (missing.empty() && w.admin == WorkerAdmin::none) return std::nullopt;
    if (++listed > 5) continue;
    if (!lacks.empty()) lacks += "; ";
    lacks += "worker " + w.id + " (host " + w.host_id + ") " +
             (missing.empty() ? "has them but is " + std::string(to_string(w.admin)) +
                                    " (`ringfence fleet uncordon " + w.id + "`)"
                              : lacking_text(labels, w.labels));
  }
  if (serving == 0) return std::nullopt;
  if (listed > 5) lacks += "; and " + std::to_string(listed - 5) + " more";
  return "no live worker has the labels this " + std::string(what) + " requires (" +
         labels_text(labels) + "): " + lacks;
}

Result<int> Store::fail_unmatched_calls(int64_t enqueued_before, int64_t heartbeat_since) {
  std::lock_guard lock(mu_);
  // Every worker asks this every second: a read first, so the write lock is
  // taken only when some call waits for labels.
  const std::string waiting =
      " FROM tool_calls WHERE state = 'queued' AND requires_json <> '{}' AND enqueued_at < ?1 "
      "AND coalesce(wait_until, 0) < ?2";
  const int64_t at_start = now();
  auto any = first_row<int64_t>(db_, read_int0, "SELECT id" + waiting + " LIMIT 1", enqueued_before,
                                at_start);
  if (!any.ok()) return within("fail calls no live worker may take", Result<int>(any.take_error()));
  if (!*any) return 0;
  auto sweep = [&]() -> Result<std::vector<int64_t>> {
    auto read = [](const Statement& st) -> Result<UnmatchedCall> {
      auto labels = labels_from_json(st.text(2));
      if (!labels.ok()) return labels.take_error();
      return UnmatchedCall{st.int64(0), st.text(1), std::move(*labels)};
    };
    auto calls = rows<UnmatchedCall>(
        db_, read, "SELECT id, project_id, requires_json" + waiting + " ORDER BY id LIMIT 1000",
        enqueued_before, at_start);
    if (!calls.ok()) return calls.take_error();
    std::vector<int64_t> failed;
    if (calls->empty()) return failed;
    auto live = rows<WorkerRow>(db_, read_worker,
                                "SELECT " + std::string(kWorkerColumns) +
                                    " FROM workers WHERE state = 'running' AND heartbeat_at >= ?1",
                                heartbeat_since);
    if (!live.ok()) return live.take_error();
    const int64_t at = now();
    for (const UnmatchedCall& c : *calls) {
      auto why = unmatched_reason(*live, c.project, c.requires_labels, "call");
      if (!why) continue;
      RF_TRY(exec(db_,
                  "UPDATE tool_calls SET state = 'failed', error = ?2, finished_at = ?3 "
                  "WHERE id = ?1 AND state = 'queued'",
                  c.id, *why, at));
      if (db_.changes() == 1) failed.push_back(c.id);
    }
    return failed;
  };
  return ring_each(within("fail calls no live worker may take", write_transaction(db_, sweep)));
}

// ---- runs

Status Store::end_run(const std::string& run_id) {
  std::lock_guard lock(mu_);
  std::vector<int64_t> failed;  // queued calls the end fails: their clients are rung
  auto end = [&]() -> Status {
    auto state =
        first_row<std::string>(db_, read_text0, "SELECT state FROM runs WHERE id = ?1", run_id);
    if (!state.ok()) return state.take_error();
    if (!*state) return make_error(ErrorCode::kNotFound, "", "run " + run_id + " does not exist");
    if (**state == "ended") return ok_status();
    int64_t at = now();
    RF_TRY(exec(db_, "UPDATE runs SET state = 'ended', ended_at = ?2 WHERE id = ?1", run_id, at));
    auto ids = rows<int64_t>(db_, read_int0,
                             "UPDATE tool_calls SET state = 'failed', "
                             "error = 'run ended before the call started', finished_at = ?2 "
                             "WHERE run_id = ?1 AND state = 'queued' RETURNING id",
                             run_id, at);
    if (!ids.ok()) return ids.take_error();
    failed = std::move(*ids);
    return ok_status();
  };
  auto ended = within("end run " + run_id, write_transaction(db_, end));
  for (int64_t id : failed) ring_call(id);
  ring_queue();  // workers notice ended runs sooner
  return ended;
}

Result<RunView> Store::run(const std::string& run_id) {
  std::lock_guard lock(mu_);
  auto read_run = [](const Statement& st) -> Result<RunView> {
    auto state = parse_name(kRunStates, st.text(2), "run state");
    if (!state.ok()) return state.take_error();
    return RunView{st.text(0), st.text(1), *state, st.int64(3), st.opt_int64(4), {}};
  };
  auto read = [&]() -> Result<RunView> {
    auto run = first_row<RunView>(
        db_, read_run, "SELECT id, project_id, state, created_at, ended_at FROM runs WHERE id = ?1",
        run_id);
    if (!run.ok()) return run.take_error();
    if (!*run) return fail("run " + run_id + " does not exist");
    auto calls = rows<CallView>(
        db_, read_call,
        "SELECT " + std::string(kCallColumns) + " FROM tool_calls WHERE run_id = ?1 ORDER BY id",
        run_id);
    if (!calls.ok()) return calls.take_error();
    (*run)->calls = std::move(*calls);
    return std::move(**run);
  };
  return within("read run " + run_id, read_transaction(db_, read));
}

Result<std::vector<std::string>> Store::ended_runs(const std::vector<std::string>& run_ids) {
  if (run_ids.empty()) return std::vector<std::string>{};
  std::lock_guard lock(mu_);
  const std::string ids = json(run_ids).dump();
  auto read = [&] {
    return rows<std::string>(db_, read_text0,
                             "SELECT id FROM runs WHERE state = 'ended' "
                             "AND id IN (" +
                                 json_values(db_, 1) + ")",
                             ids);
  };
  return within("read ended runs", read_transaction(db_, read));
}

// ---- workers

Status Store::register_worker(const std::string& id, int64_t pid, const std::string& hostname,
                              const std::optional<std::string>& project, const WorkerSite& site) {
  std::lock_guard lock(mu_);
  auto upsert = [&]() -> Result<int64_t> {
    if (id.empty()) return fail("the worker id is empty");
    if (auto labels = check_labels(site.labels); !labels.ok())
      return fail("its labels: " + labels.error().to_string());
    return inserted_id(
        db_,
        "INSERT INTO workers (id, pid, hostname, started_at, heartbeat_at, state, project, "
        "host_id, labels_json, epoch, version) "
        "VALUES (?1, ?2, ?3, ?4, ?4, 'running', ?5, ?6, ?7, 1, ?8) "
        "ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, hostname = excluded.hostname, "
        "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, "
        "state = 'running', project = excluded.project, host_id = excluded.host_id, "
        "labels_json = excluded.labels_json, epoch = workers.epoch + 1, door = NULL, "
        "door_key = NULL, version = excluded.version, "
        // A drain ends with the process it drained; a cordon stays.
        "admin = CASE WHEN workers.admin = 'draining' THEN '' ELSE workers.admin END "
        "RETURNING epoch",
        id, pid, hostname, now(), project, site.host_id.empty() ? hostname : site.host_id,
        labels_json(site.labels), site.version);
  };
  auto epoch = within("register worker " + id, write_transaction(db_, upsert));
  if (!epoch.ok()) return epoch.take_error();
  fences_[id] = *epoch;
  return ok_status();
}

std::optional<int64_t> Store::registration(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  return fence_of(worker_id);
}

void Store::adopt_registration(const std::string& worker_id, int64_t epoch) {
  std::lock_guard lock(mu_);
  fences_[worker_id] = epoch;
}

std::optional<int64_t> Store::fence_of(const std::string& worker_id) const {
  auto it = fences_.find(worker_id);
  if (it == fences_.end()) return std::nullopt;
  return it->second;
}

Status Store::set_worker_project(const std::string& id, const std::optional<std::string>& project) {
  std::lock_guard lock(mu_);
  auto set = [&]() -> Status {
    RF_TRY(exec(db_, "UPDATE workers SET project = ?2 WHERE id = ?1", id, project));
    if (db_.changes() == 0) return fail("worker " + id + " is not registered");
    return ok_status();
  };
  return within("set the project of worker " + id, write_transaction(db_, set));
}

Status Store::set_worker_door(const std::string& id, const std::string& door,
                              const std::string& key) {
  std::lock_guard lock(mu_);
  auto set = [&]() -> Status {
    RF_TRY(exec(db_, "UPDATE workers SET door = ?2, door_key = ?3 WHERE id = ?1", id, door, key));
    if (db_.changes() == 0) return fail("worker " + id + " is not registered");
    return ok_status();
  };
  return within("set the door of worker " + id, write_transaction(db_, set));
}

Result<std::optional<WorkerRow>> Store::worker(const std::string& id) {
  std::lock_guard lock(mu_);
  return within("read worker " + id,
                first_row<WorkerRow>(
                    db_, read_worker,
                    "SELECT " + std::string(kWorkerColumns) + " FROM workers WHERE id = ?1", id));
}

Status Store::stop_worker(const std::string& id, std::optional<int64_t> epoch) {
  std::lock_guard lock(mu_);
  if (!epoch) epoch = fence_of(id);
  std::vector<int64_t> ids;  // calls the stop interrupts: their clients are rung
  auto stop = [&]() -> Status {
    auto current = first_row<int64_t>(
        db_, read_int0, "SELECT epoch FROM workers WHERE id = ?1" + for_update(db_), id);
    if (!current.ok()) return current.take_error();
    if (!*current) return fail("worker " + id + " is not registered");
    if (epoch && *epoch != **current) return fenced(id, *epoch, **current);
    // A drain ends with the process (a cordon stays on the id).
    RF_TRY(exec(db_,
                "UPDATE workers SET state = 'stopped', "
                "admin = CASE WHEN admin = 'draining' THEN '' ELSE admin END WHERE id = ?1",
                id));
    auto interrupted =
        interrupt_held(db_, "worker_id = ?3 AND (claim_epoch IS NULL OR claim_epoch = ?4)",
                       "worker " + id + " stopped", now(), id, **current);
    if (!interrupted.ok()) return interrupted.take_error();
    ids = std::move(*interrupted);
    return ok_status();
  };
  auto stopped = within("stop worker " + id, write_transaction(db_, stop));
  for (int64_t call : ids) ring_call(call);
  return stopped;
}

Result<std::vector<std::string>> Store::set_worker_admin(const std::string& target,
                                                         WorkerAdmin admin) {
  std::lock_guard lock(mu_);
  auto set = [&]() -> Result<std::vector<std::string>> {
    // A worker's id names it alone; otherwise every worker of that host.
    auto by_id = first_row<int64_t>(db_, read_int0, "SELECT 1 FROM workers WHERE id = ?1", target);
    if (!by_id.ok()) return by_id.take_error();
    const std::string which = *by_id ? "id = ?1" : "host_id = ?1";
    // Only a running process drains; a cordon stays for the next one.
    const std::string running = admin == WorkerAdmin::draining ? " AND state = 'running'" : "";
    auto changed = rows<std::string>(
        db_, read_text0, "UPDATE workers SET admin = ?2 WHERE " + which + running + " RETURNING id",
        target, to_string(admin));
    if (!changed.ok()) return changed.take_error();
    if (changed->empty()) {
      return fail(*by_id ? "worker " + target + " is not running"
                         : "no worker or host is named " + target +
                               " (`ringfence fleet status --all` lists them)");
    }
    std::sort(changed->begin(), changed->end());
    return changed;
  };
  const std::string verb = admin == WorkerAdmin::none       ? "uncordon "
                           : admin == WorkerAdmin::cordoned ? "cordon "
                                                            : "drain ";
  auto out = within(verb + target, write_transaction(db_, set));
  if (out.ok()) ring_queue();  // an uncordoned worker looks at the queue at once
  return out;
}

Result<std::vector<WorkerRow>> Store::workers() {
  std::lock_guard lock(mu_);
  return within("list workers", rows<WorkerRow>(db_, read_worker,
                                                "SELECT " + std::string(kWorkerColumns) +
                                                    " FROM workers ORDER BY id"));
}

Result<Store::LiveCalls> Store::live_calls() {
  std::lock_guard lock(mu_);
  auto read = [&]() -> Result<LiveCalls> {
    auto count = [&](const char* sql) -> Result<int64_t> {
      auto st = db_.prepare(sql);
      if (!st) return st.take_error();
      auto row = st->step();
      if (!row) return row.take_error();
      return st->int64(0);
    };
    LiveCalls c;
    auto queued = count("SELECT count(*) FROM tool_calls WHERE state = 'queued'");
    if (!queued) return queued.take_error();
    auto held = count("SELECT count(*) FROM tool_calls WHERE state IN ('claimed', 'running')");
    if (!held) return held.take_error();
    c.queued = *queued;
    c.held = *held;
    return c;
  };
  return within("count live calls", read_transaction(db_, read));
}

Result<std::vector<FleetWorker>> Store::fleet(const std::optional<std::string>& project) {
  std::lock_guard lock(mu_);
  auto read = [&]() -> Result<std::vector<FleetWorker>> {
    auto workers = project ? rows<WorkerRow>(db_, read_worker,
                                             "SELECT " + std::string(kWorkerColumns) +
                                                 " FROM workers WHERE project IS NULL OR "
                                                 "project = ?1 ORDER BY state, id",
                                             *project)
                           : rows<WorkerRow>(db_, read_worker,
                                             "SELECT " + std::string(kWorkerColumns) +
                                                 " FROM workers ORDER BY state, id");
    if (!workers.ok()) return workers.take_error();
    // Per worker: how many calls it holds, and how many sandboxes it has live.
    auto counts = [&](std::string sql) -> Result<std::map<std::string, int64_t>> {
      auto read_count = [](const Statement& st) -> Result<std::pair<std::string, int64_t>> {
        return std::pair(st.text(0), st.int64(1));
      };
      if (project) sql += " AND project_id = ?1";
      sql += " GROUP BY worker_id";
      auto found = project ? rows<std::pair<std::string, int64_t>>(db_, read_count, sql, *project)
                           : rows<std::pair<std::string, int64_t>>(db_, read_count, sql);
      if (!found.ok()) return found.take_error();
      return std::map<std::string, int64_t>(found->begin(), found->end());
    };
    auto held = counts(
        "SELECT worker_id, count(*) FROM tool_calls WHERE state IN ('claimed', 'running') "
        "AND worker_id IS NOT NULL");
    if (!held.ok()) return held.take_error();
    auto sandboxes = counts(
        "SELECT worker_id, count(*) FROM sandboxes WHERE state IN ('pooled', 'active') "
        "AND worker_id IS NOT NULL");
    if (!sandboxes.ok()) return sandboxes.take_error();
    std::vector<FleetWorker> out;
    for (WorkerRow& w : *workers) {
      FleetWorker f{std::move(w)};
      if (auto it = held->find(f.worker.id); it != held->end()) f.held_calls = it->second;
      if (auto it = sandboxes->find(f.worker.id); it != sandboxes->end())
        f.live_sandboxes = it->second;
      out.push_back(std::move(f));
    }
    return out;
  };
  return within("read the fleet", read_transaction(db_, read));
}

Result<std::vector<WorkerRow>> Store::workers_serving(const std::string& project,
                                                      int64_t heartbeat_since) {
  std::lock_guard lock(mu_);
  return within("list the workers serving project " + project,
                rows<WorkerRow>(db_, read_worker,
                                "SELECT " + std::string(kWorkerColumns) +
                                    " FROM workers WHERE state = 'running' AND heartbeat_at >= ?2 "
                                    "AND admin = '' AND (project IS NULL OR project = ?1) "
                                    "ORDER BY id",
                                project, heartbeat_since));
}

// ---- sandboxes

namespace {
Status insert_sandbox(Db& db, const SandboxRow& row, int64_t now) {
  if (row.id.empty()) return fail("the sandbox id is empty");
  if (std::find(std::begin(kSandboxModes), std::end(kSandboxModes), row.mode) ==
      std::end(kSandboxModes)) {
    return fail("sandbox " + row.id + ": unknown sandbox mode \"" + row.mode + "\"");
  }
  auto found =
      first_row<std::string>(db, read_text0, "SELECT state FROM sandboxes WHERE id = ?1", row.id);
  if (!found.ok()) return found.take_error();
  if (*found) return fail("sandbox " + row.id + " is already recorded");
  return exec(db,
              "INSERT INTO sandboxes (" + std::string(kSandboxColumns) +
                  ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
              row.id, row.backend, row.project_id, row.run_id, row.mode, row.worker_id,
              row.host_pid, to_string(row.state), row.created_at != 0 ? row.created_at : now,
              row.destroyed_at, row.spec_json);
}
}  // namespace

Status Store::record_sandbox(const SandboxRow& row) {
  std::lock_guard lock(mu_);
  auto record = [&]() -> Status { return insert_sandbox(db_, row, now()); };
  return within("record sandbox " + row.id, write_transaction(db_, record));
}

Status Store::record_sandboxes(const std::vector<SandboxRow>& created,
                               const std::vector<std::string>& destroyed) {
  std::lock_guard lock(mu_);
  auto record = [&]() -> Status {
    const int64_t at = now();
    for (const auto& row : created) RF_TRY(insert_sandbox(db_, row, at));
    for (const auto& id : destroyed) {
      RF_TRY(exec(db_,
                  "UPDATE sandboxes SET state = 'destroyed', destroyed_at = ?2 "
                  "WHERE id = ?1 AND state <> 'destroyed'",
                  id, at));
    }
    return ok_status();
  };
  if (created.empty() && destroyed.empty()) return ok_status();
  return within("record sandboxes", write_transaction(db_, record));
}

Result<int> Store::destroy_sandboxes_of_worker(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  auto sweep = [&]() -> Result<int> {
    RF_TRY(exec(db_,
                "UPDATE sandboxes SET state = 'destroyed', destroyed_at = ?2 "
                "WHERE worker_id = ?1 AND state IN ('pooled', 'active')",
                worker_id, now()));
    return db_.changes();
  };
  return within("destroy the sandboxes of worker " + worker_id, write_transaction(db_, sweep));
}

Status Store::set_sandbox_state(const std::string& id, SandboxState state) {
  std::lock_guard lock(mu_);
  std::string_view next = to_string(state);
  auto set = [&]() -> Status {
    auto found =
        first_row<std::string>(db_, read_text0, "SELECT state FROM sandboxes WHERE id = ?1", id);
    if (!found.ok()) return found.take_error();
    if (!*found) return fail("sandbox " + id + " does not exist");
    if (**found == "destroyed") {
      if (state == SandboxState::destroyed) return ok_status();
      return fail("sandbox " + id + " is destroyed");
    }
    return exec(db_,
                "UPDATE sandboxes SET state = ?2, "
                "destroyed_at = CASE WHEN ?2 = 'destroyed' THEN ?3 ELSE destroyed_at END "
                "WHERE id = ?1",
                id, next, now());
  };
  return within("set sandbox " + id + " " + std::string(next), write_transaction(db_, set));
}

Result<std::vector<SandboxRow>> Store::live_sandboxes() {
  std::lock_guard lock(mu_);
  return within("list live sandboxes",
                rows<SandboxRow>(db_, read_sandbox,
                                 "SELECT " + std::string(kSandboxColumns) +
                                     " FROM sandboxes WHERE state IN ('pooled', 'active') "
                                     "ORDER BY created_at, id"));
}

Result<std::optional<SandboxRow>> Store::sandbox(const std::string& id) {
  std::lock_guard lock(mu_);
  return within(
      "read sandbox " + id,
      first_row<SandboxRow>(
          db_, read_sandbox,
          "SELECT " + std::string(kSandboxColumns) + " FROM sandboxes WHERE id = ?1", id));
}

// ---- events

Result<int64_t> Store::append_event(const Event& e) {
  std::lock_guard lock(mu_);
  auto append = [&]() -> Result<int64_t> {
    if (e.kind.empty()) return fail("the event kind is empty");
    if (e.detail_json && !json::accept(*e.detail_json)) return fail("its detail is not valid JSON");
    return inserted_id(db_,
                       "INSERT INTO events (at, kind, project_id, run_id, call_id, sandbox_id, "
                       "worker_id, detail_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                       "RETURNING id",
                       e.at != 0 ? e.at : now(), e.kind, e.project_id, e.run_id, e.call_id,
                       e.sandbox_id, e.worker_id, e.detail_json);
  };
  auto id = within("append event " + e.kind, write_transaction(db_, append));
  if (id.ok() && e.run_id) ring_run(*e.run_id);
  return id;
}

Result<std::vector<Event>> Store::events(const EventFilter& filter) {
  std::lock_guard lock(mu_);
  // Fixed SQL fragments only; values are bound.
  std::string sql =
      "SELECT id, at, kind, project_id, run_id, call_id, sandbox_id, worker_id, detail_json "
      "FROM events WHERE id > ?1";
  // Numbered without gaps: PostgreSQL wants a type for every parameter up to
  // the highest.
  int next = 3;
  const int run_param = filter.run_id ? next++ : 0;
  const int call_param = filter.call_id ? next++ : 0;
  if (run_param != 0) sql += " AND run_id = ?" + std::to_string(run_param);
  if (call_param != 0) sql += " AND call_id = ?" + std::to_string(call_param);
  sql += " ORDER BY id LIMIT ?2";
  auto list = [&]() -> Result<std::vector<Event>> {
    auto st = query(db_, sql, filter.after_id, filter.limit);
    if (!st.ok()) return st.take_error();
    if (run_param != 0) st->bind(run_param, *filter.run_id);
    if (call_param != 0) st->bind(call_param, *filter.call_id);
    return read_rows<Event>(*st, read_event);
  };
  return within("list events", list());
}

}  // namespace rf::store
