#include "sandbox/process_request.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "core/printable.h"
#include "sandbox/exec_json.h"

namespace rf {
using nlohmann::json;

namespace {

constexpr size_t kMaxTag = 128;

struct NamedSignal {
  const char* name;
  int number;
};
constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
    {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
};

Result<int> size_field(const json& body, const char* name) {
  if (!body.contains(name)) return make_error(name, "missing (1 to 10000)");
  const json& v = body[name];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 10000)
    return make_error(name, "expected an integer from 1 to 10000");
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

Result<ProcessStart> parse_process_start(const json& body) {
  if (!body.is_object()) return make_error("body", "expected a JSON object");
  json call = json::object();
  ProcessStart start;
  bool pty = false, keep_stdin = false;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (k == "argv" || k == "cmd" || k == "env" || k == "cwd") {
      call[k] = it.value();
    } else if (k == "tag") {
      if (!it->is_string()) return make_error("tag", "expected a string");
      start.tag = it->get<std::string>();
      const bool plain = std::all_of(start.tag.begin(), start.tag.end(),
                                     [](char c) { return c >= 0x20 && c < 0x7f; });
      if (start.tag.size() > kMaxTag || !plain)
        return make_error("tag", "expected at most 128 printable ASCII characters");
    } else if (k == "pty" || k == "stdin") {
      if (!it->is_boolean()) return make_error(k, "expected true or false");
      (k == "pty" ? pty : keep_stdin) = it->get<bool>();
    } else if (k == "rows" || k == "cols") {
      const bool on_pty =
          body.contains("pty") && body["pty"].is_boolean() && body["pty"].get<bool>();
      if (!on_pty) return make_error(k, "only with pty: true");
    } else {
      return make_error(k,
                        "unknown field (allowed: argv, cmd, env, cwd, tag, stdin, pty, rows, "
                        "cols)");
    }
  }
  auto parsed = parse_exec_json(call);
  if (!parsed) return parsed.take_error();
  start.call = std::move(*parsed);
  start.cwd_given = body.contains("cwd");
  start.call.pty = pty;
  start.call.stdin_stream = pty || keep_stdin;
  if (pty) {
    start.call.rows = 24;
    start.call.cols = 80;
    if (body.contains("rows")) {
      auto r = size_field(body, "rows");
      if (!r) return r.take_error();
      start.call.rows = *r;
    }
    if (body.contains("cols")) {
      auto c = size_field(body, "cols");
      if (!c) return c.take_error();
      start.call.cols = *c;
    }
  }
  return start;
}

Result<int> parse_signal(const json& value, const std::string& field) {
  if (value.is_number_integer()) {
    const int64_t n = value.get<int64_t>();
    if (n < 1 || n > 31) return make_error(field, "expected a signal number from 1 to 31");
    return static_cast<int>(n);
  }
  if (!value.is_string()) return make_error(field, "expected a signal name (TERM) or number");
  std::string name = value.get<std::string>();
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  for (const NamedSignal& s : kSignals) {
    if (name == s.name) return s.number;
  }
  return make_error(field, "unknown signal \"" + printable(value.get<std::string>()) +
                               "\" (HUP, INT, QUIT, KILL, USR1, USR2, TERM, CONT, STOP, TSTP, "
                               "WINCH, ALRM, or a number)");
}

Result<std::pair<int, int>> parse_terminal_size(const json& body) {
  if (!body.is_object()) return make_error("body", "expected {\"rows\": N, \"cols\": N}");
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "rows" && it.key() != "cols")
      return make_error(it.key(), "unknown field (allowed: rows, cols)");
  }
  auto rows = size_field(body, "rows");
  if (!rows) return rows.take_error();
  auto cols = size_field(body, "cols");
  if (!cols) return cols.take_error();
  return std::pair{*rows, *cols};
}

std::optional<int> parse_pid(const std::string& text) {
  int pid = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 0) return std::nullopt;
  return pid;
}

Result<uint64_t> parse_output_from(const std::string& text) {
  if (text == "start") return uint64_t{0};
  if (text == "now") return ProcessTable::kFromNow;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return make_error("from", "expected start, now, or a byte offset");
  return v;
}

json process_json(const ProcessInfo& p) {
  json j = {{"pid", p.pid},
            {"argv", p.argv},
            {"tag", p.tag},
            {"pty", p.pty},
            {"stdin_open", p.stdin_open},
            {"state", p.running  ? "running"
                      : p.result ? "exited"
                                 : "ended"},
            {"started_at", p.started_ms},
            {"ended_at", p.ended_ms == 0 ? json(nullptr) : json(p.ended_ms)},
            {"exit_code", p.result ? json(p.result->exit_code) : json(nullptr)},
            {"signal", p.result ? json(p.result->signal) : json(nullptr)},
            {"limit", p.result && !p.result->limit.empty() ? json(p.result->limit) : json(nullptr)},
            {"error", !p.end_error.empty()                   ? json(p.end_error)
                      : p.result && !p.result->error.empty() ? json(p.result->error)
                                                             : json(nullptr)},
            {"output_bytes", p.output_bytes},
            {"dropped_bytes", p.dropped_bytes}};
  return j;
}

