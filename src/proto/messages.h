// The typed messages of the host <-> tool runner protocol and their JSON form.
// Decoding validates every field and names the one that is wrong, for example
// `exec.argv[1]: expected a string`. Shared by the host and the runner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rf::proto {

// The protocol version this build speaks, and the range of peer versions it
// accepts: same major, minor in [kMinMinor, kMaxMinor]. The one place the
// range is written; compatible_range() says it (">=0.1,<0.6").
inline constexpr const char* kProtocolVersion = "0.6.0";
inline constexpr int kProtocolMajor = 0;
inline constexpr int kMinMinor = 1;
inline constexpr int kMaxMinor = 6;
// The first minor with cred_request/cred_answer (JIT credentials): a runner
// sends cred_request only to a host that said at least this.
inline constexpr int kCredMinor = 2;
// The first minor with cred_withdrawn: a runner tells only such a host that
// an asker left (an older host's decoder would fail on the unknown type).
inline constexpr int kCredWithdrawnMinor = 3;
// The first minor with file_mkdir, file_remove and file_move: a host sends
// them only to a runner that said at least this.
inline constexpr int kFileOpsMinor = 4;
// The first minor with file_watch, file_unwatch, watch_events and
// watch_end: a host sends them only to a runner that said at least this.
inline constexpr int kWatchMinor = 5;
// And port_exchange, port_data and port_end (a request to a port inside).
inline constexpr int kPortMinor = 5;
// The first minor with port_input and port_close (a port's connection kept
// open both ways: a WebSocket) and with port_exchange's "max" (0: an answer
// of any size, streamed by the host as it comes).
inline constexpr int kPortStreamMinor = 6;
std::string compatible_range();

struct Version {
  int major = 0, minor = 0, patch = 0;
};
Result<Version> parse_version(const std::string& text);
// Ok if `peer` is in compatible_range(); otherwise an error (code kIncompatible)
// that names both.
Status check_compatible(const std::string& peer);

// The call id of the self-probe a runner started with --self-probe-at-start
// (runner/self_probe.h, "At the start"): forked before its hello, its output
// and exit come as those of an exec the host sent as this id, which the host
// keeps for it from the start (host/runner_client.h, expect_exec).
inline constexpr uint32_t kStartProbeCallId = 1;
// --self-probe-at-start's value: variable names joined by ',' (names only:
// argv is readable inside, and values may be secrets), and read back. A name
// is [A-Za-z_][A-Za-z0-9_]*; the error names the bad one.
bool valid_env_name(std::string_view name);
std::string join_env_names(const std::vector<std::string>& names);
Result<std::vector<std::string>> parse_env_names(std::string_view text);

// Flag on kExec: the data bytes are the whole stdin (no kStdin frames follow).
inline constexpr uint8_t kFlagStdinComplete = 1;

// How the runner marks a call's output cut at its cap: sent on the stream it
// cut, after the output up to the cap, as this, the cap, then " bytes]\n"
// (runner/call.cc). The worker's redactor ends a held value there
// (worker/redacting_sink.cc).
inline constexpr std::string_view kOutputTruncatedMark = "\n[ringfence: output truncated at ";

struct Hello {
  std::string protocol = kProtocolVersion;
  std::string role;  // "host" or "runner"
  std::string runner_version;
};

struct ExecRequest {
  std::vector<std::string> argv;           // argv[0] looked up in PATH when it has no '/'
  std::map<std::string, std::string> env;  // the complete environment
  std::string cwd = "/workspace";
  int64_t timeout_ms = 0;    // 0: none
  int64_t output_limit = 0;  // bytes of stdout+stderr; 0: none
  bool pty = false;          // run on a pty the runner owns (stdout carries both)
  int rows = 24, cols = 80;
  bool started = true;  // false: no STARTED frame (the host has no use for the pid)
};

struct Started {
  int pid = 0;
};

struct ExitStatus {
  int exit_code = 0;  // the command's, or 128+signal
  int signal = 0;
  bool timed_out = false;
  bool output_truncated = false;
  std::string limit;   // "", "timeout", "output", "disk"
  int exec_errno = 0;  // set when the command could not be started
  std::string error;   // human text for exec failures
  int64_t wall_us = 0, user_us = 0, sys_us = 0;
  int64_t max_rss_kb = 0;
};

struct FileRequest {
  std::string path;
  uint32_t mode = 0644;    // file_write only
  bool parents = false;    // file_write, file_mkdir: create missing parent directories
  int64_t max_bytes = 0;   // file_read: 0 means kMaxData
  std::string to;          // file_move: the new path
  bool recursive = false;  // file_remove: a directory with everything in it
};

