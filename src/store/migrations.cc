#include "store/migrations.h"

#include <chrono>
#include <string>

namespace rf::store {
namespace {

// Version 1: projects, runs, tool calls and their output, sandboxes, workers,
// events. Times are integer milliseconds since the epoch. Tool call ids are
// assigned under the write lock, so id order is enqueue order.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE projects (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  environment TEXT NOT NULL CHECK (environment IN ('production', 'staging', 'development')),
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE runs (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  project_id TEXT NOT NULL REFERENCES projects (id),
  state TEXT NOT NULL CHECK (state IN ('open', 'ended')),
  created_at INTEGER NOT NULL,
  ended_at INTEGER
) STRICT;
CREATE INDEX runs_by_project ON runs (project_id);

CREATE TABLE tool_calls (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (id),
  project_id TEXT NOT NULL REFERENCES projects (id),
  argv_json TEXT NOT NULL,
  env_json TEXT NOT NULL,
  cwd TEXT NOT NULL,
  stdin BLOB NOT NULL,
  timeout_ms INTEGER NOT NULL CHECK (timeout_ms > 0),
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'claimed', 'running', 'done', 'interrupted', 'failed')),
  worker_id TEXT,
  lease_expires_at INTEGER,
  exit_code INTEGER,
  result_json TEXT,
  error TEXT,
  enqueued_at INTEGER NOT NULL,
  claimed_at INTEGER,
  finished_at INTEGER,
  CHECK (state NOT IN ('claimed', 'running')
         OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
) STRICT;
-- The queue, in enqueue order: all projects, and one project (per_worker workers).
CREATE INDEX tool_calls_queued ON tool_calls (id) WHERE state = 'queued';
CREATE INDEX tool_calls_queued_by_project ON tool_calls (project_id, id) WHERE state = 'queued';
CREATE INDEX tool_calls_by_run ON tool_calls (run_id, id);
-- Leases: heartbeats (by worker) and the orphan sweep (by expiry).
CREATE INDEX tool_calls_held_by_worker ON tool_calls (worker_id)
  WHERE state IN ('claimed', 'running');
CREATE INDEX tool_calls_held_by_expiry ON tool_calls (lease_expires_at)
  WHERE state IN ('claimed', 'running');

CREATE TABLE call_output (
  call_id INTEGER NOT NULL REFERENCES tool_calls (id),
  seq INTEGER NOT NULL CHECK (seq > 0),
  stream INTEGER NOT NULL CHECK (stream IN (1, 2)),
  data BLOB NOT NULL,
  PRIMARY KEY (call_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE sandboxes (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  backend TEXT NOT NULL,
  project_id TEXT,
  run_id TEXT,
  mode TEXT NOT NULL CHECK (mode IN ('none', 'per_tool', 'per_run', 'per_worker')),
  worker_id TEXT,
  host_pid INTEGER,
  state TEXT NOT NULL CHECK (state IN ('pooled', 'active', 'destroyed')),
  created_at INTEGER NOT NULL,
  destroyed_at INTEGER
) STRICT;
CREATE INDEX sandboxes_by_state ON sandboxes (state);

CREATE TABLE workers (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  pid INTEGER NOT NULL,
  hostname TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'stopped'))
) STRICT;

CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''),
  project_id TEXT,
  run_id TEXT,
  call_id INTEGER,
  sandbox_id TEXT,
  worker_id TEXT,
  detail_json TEXT
) STRICT;
CREATE INDEX events_by_run ON events (run_id, id);
CREATE INDEX events_by_call ON events (call_id, id);
)sql";

// v2 (issue 5): a call may name the image of the sandbox it runs in (per
// agent); empty means the worker's own image.
constexpr std::string_view kV2 = R"sql(
ALTER TABLE tool_calls ADD COLUMN sandbox_image TEXT NOT NULL DEFAULT '';
)sql";

// v3 (issue 10): a call the client gave up on before any worker claimed it is
// `cancelled` (the CHECK of tool_calls.state admits it: SQLite changes a CHECK
// only by rebuilding the table, here with foreign keys off, see Migration), and
// a worker records the one project it is pinned to (per_worker; NULL: any),
// so a waiting client can tell whether any live worker serves its project.
constexpr std::string_view kV3 = R"sql(
CREATE TABLE tool_calls_v3 (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (id),
  project_id TEXT NOT NULL REFERENCES projects (id),
  argv_json TEXT NOT NULL,
  env_json TEXT NOT NULL,
  cwd TEXT NOT NULL,
  stdin BLOB NOT NULL,
  timeout_ms INTEGER NOT NULL CHECK (timeout_ms > 0),
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'claimed', 'running', 'done', 'interrupted', 'failed',
                     'cancelled')),
  worker_id TEXT,
  lease_expires_at INTEGER,
  exit_code INTEGER,
  result_json TEXT,
  error TEXT,
  enqueued_at INTEGER NOT NULL,
  claimed_at INTEGER,
  finished_at INTEGER,
  sandbox_image TEXT NOT NULL DEFAULT '',
  CHECK (state NOT IN ('claimed', 'running')
         OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
) STRICT;
INSERT INTO tool_calls_v3 (id, run_id, project_id, argv_json, env_json, cwd, stdin, timeout_ms,
                           state, worker_id, lease_expires_at, exit_code, result_json, error,
                           enqueued_at, claimed_at, finished_at, sandbox_image)
  SELECT id, run_id, project_id, argv_json, env_json, cwd, stdin, timeout_ms, state, worker_id,
         lease_expires_at, exit_code, result_json, error, enqueued_at, claimed_at, finished_at,
         sandbox_image
  FROM tool_calls;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_v3 RENAME TO tool_calls;
