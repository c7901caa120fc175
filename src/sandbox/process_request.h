// Background processes as JSON (issue 41 item 2): the requests every door
// takes (the API, MCP, a worker's door) and the answers it gives, one parser
// and one shape for all of them. Errors name the field.
//
//   start   {"argv": [...]} or {"cmd": "..."}, env, cwd, "tag" (a label of
//           the client's), "stdin": true (keep it open for input; a terminal
//           always has it), "pty": true with "rows"/"cols"
//   signal  {"signal": "TERM"} (a name, with or without SIG, or its number)
//   resize  {"rows": 40, "cols": 120}
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"
#include "sandbox/process_table.h"
#include "sandbox/sandbox.h"

namespace rf {

struct ProcessStart {
  ExecCall call;
  std::string tag;
  bool cwd_given = false;  // else its sandbox's default cwd
};

Result<ProcessStart> parse_process_start(const nlohmann::json& body);
// A signal a client may send: 1 to 31, by name or number.
Result<int> parse_signal(const nlohmann::json& value, const std::string& field);
Result<std::pair<int, int>> parse_terminal_size(const nlohmann::json& body);
// A pid as a path segment gives it ("42"); nullopt when it is not one.
std::optional<int> parse_pid(const std::string& text);
// An output offset (?from=): "start" (0), "now", or a byte offset.
Result<uint64_t> parse_output_from(const std::string& text);

// One request about a sandbox's processes, as every door takes it. Its HTTP
// form, below /sandboxes/{id} (the API's /v1 and a worker's /door/v1 alike):
//   POST   /processes                    start (the body above)      201 the process
//   GET    /processes                                                200 {processes}
//   GET    /processes/{pid}                                          200 the process
//   DELETE /processes/{pid}              kill (SIGKILL)              204
//   GET    /processes/{pid}/output?from=start|now|N[&wait_ms=N]      200 its output
//   POST   /processes/{pid}/stdin        the bytes                   204
//   POST   /processes/{pid}/stdin:close                              204
//   POST   /processes/{pid}/signal       {"signal"}                  204
//   POST   /processes/{pid}/resize       {"rows", "cols"}            204
enum class ProcessOp { kStart, kList, kGet, kKill, kOutput, kStdin, kCloseStdin, kSignal, kResize };

struct ProcessRequest {
  ProcessOp op = ProcessOp::kList;
  int pid = 0;
  ProcessStart start;      // kStart
  std::string data;        // kStdin
  int signal = 0;          // kSignal
  int rows = 0, cols = 0;  // kResize
  uint64_t from = 0;       // kOutput: an offset or ProcessTable::kFromNow
  int wait_ms = 0;         // kOutput: wait this long for output when there is none
};

// Why a request is refused, as an HTTP answer.
struct ProcessRefusal {
  int status = 400;
  std::string field;
  std::string message;
};

// The request `method` `rest` (the path's segments after the sandbox's id,
// "processes" first) `query` and `body` make, or why not (404: no such
// route; 405: the method; 400: a field).
std::variant<ProcessRequest, ProcessRefusal> parse_process_request(
    std::string_view method, const std::vector<std::string>& rest,
    const std::map<std::string, std::string>& query, const std::string& body);
// The same request as a door takes it: method, the target below
// /sandboxes/{id} ("/processes/12/signal"), and the body.
struct ProcessHttp {
  std::string method, target, body;
};
ProcessHttp process_http(const ProcessRequest& r);

// Answers every request but kStart on `table` (a start is the door's: its
// policy and call path). `status` 200/204 with `body`, or a refusal; an
// unknown pid is a 404 naming "pid".
std::variant<nlohmann::json, ProcessRefusal> answer_process_request(ProcessTable& table,
                                                                    const ProcessRequest& r);
// The status a request's success answers with.
int process_success_status(ProcessOp op);

// Follows one process's output from `from` as events, each to `emit`
// (name, data): stdout/stderr {data, offset}, skipped {bytes} when `from`
// fell out of the buffer, then end {process} once it ended (or end {error}
// when the table no longer keeps it). `gone` is asked at least every 100
// ms; once it says so, this returns. True when the end was emitted.
bool follow_process_output(const ProcessTable& table, int pid, uint64_t from,
                           const std::function<void(const char*, const nlohmann::json&)>& emit,
                           const std::function<bool()>& gone);

// {pid, argv, tag, pty, stdin_open, state (running|exited|ended),
// started_at, ended_at, exit_code, signal, limit, error, output_bytes,
// dropped_bytes}: `error` says why one ended without an exit.
nlohmann::json process_json(const ProcessInfo& info);
// Output as one JSON answer: {pid, from, next, skipped, ended, stdout,
// stderr, process} (stdout and stderr as put_bytes gives them).
nlohmann::json process_read_json(const ProcessRead& read, uint64_t from);

}  // namespace rf