// One thing that happened under a watched directory (watch_events):
// `type` is create, write, remove, rename (the old name), chmod, or
// overflow (events were lost; the path is the watch's); `path` is the
// sandbox's, below the watched path as it was given.
struct FileEvent {
  std::string type;
  std::string path;
  bool dir = false;
};

struct FileInfo {
  std::string name;  // entry name in file_entries; empty in file_info
  std::string type;  // "file", "dir", "symlink", "other"
  int64_t size = 0;
  uint32_t mode = 0;
  int64_t mtime = 0;
};

struct SetEnv {
  std::map<std::string, std::string> set;
  std::vector<std::string> unset;
};

struct Signal {
  int signal = 0;
};

struct Resize {
  int rows = 24, cols = 80;
};

struct ErrorMsg {
  std::string where;
  std::string message;
  int sys_errno = 0;
};

// R→H (protocol 0.2): `rf-cred get NAME` in the sandbox asks the host for a
// credential (docs/protocol.md, JIT credentials). Bounded: name and scope at
// most 256 bytes, reason at most 4 KiB.
struct CredRequest {
  uint32_t request = 0;  // the runner's number for it, 1.., echoed by the answer
  std::string name;      // the key asked for (GITHUB_TOKEN)
  std::string scope;     // what for, as the asker says ("push"); may be empty
  std::string reason;    // free text for the policy's log and a human approver
  int pid = 0;           // the asking process, as the sandbox sees it (0: unknown)
};
inline constexpr size_t kMaxCredName = 256;
// Where the runner serves rf-cred ("@": the abstract namespace), given to it
// as --cred-socket by the backends whose sandboxes have their own network.
inline constexpr const char* kCredSocketName = "@ringfence-cred";
inline constexpr size_t kMaxCredReason = 4096;
// H→R: the answer to one cred_request. A granted value travels as the
// frame's data, never in the JSON.
struct CredAnswer {
  uint32_t request = 0;
  bool granted = false;
  std::string message;  // refused: why, naming the rule or the missing key
};
// R→H (protocol 0.3): the asker of request `request` closed its connection
// (it was killed, it timed out) before the host answered. The host stops
// waiting for a human on its behalf; a later answer to it is ignored.
struct CredWithdrawn {
  uint32_t request = 0;
};

struct ProbeResult {
  int pid = 0, uid = 0, gid = 0;
  std::string hostname;
  bool no_new_privs = false;
  int seccomp_mode = 0;
  uint64_t cap_eff = 0, cap_prm = 0, cap_bnd = 0, cap_amb = 0;
  std::vector<int> open_fds;
};

std::string to_json(const Hello&);
std::string to_json(const ExecRequest&);
std::string to_json(const Started&);
std::string to_json(const ExitStatus&);
std::string to_json(const FileRequest&);
std::string to_json(const FileInfo&);
std::string to_json(const std::vector<FileInfo>&);
std::string to_json(const std::vector<FileEvent>&);  // watch_events: {"events": [...]}
std::string to_json(const SetEnv&);
std::string to_json(const Signal&);
std::string to_json(const Resize&);
std::string to_json(const ErrorMsg&);
std::string to_json(const ProbeResult&);
std::string to_json(const CredRequest&);
std::string to_json(const CredAnswer&);
std::string to_json(const CredWithdrawn&);

Result<Hello> parse_hello(const std::string& json);
Result<ExecRequest> parse_exec(const std::string& json);
Result<Started> parse_started(const std::string& json);
Result<ExitStatus> parse_exit(const std::string& json);
Result<FileRequest> parse_file_request(const std::string& json);
Result<FileInfo> parse_file_info(const std::string& json);
Result<std::vector<FileInfo>> parse_file_entries(const std::string& json);
Result<std::vector<FileEvent>> parse_watch_events(const std::string& json);
Result<SetEnv> parse_set_env(const std::string& json);
Result<Signal> parse_signal(const std::string& json);
Result<Resize> parse_resize(const std::string& json);
Result<ErrorMsg> parse_error(const std::string& json);
Result<ProbeResult> parse_probe_result(const std::string& json);
Result<CredRequest> parse_cred_request(const std::string& json);
Result<CredAnswer> parse_cred_answer(const std::string& json);
Result<CredWithdrawn> parse_cred_withdrawn(const std::string& json);

}  // namespace rf::proto