CREATE INDEX tool_calls_queued ON tool_calls (id) WHERE state = 'queued';
CREATE INDEX tool_calls_queued_by_project ON tool_calls (project_id, id) WHERE state = 'queued';
CREATE INDEX tool_calls_by_run ON tool_calls (run_id, id);
CREATE INDEX tool_calls_held_by_worker ON tool_calls (worker_id)
  WHERE state IN ('claimed', 'running');
CREATE INDEX tool_calls_held_by_expiry ON tool_calls (lease_expires_at)
  WHERE state IN ('claimed', 'running');

ALTER TABLE workers ADD COLUMN project TEXT;
)sql";

// v4 (issue 11): identity and audit.
// - secrets: one row per name, its state (revoked: refused from now on;
//   hard_revoked: also ends what received it); secret_versions hold the sealed
//   values (builtin: nonce || XChaCha20-Poly1305 ciphertext, sealed by the key
//   whose id is key_id; vault: no value here, only where it lives).
// - identity_profiles attach at one level (system, project, workflow, user) and
//   scope ('' = any); profile_entries map environment keys to a secret or a
//   plain value. A key is defined once per level and scope.
// - tool_calls: identity_json (NULL: not identity-scoped; else the workflow and
//   user the cascade is resolved for) and the state `revoked`.
// - injections: which keys of which secret versions went into which sandbox for
//   which call, never values; ended_at once the call ended.
// - audit_events: append-only, hash-chained (hash = SHA-256 over prev_hash and
//   the event's fields); audit_head holds the last seq and hash, so deleting the
//   newest events is noticed too.
constexpr std::string_view kV4 = R"sql(
CREATE TABLE secrets (
  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  backend TEXT NOT NULL CHECK (backend IN ('builtin', 'vault')),
  vault_addr TEXT,
  vault_mount TEXT,
  vault_path TEXT,
  state TEXT NOT NULL CHECK (state IN ('active', 'revoked', 'hard_revoked')),
  current_version INTEGER NOT NULL CHECK (current_version > 0),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  revoked_at INTEGER,
  CHECK (backend <> 'vault' OR (vault_addr IS NOT NULL AND vault_path IS NOT NULL))
) STRICT;

CREATE TABLE secret_versions (
  name TEXT NOT NULL REFERENCES secrets (name),
  version INTEGER NOT NULL CHECK (version > 0),
  sealed BLOB,
  key_id TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (name, version),
  CHECK ((sealed IS NULL) = (key_id IS NULL))
) STRICT;

CREATE TABLE identity_profiles (
  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  level TEXT NOT NULL CHECK (level IN ('system', 'project', 'workflow', 'user')),
  project_id TEXT NOT NULL DEFAULT '',
  workflow TEXT NOT NULL DEFAULT '',
  user_id TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK (level <> 'system' OR (project_id = '' AND workflow = '' AND user_id = '')),
  CHECK (level <> 'project' OR (project_id <> '' AND workflow = '' AND user_id = '')),
  CHECK (level <> 'workflow' OR (workflow <> '' AND user_id = '')),
  CHECK (level <> 'user' OR (user_id <> '' AND workflow = ''))
) STRICT;
CREATE INDEX identity_profiles_by_scope ON identity_profiles (level, project_id, workflow, user_id);

CREATE TABLE profile_entries (
  profile TEXT NOT NULL REFERENCES identity_profiles (name) ON DELETE CASCADE,
  key TEXT NOT NULL CHECK (key <> ''),
  kind TEXT NOT NULL CHECK (kind IN ('secret', 'value')),
  ref TEXT NOT NULL,
  PRIMARY KEY (profile, key)
) STRICT;
CREATE INDEX profile_entries_by_secret ON profile_entries (ref) WHERE kind = 'secret';

CREATE TABLE tool_calls_v4 (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (id),
  project_id TEXT NOT NULL REFERENCES projects (id),
  argv_json TEXT NOT NULL,
  env_json TEXT NOT NULL,
  cwd TEXT NOT NULL,
  stdin BLOB NOT NULL,
  timeout_ms INTEGER NOT NULL CHECK (timeout_ms > 0),
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'claimed', 'running', 'done', 'interrupted', 'failed',
                     'cancelled', 'revoked')),
  worker_id TEXT,
  lease_expires_at INTEGER,
  exit_code INTEGER,
  result_json TEXT,
  error TEXT,
  enqueued_at INTEGER NOT NULL,
  claimed_at INTEGER,
  finished_at INTEGER,
  sandbox_image TEXT NOT NULL DEFAULT '',
  identity_json TEXT,
  CHECK (state NOT IN ('claimed', 'running')
         OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
) STRICT;
INSERT INTO tool_calls_v4 (id, run_id, project_id, argv_json, env_json, cwd, stdin, timeout_ms,
                           state, worker_id, lease_expires_at, exit_code, result_json, error,
                           enqueued_at, claimed_at, finished_at, sandbox_image)
  SELECT id, run_id, project_id, argv_json, env_json, cwd, stdin, timeout_ms, state, worker_id,
         lease_expires_at, exit_code, result_json, error, enqueued_at, claimed_at, finished_at,
         sandbox_image
  FROM tool_calls;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_v4 RENAME TO tool_calls;
CREATE INDEX tool_calls_queued ON tool_calls (id) WHERE state = 'queued';
CREATE INDEX tool_calls_queued_by_project ON tool_calls (project_id, id) WHERE state = 'queued';
CREATE INDEX tool_calls_by_run ON tool_calls (run_id, id);
CREATE INDEX tool_calls_held_by_worker ON tool_calls (worker_id)
  WHERE state IN ('claimed', 'running');
CREATE INDEX tool_calls_held_by_expiry ON tool_calls (lease_expires_at)
  WHERE state IN ('claimed', 'running');