json process_read_json(const ProcessRead& r, uint64_t from) {
  std::string out, err;
  for (const OutputPiece& p : r.pieces) (p.is_stderr ? err : out).append(p.data);
  json j = {{"pid", r.info.pid},
            {"from", from == ProcessTable::kFromNow ? json("now") : json(from)},
            {"next", r.next},
            {"skipped", r.skipped},
            {"ended", r.ended}};
  put_bytes(j, "stdout", out);
  put_bytes(j, "stderr", err);
  j["process"] = process_json(r.info);
  return j;
}

}  // namespace rf

namespace rf {

namespace {
constexpr int kMaxWaitMs = 30000;
constexpr size_t kMaxStdinChunk = 1u << 20;

ProcessRefusal refusal_of(const Error& e) { return ProcessRefusal{400, e.where, e.message}; }

}  // namespace

int process_success_status(ProcessOp op) {
  switch (op) {
    case ProcessOp::kStart:
      return 201;
    case ProcessOp::kList:
    case ProcessOp::kGet:
    case ProcessOp::kOutput:
      return 200;
    case ProcessOp::kKill:
    case ProcessOp::kStdin:
    case ProcessOp::kCloseStdin:
    case ProcessOp::kSignal:
    case ProcessOp::kResize:
      break;
  }
  return 204;
}

std::variant<ProcessRequest, ProcessRefusal> parse_process_request(
    std::string_view method, const std::vector<std::string>& rest,
    const std::map<std::string, std::string>& query, const std::string& body) {
  ProcessRequest r;
  auto no_route = [] { return ProcessRefusal{404, "", "no such route"}; };
  auto only = [](const char* allowed) {
    return ProcessRefusal{405, "", std::string("allowed: ") + allowed};
  };
  auto json_body = [&]() -> std::variant<json, ProcessRefusal> {
    json j =
        json::parse(body.empty() ? std::string_view("{}") : std::string_view(body), nullptr, false);
    if (j.is_discarded()) return ProcessRefusal{400, "body", "the body is not JSON"};
    return j;
  };
  if (rest.empty() || rest[0] != "processes" || rest.size() > 3) return no_route();
  if (rest.size() == 1) {
    if (method == "GET") {
      r.op = ProcessOp::kList;
      return r;
    }
    if (method != "POST") return only("GET, POST");
    auto j = json_body();
    if (auto* e = std::get_if<ProcessRefusal>(&j)) return *e;
    auto start = parse_process_start(std::get<json>(j));
    if (!start) return refusal_of(start.error());
    r.op = ProcessOp::kStart;
    r.start = std::move(*start);
    return r;
  }
  auto pid = parse_pid(rest[1]);
  if (!pid) return ProcessRefusal{404, "pid", "no process " + rest[1] + " (a pid is a number)"};
  r.pid = *pid;
  if (rest.size() == 2) {
    if (method == "GET") {
      r.op = ProcessOp::kGet;
    } else if (method == "DELETE") {
      r.op = ProcessOp::kKill;
    } else {
      return only("GET, DELETE");
    }
    return r;
  }
  const std::string& op = rest[2];
  if (op == "output") {
    if (method != "GET") return only("GET");
    r.op = ProcessOp::kOutput;
    r.from = 0;
    if (auto it = query.find("from"); it != query.end()) {
      auto from = parse_output_from(it->second);
      if (!from) return refusal_of(from.error());
      r.from = *from;
    }
    if (auto it = query.find("wait_ms"); it != query.end()) {
      int v = -1;
      auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
      if (ec != std::errc() || end != it->second.data() + it->second.size() || v < 0 ||
          v > kMaxWaitMs) {
        return ProcessRefusal{400, "wait_ms", "expected milliseconds from 0 to 30000"};
      }
      r.wait_ms = v;
    }
    return r;
  }
  if (op != "stdin" && op != "stdin:close" && op != "signal" && op != "resize") return no_route();
  if (method != "POST") return only("POST");
  if (op == "stdin") {
    if (body.size() > kMaxStdinChunk)
      return ProcessRefusal{413, "stdin", "at most 1 MiB of input per request"};
    r.op = ProcessOp::kStdin;
    r.data = body;
    return r;
  }
  if (op == "stdin:close") {
    r.op = ProcessOp::kCloseStdin;
    return r;
  }
  auto j = json_body();
  if (auto* e = std::get_if<ProcessRefusal>(&j)) return *e;
  const json& b = std::get<json>(j);
  if (op == "signal") {
    if (!b.is_object() || !b.contains("signal") || b.size() != 1)
      return ProcessRefusal{400, "signal", "expected {\"signal\": \"TERM\"} (a name or number)"};
    auto sig = parse_signal(b["signal"], "signal");
    if (!sig) return refusal_of(sig.error());
    r.op = ProcessOp::kSignal;
    r.signal = *sig;
    return r;
  }
  if (op == "resize") {
    auto size = parse_terminal_size(b);
    if (!size) return refusal_of(size.error());
    r.op = ProcessOp::kResize;
    r.rows = size->first;
    r.cols = size->second;
    return r;
  }
  return no_route();
}

ProcessHttp process_http(const ProcessRequest& r) {
  const std::string one = "/processes/" + std::to_string(r.pid);
  switch (r.op) {
    case ProcessOp::kStart: {
      json b = {{"argv", r.start.call.argv}};
      if (!r.start.call.env.empty()) b["env"] = r.start.call.env;
      if (r.start.cwd_given) b["cwd"] = r.start.call.cwd;
      if (!r.start.tag.empty()) b["tag"] = r.start.tag;
      if (r.start.call.pty) {
        b["pty"] = true;
        b["rows"] = r.start.call.rows;
        b["cols"] = r.start.call.cols;
      } else if (r.start.call.stdin_stream) {
        b["stdin"] = true;
      }
      return {"POST", "/processes", b.dump()};
    }
    case ProcessOp::kList:
      return {"GET", "/processes", ""};
    case ProcessOp::kGet:
      return {"GET", one, ""};
    case ProcessOp::kKill:
      return {"DELETE", one, ""};
    case ProcessOp::kOutput:
      return {"GET",
              one + "/output?from=" +
                  (r.from == ProcessTable::kFromNow ? std::string("now") : std::to_string(r.from)) +
                  "&wait_ms=" + std::to_string(r.wait_ms),
              ""};
    case ProcessOp::kStdin:
      return {"POST", one + "/stdin", r.data};
    case ProcessOp::kCloseStdin:
      return {"POST", one + "/stdin:close", ""};
    case ProcessOp::kSignal:
      return {"POST", one + "/signal", json{{"signal", r.signal}}.dump()};
    case ProcessOp::kResize:
      return {"POST", one + "/resize", json{{"rows", r.rows}, {"cols", r.cols}}.dump()};
  }
  return {"GET", "/processes", ""};
}

std::variant<json, ProcessRefusal> answer_process_request(ProcessTable& table,
                                                          const ProcessRequest& r) {
  auto failed = [&](const Status& s) -> std::variant<json, ProcessRefusal> {
    if (s) return json(nullptr);
    const Error& e = s.error();
    if (e.code == ErrorCode::kNotFound)
      return ProcessRefusal{404, "pid", "no process " + std::to_string(r.pid)};
    return ProcessRefusal{e.code == ErrorCode::kConflict ? 409 : 500, "pid", e.to_string()};
  };
  switch (r.op) {
    case ProcessOp::kStart:
      return ProcessRefusal{500, "", "a start is its door's"};
    case ProcessOp::kList: {
      json list = json::array();
      for (const ProcessInfo& p : table.list()) list.push_back(process_json(p));
      return json{{"processes", list}};
    }
    case ProcessOp::kGet: {
      auto p = table.find(r.pid);
      if (!p) return ProcessRefusal{404, "pid", "no process " + std::to_string(r.pid)};
      return process_json(*p);
    }
    case ProcessOp::kKill:
      return failed(table.signal(r.pid, SIGKILL));
    case ProcessOp::kOutput: {
      auto read = table.read(r.pid, r.from, std::chrono::milliseconds(r.wait_ms));
      if (!read) return ProcessRefusal{404, "pid", "no process " + std::to_string(r.pid)};
      return process_read_json(*read, r.from);
    }
    case ProcessOp::kStdin:
      return failed(table.write_stdin(r.pid, r.data));
    case ProcessOp::kCloseStdin:
      return failed(table.close_stdin(r.pid));
    case ProcessOp::kSignal:
      return failed(table.signal(r.pid, r.signal));
    case ProcessOp::kResize:
      return failed(table.resize(r.pid, r.rows, r.cols));
  }
  return ProcessRefusal{404, "", "no such route"};
}

bool follow_process_output(const ProcessTable& table, int pid, uint64_t from,
                           const std::function<void(const char*, const json&)>& emit,
                           const std::function<bool()>& gone) {
  uint64_t at = from;
  for (;;) {
    auto read = table.read(pid, at, std::chrono::milliseconds(100), 256 * 1024);
    if (!read) {
      emit("end", {{"error", "process " + std::to_string(pid) + " is no longer kept"}});
      return true;
    }
    if (read->skipped > 0) emit("skipped", {{"bytes", read->skipped}});
    for (const OutputPiece& p : read->pieces) {
      json j = {{"offset", p.offset}};
      put_bytes(j, "data", p.data);
      emit(p.is_stderr ? "stderr" : "stdout", j);
    }
    at = read->next;
    if (read->ended) {
      emit("end", {{"process", process_json(read->info)}});
      return true;
    }
    if (gone()) return false;
  }
}

}  // namespace rf