CREATE TABLE injections (
  id INTEGER PRIMARY KEY,
  call_id INTEGER REFERENCES tool_calls (id),
  sandbox_id TEXT NOT NULL,
  worker_id TEXT,
  project_id TEXT NOT NULL,
  run_id TEXT,
  key TEXT NOT NULL,
  secret TEXT NOT NULL,
  version INTEGER NOT NULL,
  at INTEGER NOT NULL,
  ended_at INTEGER
) STRICT;
CREATE INDEX injections_live_by_worker ON injections (worker_id) WHERE ended_at IS NULL;
CREATE INDEX injections_by_secret ON injections (secret, id);

CREATE TABLE audit_events (
  seq INTEGER PRIMARY KEY CHECK (seq > 0),
  at INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''),
  actor TEXT NOT NULL DEFAULT '',
  project_id TEXT,
  run_id TEXT,
  call_id INTEGER,
  sandbox_id TEXT,
  detail_json TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
) STRICT;
CREATE INDEX audit_events_by_run ON audit_events (run_id, seq);
CREATE INDEX audit_events_by_project ON audit_events (project_id, seq);

CREATE TABLE audit_head (
  one INTEGER PRIMARY KEY CHECK (one = 1),
  seq INTEGER NOT NULL,
  hash TEXT NOT NULL
) STRICT;
)sql";

// v5 (issue 12): workflows.
// - workflow_runs: a workflow run is a run (runs.id) with its definition (the
//   file's text, kept so the run reads the same file whatever happens to it
//   since), inputs, user, state and lease (a worker holds a running run, as a
//   call); deadline_at is the run's wall clock, fixed when it first starts.
// - step_attempts: every attempt of every step, with what replay and the
//   proof need: a digest of its inputs, the identity versions as fingerprints
//   (never values), the image digest, the exchanges of in_process http/llm
//   steps, its outputs, and why it failed. call_id is the tool call that
//   carried its sandbox output (streamed like any call's).
// - approvals: requests a human answers (approval steps; JIT credentials later).
// - artifacts: what each step sent, and for dest none the workspace itself.
constexpr std::string_view kV5 = R"sql(
CREATE TABLE workflow_runs (
  run_id TEXT PRIMARY KEY NOT NULL REFERENCES runs (id),
  project_id TEXT NOT NULL REFERENCES projects (id),
  workflow TEXT NOT NULL CHECK (workflow <> ''),
  file TEXT NOT NULL,
  definition TEXT NOT NULL,
  inputs_json TEXT NOT NULL,
  user_id TEXT NOT NULL DEFAULT '',
  timeout_ms INTEGER NOT NULL CHECK (timeout_ms > 0),
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  worker_id TEXT,
  lease_expires_at INTEGER,
  error TEXT,
  replay_of TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  claims INTEGER NOT NULL DEFAULT 0,
  enqueued_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER,
  deadline_at INTEGER,
  CHECK (state <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
) STRICT;
CREATE INDEX workflow_runs_queued ON workflow_runs (enqueued_at) WHERE state = 'queued';
CREATE INDEX workflow_runs_held ON workflow_runs (worker_id) WHERE state = 'running';
CREATE INDEX workflow_runs_by_project ON workflow_runs (project_id, enqueued_at);

CREATE TABLE step_attempts (
  run_id TEXT NOT NULL REFERENCES workflow_runs (run_id),
  step_id TEXT NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt > 0),
  mode TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL
    CHECK (state IN ('running', 'succeeded', 'failed', 'interrupted', 'skipped', 'cancelled')),
  worker_id TEXT,
  sandbox_id TEXT,
  call_id INTEGER,
  inputs_digest TEXT NOT NULL DEFAULT '',
  identity_json TEXT,
  image_digest TEXT,
  exchanges_json TEXT,
  outputs_json TEXT,
  error TEXT,
  error_kind TEXT,
  started_at INTEGER NOT NULL,
  finished_at INTEGER,
  PRIMARY KEY (run_id, step_id, attempt)
) STRICT;

CREATE TABLE approvals (
  id INTEGER PRIMARY KEY,
  project_id TEXT NOT NULL,
  run_id TEXT,
  step_id TEXT,
  kind TEXT NOT NULL CHECK (kind IN ('step', 'credential')),
  request_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
  decided_by TEXT,
  reason TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  decided_at INTEGER
) STRICT;
CREATE INDEX approvals_pending ON approvals (id) WHERE state = 'pending';
CREATE INDEX approvals_by_run ON approvals (run_id, step_id);

CREATE TABLE artifacts (
  run_id TEXT NOT NULL REFERENCES workflow_runs (run_id),
  step_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  dest TEXT NOT NULL,
  ref_json TEXT NOT NULL,
  data BLOB,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, step_id, attempt)
) STRICT;
)sql";

// Version 6 (issue 13): how each profile entry reaches a sandbox, and JIT grants.
// - profile_entries.delivery: env (in the environment at start, issue 11), jit
//   (asked for with rf-cred, under the JIT policy), gateway or proxy (the
//   sandbox holds a placeholder; the egress proxy swaps the value in);
//   delivery_json holds a delivery's settings (the gateway's upstream).
// - jit_grants: each credential a JIT request was granted, under which rule,
//   for max_uses per run and for the record (never the value).
constexpr std::string_view kV6 = R"sql(
ALTER TABLE profile_entries ADD COLUMN delivery TEXT NOT NULL DEFAULT 'env'
  CHECK (delivery IN ('env', 'jit', 'gateway', 'proxy'));
ALTER TABLE profile_entries ADD COLUMN delivery_json TEXT NOT NULL DEFAULT '{}';
CREATE TABLE jit_grants (
  id INTEGER PRIMARY KEY,
  project_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  rule TEXT NOT NULL,
  key TEXT NOT NULL,
  secret TEXT NOT NULL,
  version INTEGER NOT NULL,
  sandbox_id TEXT NOT NULL,
  approval_id INTEGER,
  at INTEGER NOT NULL,
  expires_at INTEGER
) STRICT;
CREATE INDEX jit_grants_by_rule ON jit_grants (project_id, run_id, rule);
)sql";

// Version 7 (issue 14): the API's bearer tokens, one project each. Only the
// SHA-256 of a token is kept (tokens are 256 random bits, so a plain hash is
// enough); `id` is the public handle `token list` and `token revoke` use.
constexpr std::string_view kV7 = R"sql(
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT NOT NULL,
  hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER,
  last_used_at INTEGER
) STRICT;
CREATE INDEX api_tokens_by_project ON api_tokens (project_id);
)sql";

// Version 8 (issue 14): each worker's figures (counters and gauges as
// Prometheus series, a JSON object), written with its heartbeat, so `serve`
// shows every live worker's at /metrics.
constexpr std::string_view kV8 = R"sql(
ALTER TABLE workers ADD COLUMN metrics_json TEXT NOT NULL DEFAULT '{}';
)sql";

// Version 9 (issue 16): a fleet. Each worker's host id and labels, and a
// fencing token (epoch: one more at each registration of its id) that its
// claims carry; each call's required labels (a JSON object, "{}" for none),
// and a workflow run's: those of the step it waits to run, set when a worker
// without them handed it back to the queue (handed_off_at).
// A write to a held call is refused unless the call's claim_epoch is the
// writer's: a partitioned process of a worker id registered again since
// cannot write over what the new one does.
constexpr std::string_view kV9 = R"sql(
ALTER TABLE workers ADD COLUMN host_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN labels_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workers ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tool_calls ADD COLUMN requires_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE tool_calls ADD COLUMN claim_epoch INTEGER;
ALTER TABLE workflow_runs ADD COLUMN requires_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workflow_runs ADD COLUMN handed_off_at INTEGER;
)sql";

// v10: the audit log's Merkle tree, kept (proof/merkle.h): the hash (hex) of
// each complete subtree, leaves [idx << level, (idx + 1) << level). Derived
// from audit_events alone, so any store can rebuild it; kept so a root or a
// proof reads O(log n) rows, not every event.
constexpr std::string_view kV10 = R"sql(
CREATE TABLE audit_merkle (
  level INTEGER NOT NULL CHECK (level >= 0 AND level < 64),
  idx INTEGER NOT NULL CHECK (idx >= 0),
  hash TEXT NOT NULL CHECK (length(hash) = 64),
  PRIMARY KEY (level, idx)
) STRICT, WITHOUT ROWID;
)sql";

// v11 (issue 39): principals and the operator's policy. A token may be bound
// to one user (it then acts as that user only, and one bound to none cannot
// ask for user-level identity) and has a role: `agent` (its project's
// routes) or `operator` (server-wide routes too). Each project's policy, and
// the default one (project_id '*'), as the JSON `ringfence policy set` wrote
// (policy/operator_policy.h reads it).
constexpr std::string_view kV11 = R"sql(
ALTER TABLE api_tokens ADD COLUMN user_id TEXT;
ALTER TABLE api_tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'agent'
  CHECK (role IN ('agent', 'operator'));
CREATE TABLE operator_policies (
  project_id TEXT PRIMARY KEY NOT NULL CHECK (project_id <> ''),
  policy_json TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  updated_by TEXT NOT NULL
) STRICT;
)sql";

// v12 (issue 39): the API's sandboxes live on workers. A sandbox of the API
// (mode 'api') keeps the spec it was made with, for listing it anywhere;
// a worker says where its door is (worker/door.h: a unix socket on its host,
// or HOST:PORT) and the key a front door presents there. The sandboxes
// table is rebuilt: SQLite changes a CHECK no other way.
constexpr std::string_view kV12 = R"sql(
CREATE TABLE sandboxes_v12 (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  backend TEXT NOT NULL,
  project_id TEXT,
  run_id TEXT,
  mode TEXT NOT NULL CHECK (mode IN ('none', 'per_tool', 'per_run', 'per_worker', 'api')),
  worker_id TEXT,
  host_pid INTEGER,
  state TEXT NOT NULL CHECK (state IN ('pooled', 'active', 'destroyed')),
  created_at INTEGER NOT NULL,
  destroyed_at INTEGER,
  spec_json TEXT
) STRICT;
INSERT INTO sandboxes_v12 (id, backend, project_id, run_id, mode, worker_id, host_pid, state,
                           created_at, destroyed_at)
  SELECT id, backend, project_id, run_id, mode, worker_id, host_pid, state, created_at,
         destroyed_at FROM sandboxes;
DROP TABLE sandboxes;
ALTER TABLE sandboxes_v12 RENAME TO sandboxes;
CREATE INDEX sandboxes_by_state ON sandboxes (state);
ALTER TABLE workers ADD COLUMN door TEXT;
ALTER TABLE workers ADD COLUMN door_key TEXT;
)sql";

// v13 (issue 39): a run's name as a tenant gave it, where the run's id had
// to be another one: a project's run names are its own, so a name another
// project's run already has is stored under an id of its own
// (store/run_names.h), and a tenant never learns which names others use.
constexpr std::string_view kV13 = R"sql(
CREATE TABLE run_names (
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT NOT NULL CHECK (name <> ''),
  run_id TEXT NOT NULL UNIQUE,
  PRIMARY KEY (project_id, name)
) STRICT;
)sql";

// v14 (issue 40): operating a fleet. A worker's admin state (`fleet cordon`:
// it takes no new work; `fleet drain`: it also finishes what it holds and
// exits) and its build's version; how long a call's client waits for a worker
// with the labels it requires (`call --wait-timeout`); where a store was
// moved by `store migrate` (a moved store refuses every process); and, in
// schema_version, whether a version breaks older builds (a rolling upgrade
// keeps the fleet's older workers on a store a newer one migrated).
constexpr std::string_view kV14 = R"sql(
ALTER TABLE workers ADD COLUMN admin TEXT NOT NULL DEFAULT ''
  CHECK (admin IN ('', 'cordoned', 'draining'));
ALTER TABLE workers ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN wait_until INTEGER;
CREATE TABLE store_moved (
  to_store TEXT NOT NULL CHECK (to_store <> ''),
  moved_at INTEGER NOT NULL
) STRICT;
ALTER TABLE schema_version ADD COLUMN breaks_older INTEGER NOT NULL DEFAULT 1;
)sql";

constexpr std::string_view kV15 = R"sql(
CREATE TABLE sandbox_lifetimes (
  sandbox_id TEXT PRIMARY KEY NOT NULL CHECK (sandbox_id <> ''),
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT CHECK (name <> ''),
  metadata_json TEXT NOT NULL DEFAULT '{}',
  expires_at INTEGER,
  idle_timeout_ms INTEGER NOT NULL DEFAULT 0,
  ended_reason TEXT
) STRICT;
CREATE INDEX sandbox_lifetimes_by_name ON sandbox_lifetimes (project_id, name);
)sql";

// v16 (issue 41): a project's named volumes.
constexpr std::string_view kV16 = R"sql(
CREATE TABLE volumes (
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT NOT NULL CHECK (name <> ''),
  size_bytes INTEGER NOT NULL CHECK (size_bytes > 0),
  created_at INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  host_id TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (project_id, name)
) STRICT;
)sql";

// ---- The same versions on PostgreSQL. Each does what its SQLite twin above
// does, in PostgreSQL's dialect: BIGINT for every integer (times are
// milliseconds), BYTEA for blobs, identity columns for SQLite's INTEGER
// PRIMARY KEY, and constraints changed in place where SQLite rebuilds a table
// (v3, v4). Tables whose rows SQLite orders by rowid get an identity column
// `ord` (sql::insertion_order).

constexpr std::string_view kPgV1 = R"sql(
CREATE TABLE projects (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  environment TEXT NOT NULL CHECK (environment IN ('production', 'staging', 'development')),
  created_at BIGINT NOT NULL
);

CREATE TABLE runs (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  project_id TEXT NOT NULL REFERENCES projects (id),
  state TEXT NOT NULL CHECK (state IN ('open', 'ended')),
  created_at BIGINT NOT NULL,
  ended_at BIGINT
);
CREATE INDEX runs_by_project ON runs (project_id);

CREATE TABLE tool_calls (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (id),
  project_id TEXT NOT NULL REFERENCES projects (id),
  argv_json TEXT NOT NULL,
  env_json TEXT NOT NULL,
  cwd TEXT NOT NULL,
  stdin BYTEA NOT NULL,
  timeout_ms BIGINT NOT NULL CHECK (timeout_ms > 0),
  state TEXT NOT NULL CONSTRAINT tool_calls_state_check
    CHECK (state IN ('queued', 'claimed', 'running', 'done', 'interrupted', 'failed')),
  worker_id TEXT,
  lease_expires_at BIGINT,
  exit_code BIGINT,
  result_json TEXT,
  error TEXT,
  enqueued_at BIGINT NOT NULL,
  claimed_at BIGINT,
  finished_at BIGINT,
  CHECK (state NOT IN ('claimed', 'running')
         OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);
CREATE INDEX tool_calls_queued ON tool_calls (id) WHERE state = 'queued';
CREATE INDEX tool_calls_queued_by_project ON tool_calls (project_id, id) WHERE state = 'queued';
CREATE INDEX tool_calls_by_run ON tool_calls (run_id, id);
CREATE INDEX tool_calls_held_by_worker ON tool_calls (worker_id)
  WHERE state IN ('claimed', 'running');
CREATE INDEX tool_calls_held_by_expiry ON tool_calls (lease_expires_at)
  WHERE state IN ('claimed', 'running');

CREATE TABLE call_output (
  call_id BIGINT NOT NULL REFERENCES tool_calls (id),
  seq BIGINT NOT NULL CHECK (seq > 0),
  stream BIGINT NOT NULL CHECK (stream IN (1, 2)),
  data BYTEA NOT NULL,
  PRIMARY KEY (call_id, seq)
);

CREATE TABLE sandboxes (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  backend TEXT NOT NULL,
  project_id TEXT,
  run_id TEXT,
  mode TEXT NOT NULL CHECK (mode IN ('none', 'per_tool', 'per_run', 'per_worker')),
  worker_id TEXT,
  host_pid BIGINT,
  state TEXT NOT NULL CHECK (state IN ('pooled', 'active', 'destroyed')),
  created_at BIGINT NOT NULL,
  destroyed_at BIGINT
);
CREATE INDEX sandboxes_by_state ON sandboxes (state);

CREATE TABLE workers (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  pid BIGINT NOT NULL,
  hostname TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'stopped'))
);

CREATE TABLE events (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  at BIGINT NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''),
  project_id TEXT,
  run_id TEXT,
  call_id BIGINT,
  sandbox_id TEXT,
  worker_id TEXT,
  detail_json TEXT
);
CREATE INDEX events_by_run ON events (run_id, id);
CREATE INDEX events_by_call ON events (call_id, id);
)sql";

constexpr std::string_view kPgV2 = R"sql(
ALTER TABLE tool_calls ADD COLUMN sandbox_image TEXT NOT NULL DEFAULT '';
)sql";

constexpr std::string_view kPgV3 = R"sql(
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_state_check,
  ADD CONSTRAINT tool_calls_state_check
    CHECK (state IN ('queued', 'claimed', 'running', 'done', 'interrupted', 'failed',
                     'cancelled'));
ALTER TABLE workers ADD COLUMN project TEXT;
)sql";

constexpr std::string_view kPgV4 = R"sql(
CREATE TABLE secrets (
  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  backend TEXT NOT NULL CHECK (backend IN ('builtin', 'vault')),
  vault_addr TEXT,
  vault_mount TEXT,
  vault_path TEXT,
  state TEXT NOT NULL CHECK (state IN ('active', 'revoked', 'hard_revoked')),
  current_version BIGINT NOT NULL CHECK (current_version > 0),
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  revoked_at BIGINT,
  CHECK (backend <> 'vault' OR (vault_addr IS NOT NULL AND vault_path IS NOT NULL))
);

CREATE TABLE secret_versions (
  name TEXT NOT NULL REFERENCES secrets (name),
  version BIGINT NOT NULL CHECK (version > 0),
  sealed BYTEA,
  key_id TEXT,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (name, version),
  CHECK ((sealed IS NULL) = (key_id IS NULL))
);

CREATE TABLE identity_profiles (
  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  level TEXT NOT NULL CHECK (level IN ('system', 'project', 'workflow', 'user')),
  project_id TEXT NOT NULL DEFAULT '',
  workflow TEXT NOT NULL DEFAULT '',
  user_id TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  CHECK (level <> 'system' OR (project_id = '' AND workflow = '' AND user_id = '')),
  CHECK (level <> 'project' OR (project_id <> '' AND workflow = '' AND user_id = '')),
  CHECK (level <> 'workflow' OR (workflow <> '' AND user_id = '')),
  CHECK (level <> 'user' OR (user_id <> '' AND workflow = ''))
);
CREATE INDEX identity_profiles_by_scope ON identity_profiles (level, project_id, workflow, user_id);

CREATE TABLE profile_entries (
  profile TEXT NOT NULL REFERENCES identity_profiles (name) ON DELETE CASCADE,
  key TEXT NOT NULL CHECK (key <> ''),
  kind TEXT NOT NULL CHECK (kind IN ('secret', 'value')),
  ref TEXT NOT NULL,
  PRIMARY KEY (profile, key)
);
CREATE INDEX profile_entries_by_secret ON profile_entries (ref) WHERE kind = 'secret';

ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_state_check,
  ADD CONSTRAINT tool_calls_state_check
    CHECK (state IN ('queued', 'claimed', 'running', 'done', 'interrupted', 'failed',
                     'cancelled', 'revoked')),
  ADD COLUMN identity_json TEXT;

CREATE TABLE injections (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  call_id BIGINT REFERENCES tool_calls (id),
  sandbox_id TEXT NOT NULL,
  worker_id TEXT,
  project_id TEXT NOT NULL,
  run_id TEXT,
  key TEXT NOT NULL,
  secret TEXT NOT NULL,
  version BIGINT NOT NULL,
  at BIGINT NOT NULL,
  ended_at BIGINT
);
CREATE INDEX injections_live_by_worker ON injections (worker_id) WHERE ended_at IS NULL;
CREATE INDEX injections_by_secret ON injections (secret, id);

CREATE TABLE audit_events (
  seq BIGINT PRIMARY KEY CHECK (seq > 0),
  at BIGINT NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''),
  actor TEXT NOT NULL DEFAULT '',
  project_id TEXT,
  run_id TEXT,
  call_id BIGINT,
  sandbox_id TEXT,
  detail_json TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
CREATE INDEX audit_events_by_run ON audit_events (run_id, seq);
CREATE INDEX audit_events_by_project ON audit_events (project_id, seq);

CREATE TABLE audit_head (
  one BIGINT PRIMARY KEY CHECK (one = 1),
  seq BIGINT NOT NULL,
  hash TEXT NOT NULL
);
)sql";

constexpr std::string_view kPgV5 = R"sql(
CREATE TABLE workflow_runs (
  run_id TEXT PRIMARY KEY NOT NULL REFERENCES runs (id),
  project_id TEXT NOT NULL REFERENCES projects (id),
  workflow TEXT NOT NULL CHECK (workflow <> ''),
  file TEXT NOT NULL,
  definition TEXT NOT NULL,
  inputs_json TEXT NOT NULL,
  user_id TEXT NOT NULL DEFAULT '',
  timeout_ms BIGINT NOT NULL CHECK (timeout_ms > 0),
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  worker_id TEXT,
  lease_expires_at BIGINT,
  error TEXT,
  replay_of TEXT,
  cancel_requested BIGINT NOT NULL DEFAULT 0,
  claims BIGINT NOT NULL DEFAULT 0,
  enqueued_at BIGINT NOT NULL,
  started_at BIGINT,
  finished_at BIGINT,
  deadline_at BIGINT,
  CHECK (state <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);
CREATE INDEX workflow_runs_queued ON workflow_runs (enqueued_at) WHERE state = 'queued';
CREATE INDEX workflow_runs_held ON workflow_runs (worker_id) WHERE state = 'running';
CREATE INDEX workflow_runs_by_project ON workflow_runs (project_id, enqueued_at);

CREATE TABLE step_attempts (
  run_id TEXT NOT NULL REFERENCES workflow_runs (run_id),
  step_id TEXT NOT NULL,
  attempt BIGINT NOT NULL CHECK (attempt > 0),
  mode TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL
    CHECK (state IN ('running', 'succeeded', 'failed', 'interrupted', 'skipped', 'cancelled')),
  worker_id TEXT,
  sandbox_id TEXT,
  call_id BIGINT,
  inputs_digest TEXT NOT NULL DEFAULT '',
  identity_json TEXT,
  image_digest TEXT,
  exchanges_json TEXT,
  outputs_json TEXT,
  error TEXT,
  error_kind TEXT,
  started_at BIGINT NOT NULL,
  finished_at BIGINT,
  ord BIGINT GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (run_id, step_id, attempt)
);

CREATE TABLE approvals (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  project_id TEXT NOT NULL,
  run_id TEXT,
  step_id TEXT,
  kind TEXT NOT NULL CHECK (kind IN ('step', 'credential')),
  request_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
  decided_by TEXT,
  reason TEXT,
  created_at BIGINT NOT NULL,
  expires_at BIGINT,
  decided_at BIGINT
);
CREATE INDEX approvals_pending ON approvals (id) WHERE state = 'pending';
CREATE INDEX approvals_by_run ON approvals (run_id, step_id);

CREATE TABLE artifacts (
  run_id TEXT NOT NULL REFERENCES workflow_runs (run_id),
  step_id TEXT NOT NULL,
  attempt BIGINT NOT NULL,
  dest TEXT NOT NULL,
  ref_json TEXT NOT NULL,
  data BYTEA,
  size BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (run_id, step_id, attempt)
);
)sql";

constexpr std::string_view kPgV6 = R"sql(
ALTER TABLE profile_entries ADD COLUMN delivery TEXT NOT NULL DEFAULT 'env'
  CHECK (delivery IN ('env', 'jit', 'gateway', 'proxy'));
ALTER TABLE profile_entries ADD COLUMN delivery_json TEXT NOT NULL DEFAULT '{}';
CREATE TABLE jit_grants (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  project_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  rule TEXT NOT NULL,
  key TEXT NOT NULL,
  secret TEXT NOT NULL,
  version BIGINT NOT NULL,
  sandbox_id TEXT NOT NULL,
  approval_id BIGINT,
  at BIGINT NOT NULL,
  expires_at BIGINT
);
CREATE INDEX jit_grants_by_rule ON jit_grants (project_id, run_id, rule);
)sql";

constexpr std::string_view kPgV7 = R"sql(
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT NOT NULL,
  hash BYTEA NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
  created_at BIGINT NOT NULL,
  expires_at BIGINT,
  revoked_at BIGINT,
  last_used_at BIGINT
);
CREATE INDEX api_tokens_by_project ON api_tokens (project_id);
)sql";

constexpr std::string_view kPgV8 = R"sql(
ALTER TABLE workers ADD COLUMN metrics_json TEXT NOT NULL DEFAULT '{}';
)sql";

constexpr std::string_view kPgV9 = R"sql(
ALTER TABLE workers ADD COLUMN host_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN labels_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workers ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tool_calls ADD COLUMN requires_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE tool_calls ADD COLUMN claim_epoch BIGINT;
ALTER TABLE workflow_runs ADD COLUMN requires_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workflow_runs ADD COLUMN handed_off_at BIGINT;
)sql";

constexpr std::string_view kPgV10 = R"sql(
CREATE TABLE audit_merkle (
  level BIGINT NOT NULL CHECK (level >= 0 AND level < 64),
  idx BIGINT NOT NULL CHECK (idx >= 0),
  hash TEXT NOT NULL CHECK (length(hash) = 64),
  PRIMARY KEY (level, idx)
);
)sql";

constexpr std::string_view kPgV11 = R"sql(
ALTER TABLE api_tokens ADD COLUMN user_id TEXT;
ALTER TABLE api_tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'agent'
  CHECK (role IN ('agent', 'operator'));
CREATE TABLE operator_policies (
  project_id TEXT PRIMARY KEY NOT NULL CHECK (project_id <> ''),
  policy_json TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  updated_by TEXT NOT NULL
);
)sql";

constexpr std::string_view kPgV12 = R"sql(
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_mode_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_mode_check
  CHECK (mode IN ('none', 'per_tool', 'per_run', 'per_worker', 'api'));
ALTER TABLE sandboxes ADD COLUMN spec_json TEXT;
ALTER TABLE workers ADD COLUMN door TEXT;
ALTER TABLE workers ADD COLUMN door_key TEXT;
)sql";

constexpr std::string_view kPgV13 = R"sql(
CREATE TABLE run_names (
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT NOT NULL CHECK (name <> ''),
  run_id TEXT NOT NULL UNIQUE,
  PRIMARY KEY (project_id, name)
);
)sql";

constexpr std::string_view kPgV14 = R"sql(
ALTER TABLE workers ADD COLUMN admin TEXT NOT NULL DEFAULT ''
  CHECK (admin IN ('', 'cordoned', 'draining'));
ALTER TABLE workers ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN wait_until BIGINT;
CREATE TABLE store_moved (
  to_store TEXT NOT NULL CHECK (to_store <> ''),
  moved_at BIGINT NOT NULL
);
ALTER TABLE schema_version ADD COLUMN breaks_older BIGINT NOT NULL DEFAULT 1;
)sql";

constexpr std::string_view kPgV15 = R"sql(
CREATE TABLE sandbox_lifetimes (
  sandbox_id TEXT PRIMARY KEY NOT NULL CHECK (sandbox_id <> ''),
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT CHECK (name <> ''),
  metadata_json TEXT NOT NULL DEFAULT '{}',
  expires_at BIGINT,
  idle_timeout_ms BIGINT NOT NULL DEFAULT 0,
  ended_reason TEXT
);
CREATE INDEX sandbox_lifetimes_by_name ON sandbox_lifetimes (project_id, name);
)sql";

constexpr std::string_view kPgV16 = R"sql(
CREATE TABLE volumes (
  project_id TEXT NOT NULL CHECK (project_id <> ''),
  name TEXT NOT NULL CHECK (name <> ''),
  size_bytes BIGINT NOT NULL CHECK (size_bytes > 0),
  created_at BIGINT NOT NULL,
  created_by TEXT NOT NULL,
  host_id TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (project_id, name)
);
)sql";

constexpr Migration kMigrations[] = {
    {1, kV1, kPgV1},
    {2, kV2, kPgV2},
    {3, kV3, kPgV3, /*rebuilds_tables=*/true},
    {4, kV4, kPgV4, /*rebuilds_tables=*/true},
    {5, kV5, kPgV5},
    {6, kV6, kPgV6},
    {7, kV7, kPgV7},
    {8, kV8, kPgV8},
    {9, kV9, kPgV9},
    {10, kV10, kPgV10},
    {11, kV11, kPgV11},
    {12, kV12, kPgV12, /*rebuilds_tables=*/true},
    {13, kV13, kPgV13},
    {14, kV14, kPgV14, /*rebuilds_tables=*/false, /*keeps_older_builds=*/true},
    {15, kV15, kPgV15, /*rebuilds_tables=*/false, /*keeps_older_builds=*/true},
    {16, kV16, kPgV16, /*rebuilds_tables=*/false, /*keeps_older_builds=*/true},
};

std::string_view version_table(const Db& db) {
  return db.engine() == Engine::sqlite
             ? "CREATE TABLE IF NOT EXISTS schema_version ("
               " version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT"
             : "CREATE TABLE IF NOT EXISTS schema_version ("
               " version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";
}

int64_t applied_at_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status check_order(std::span<const Migration> list) {
  int last = 0;
  for (const Migration& m : list) {
    if (m.version <= last) {
      return make_error("migration " + std::to_string(m.version),
                        "versions must increase (it follows " + std::to_string(last) + ")");
    }
    if (m.sql.empty() || m.postgres.empty()) {
      return make_error("migration " + std::to_string(m.version),
                        "it must say what it does on both engines (SQLite and PostgreSQL)");
    }
    last = m.version;
  }
  return ok_status();
}

// A store newer than this build is used as it is when every version past the
// build's keeps older builds (Migration::keeps_older_builds).
Status refuse_newer(Db& db, int found, int known) {
  if (found <= known) return ok_status();
  // found > known >= 14: schema_version says which versions break older builds.
  auto breaking =
      db.prepare("SELECT coalesce(max(version), 0) FROM schema_version WHERE breaks_older <> 0");
  if (!breaking.ok()) return breaking.take_error();
  auto row = breaking->step();
  if (!row.ok()) return row.take_error();
  const int64_t floor = breaking->int64(0);
  if (floor <= known) return ok_status();
  return make_error("", "the store's schema version " + std::to_string(found) +
                            " is newer than this build's (version " + std::to_string(known) +
                            ") and version " + std::to_string(floor) +
                            " changed it in a way older builds cannot use; use a ringfence that "
                            "knows version " +
                            std::to_string(floor) + " or later");
}

Status record(Db& db, const Migration& m) {
  auto insert = db.prepare(
      m.version >= 14 ? "INSERT INTO schema_version (version, applied_at, breaks_older) "
                        "VALUES (?1, ?2, ?3)"
                      : "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)");
  if (!insert.ok()) return insert.take_error();
  insert->bind(1, int64_t{m.version}).bind(2, applied_at_ms());
  if (m.version >= 14) insert->bind(3, int64_t{m.keeps_older_builds ? 0 : 1});
  return insert->run();
}

// After a table rebuild: every reference still finds its row.
Status check_foreign_keys(Db& db) {
  auto check = db.prepare("PRAGMA foreign_key_check");
  if (!check.ok()) return check.take_error();
  auto row = check->step();
  if (!row.ok()) return row.take_error();
  if (!*row) return ok_status();
  return make_error("", "a row of table " + check->text(0) + " (rowid " +
                            std::to_string(check->int64(1)) + ") refers to a missing row of " +
                            check->text(2));
}

// One migration in one write transaction; the version is read under the lock,
// so of two processes migrating at once the second finds it done.
Status apply(Db& db, const Migration& m, int known) {
  return write_transaction(db, [&]() -> Status {
    RF_TRY(db.exec(version_table(db)));
    auto current = schema_version(db);
    if (!current.ok()) return current.take_error();
    RF_TRY(refuse_newer(db, *current, known));
    if (*current >= m.version) return ok_status();
    const bool sqlite = db.engine() == Engine::sqlite;
    auto applied = db.exec(sqlite ? m.sql : m.postgres);
    if (applied.ok() && sqlite && m.rebuilds_tables) applied = check_foreign_keys(db);
    if (!applied.ok()) {
      return make_error("migration " + std::to_string(m.version), applied.error().to_string());
    }
    return record(db, m);
  });
}

// A rebuild drops a table that others refer to: with foreign keys on, the drop
// would delete through them. The pragma is per connection and is a no-op inside
// a transaction, so it is switched around the migration's transaction.
Status apply_one(Db& db, const Migration& m, int known) {
  if (!m.rebuilds_tables || db.engine() != Engine::sqlite) return apply(db, m, known);
  RF_TRY(db.exec("PRAGMA foreign_keys = OFF"));
  Status applied = apply(db, m, known);
  Status restored = db.exec("PRAGMA foreign_keys = ON");
  if (!applied.ok()) return applied;
  return restored;
}

Status migrate_all(Db& db, std::span<const Migration> list) {
  RF_TRY(check_order(list));
  int known = list.empty() ? 0 : list.back().version;
  auto current = schema_version(db);
  if (!current.ok()) return current.take_error();
  RF_TRY(refuse_newer(db, *current, known));
  for (const Migration& m : list) {
    if (m.version > *current) RF_TRY(apply_one(db, m, known));
  }
  return ok_status();
}

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

Result<int> schema_version(Db& db) {
  auto exists = db.prepare(
      db.engine() == Engine::sqlite
          ? "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
          : "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = 'schema_version'");
  if (!exists.ok()) return exists.take_error();
  auto row = exists->step();
  if (!row.ok()) return row.take_error();
  if (exists->int64(0) == 0) return 0;
  auto max = db.prepare("SELECT coalesce(max(version), 0) FROM schema_version");
  if (!max.ok()) return max.take_error();
  row = max->step();
  if (!row.ok()) return row.take_error();
  return static_cast<int>(max->int64(0));
}

Status migrate(Db& db, std::span<const Migration> list) {
  auto migrated = migrate_all(db, list);
  if (migrated.ok()) return migrated;
  return make_error("migrate database " + db.path(), migrated.error().to_string());
}

}  // namespace rf::store
