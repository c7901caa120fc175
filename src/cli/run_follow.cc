#include "cli/run_follow.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/call_wait.h"
#include "core/io.h"
#include "core/printable.h"
#include "core/units.h"

namespace rf::cli {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Every name, message, error and output line here was written by a tenant
// (a workflow file) or a sandbox (a step's output, its error): shown on one
// line, with whatever a terminal would act on escaped.
std::string one_line(std::string_view s, size_t max = 160) { return printable(s, max); }

// The string `key` of an event's detail, shown (`fallback` when absent).
std::string text_of(const json& d, const char* key, const char* fallback = "") {
  auto it = d.find(key);
  if (it == d.end() || !it->is_string()) return fallback;
  return printable(it->get<std::string>());
}

std::string seconds(int64_t ms) {
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  }
  return buf;
}

std::string artifact_text(const json& a) {
  const std::string dest = a.value("dest", "");
  if (dest == "git") {
    return "git " + text_of(a, "url") + " " + text_of(a, "branch") + " @ " +
           printable(a.value("commit", "").substr(0, 12));
  }
  if (dest == "s3") return "s3 " + text_of(a, "url") + " (" + text_of(a, "etag") + ")";
  if (dest == "local") return "local " + text_of(a, "path");
  return "in the store (" + std::to_string(a.value("size", 0)) + " bytes; ringfence run artifact)";
}

// Prints a step's output lines as they come, each with the step's name. An
// agent's stdout is its result (JSON, or a JSONL stream of events): not shown
// as it comes; its end says it in brief (agent_text).
class CallPrinter {
 public:
  // `step`: as shown already.
  CallPrinter(std::string step, int64_t call, bool show_stdout = true)
      : step_(std::move(step)), call_(call), show_stdout_(show_stdout) {}
  // Prints what arrived; returns whether anything did.
  bool pump(store::Store& s) {
    auto chunks = s.output(call_, seq_);
    if (!chunks || chunks->empty()) return false;
    for (const auto& c : *chunks) {
      seq_ = c.seq;
      std::string& pending = c.stream == store::Stream::out ? out_ : err_;
      pending += c.data;
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        emit(c.stream, pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
    }
    return true;
  }
  void flush() {
    if (!out_.empty()) emit(store::Stream::out, out_);
    if (!err_.empty()) emit(store::Stream::err, err_);
    out_.clear();
    err_.clear();
  }

 private:
  void emit(store::Stream stream, const std::string& line) {
    if (stream == store::Stream::out && !show_stdout_) return;
    const std::string text = "  " + step_ + " | " + printable(line) + "\n";
    (void)write_all(stream == store::Stream::out ? STDOUT_FILENO : STDERR_FILENO, text);
  }
  std::string step_;
  int64_t call_;
  bool show_stdout_ = true;
  int64_t seq_ = 0;
  std::string out_, err_;
};

// An agent step's end in brief: the first line of its final message (up to
// 200 characters), its turns and cost when its result says.
std::string agent_text(const json& d) {
  const json& a = d["agent"];
  std::string text = text_of(a, "name", "agent");
  std::string said = d.value("output", "");
  if (auto nl = said.find('\n'); nl != std::string::npos) said = said.substr(0, nl) + " ...";
  if (!said.empty()) text += ": " + one_line(said, 200);
  std::string more;
  if (a.contains("turns") && a["turns"].is_number_integer()) {
    const auto n = a["turns"].get<int64_t>();
    more = std::to_string(n) + (n == 1 ? " turn" : " turns");
  }
  if (a.contains("cost_usd") && a["cost_usd"].is_number()) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "$%.4f", a["cost_usd"].get<double>());
    more += (more.empty() ? "" : ", ") + std::string(buf);
  }
  if (!more.empty()) text += " (" + more + ")";
  return text;
}

// What a replay did with a step (store::ReplayLine), on one line.
std::string replay_text(const std::string& action, const std::string& why) {
  return printable(action) + (why.empty() ? "" : ": " + one_line(why, 300));
}

struct FollowState {
  std::map<int64_t, CallPrinter> calls;
  std::map<std::string, int64_t> call_of_step;
  std::set<std::string> agent_steps;  // steps whose attempt runs an agent
};

void print_event(const store::Event& e, FollowState* f) {
  const json d = json::parse(e.detail_json.value_or("{}"), nullptr, false);
  const std::string step = text_of(d, "step");
  if (e.kind == "run.start") {
    if (d.value("claims", 1) > 1) {
      std::printf("run resumed by worker %s (claim %d): finished steps are not run again\n",
                  text_of(d, "worker", "?").c_str(), d.value("claims", 1));
    }
  } else if (e.kind == "step.start") {
    if (d.contains("agent")) {
      f->agent_steps.insert(step);
    } else {
      f->agent_steps.erase(step);
    }
    const std::string kind = text_of(d, "kind");
    std::printf("> %-14s %s%s  attempt %lld\n", step.c_str(), text_of(d, "mode").c_str(),
                kind.empty() ? "" : ("/" + kind).c_str(),
                static_cast<long long>(d.value("attempt", 1)));
  } else if (e.kind == "step.sandbox") {
    std::printf("  %-14s sandbox %s (%s)\n", step.c_str(), text_of(d, "sandbox", "-").c_str(),
                text_of(d, "backend").c_str());
    if (d.contains("call")) {
      const int64_t call = d["call"].get<int64_t>();
      f->calls.emplace(call, CallPrinter(step, call, !f->agent_steps.count(step)));
      f->call_of_step[step] = call;
    }
  } else if (e.kind == "step.approval") {
    std::printf(
        "  %-14s waiting for approval %lld: %s\n"
        "  %-14s (ringfence approvals approve %lld, or deny %lld --reason TEXT)\n",
        step.c_str(), static_cast<long long>(d.value("approval", 0)),
        one_line(d.value("message", "")).c_str(), "",
        static_cast<long long>(d.value("approval", 0)),
        static_cast<long long>(d.value("approval", 0)));
  } else if (e.kind == "step.retry") {
    std::printf("  %-14s retrying (%s) in %s: attempt %lld\n", step.c_str(),
                text_of(d, "because").c_str(), seconds(d.value("after_ms", 0)).c_str(),
                static_cast<long long>(d.value("next_attempt", 2)));
  } else if (e.kind == "step.handoff") {
    std::printf("  %-14s requires %s; worker %s lacks %s: the run goes to a worker that has them\n",
                step.c_str(), text_of(d, "requires").c_str(), text_of(d, "worker", "?").c_str(),
                text_of(d, "lacks").c_str());
  } else if (e.kind == "step.resume") {
    std::printf("  %-14s %s\n", step.c_str(), text_of(d, "why").c_str());
  } else if (e.kind == "step.end") {
    if (auto it = f->call_of_step.find(step); it != f->call_of_step.end()) {
      auto c = f->calls.find(it->second);
      if (c != f->calls.end()) c->second.flush();
    }
    const bool agent = d.contains("agent") && d["agent"].is_object();
    const std::string status = text_of(d, "status");
    const char* mark = status == "succeeded" ? "ok" : status == "skipped" ? "--" : "!!";
    std::string tail;
    if (d.contains("duration_ms")) tail += " " + seconds(d["duration_ms"].get<int64_t>());
    if (d.contains("exit_code")) tail += "  exit " + std::to_string(d["exit_code"].get<int>());
    if (status == "succeeded" && !agent && !d.value("output", "").empty()) {
      tail += ": " + one_line(d.value("output", ""), 100);
    }
    if (d.contains("error")) tail += ": " + one_line(d.value("error", ""), 300);
    std::printf("%s %-14s %s%s\n", mark, step.c_str(), status.c_str(), tail.c_str());
    if (agent) {
      std::printf("  %-14s %s\n  %-14s the whole result: ringfence run show %s --json\n",
                  step.c_str(), agent_text(d).c_str(), "",
                  printable(e.run_id.value_or("")).c_str());
    }
    if (d.contains("artifact")) {
      std::printf("  %-14s artifact: %s\n", step.c_str(), artifact_text(d["artifact"]).c_str());
    }
    if (d.contains("replay") && d["replay"].is_object()) {
      // Its why, unless the line above gave it as the error.
      std::string why = d["replay"].value("why", "");
      if (why == d.value("error", "")) why.clear();
      std::printf("  %-14s replay: %s\n", step.c_str(),
                  replay_text(d["replay"].value("action", ""), why).c_str());
    }
  }
  std::fflush(stdout);
}

}  // namespace

Result<store::WorkflowRunRow> wait_for_run(store::Store& s, const std::string& run_id,
                                           const FollowOptions& o) {
  store::WorkflowStore wf(s);
  FollowState f;
  int64_t after = 0;
  const auto started = std::chrono::steady_clock::now();
  bool told_no_worker = false;
  for (;;) {
    const uint32_t seen = s.run_version(run_id);
    auto run = wf.run(run_id);
    if (!run) return run.take_error();
    bool any = false;
    if (o.follow) {
      for (auto& [id, printer] : f.calls) any = printer.pump(s) || any;
      store::EventFilter filter;
      filter.run_id = run_id;
      filter.after_id = after;
      filter.limit = 200;
      auto events = s.events(filter);
      if (events) {
        for (const auto& e : *events) {
          after = e.id;
          print_event(e, &f);
          any = true;
        }
      }
    }
    if (run->ended() && !any) {
      for (auto& [id, printer] : f.calls) printer.flush();
      return run;
    }
    if (any) continue;
    if (run->state == store::WorkflowRunState::queued && !told_no_worker &&
        std::chrono::steady_clock::now() - started > milliseconds(2000)) {
      auto live = live_worker_serves(s, run->project_id, {}, store::now_ms());
      if (live && !*live) {
        std::fprintf(stderr,
                     "ringfence: workflow run %s waits: no live worker serves project %s; it "
                     "runs when one starts\nringfence: start one with: ringfence worker start "
                     "--state-dir %s\n",
                     run_id.c_str(), run->project_id.c_str(), o.state_dir.c_str());
        told_no_worker = true;
      }
    }
    s.wait_for_run(run_id, seen, milliseconds(200));
  }
}

json workflow_run_json(store::Store& s, const store::WorkflowRunRow& r) {
  store::WorkflowStore wf(s);
  json out = {{"id", r.run_id},
              {"workflow", r.workflow},
              {"file", r.file},
              {"project", r.project_id},
              {"user", r.user},
              {"state", std::string(store::to_string(r.state))},
              {"inputs", json::parse(r.inputs_json, nullptr, false)},
              {"claims", r.claims},
              {"enqueued_at", r.enqueued_at}};
  if (r.error) out["error"] = *r.error;
  if (r.replay_of) out["replay_of"] = *r.replay_of;
  if (r.started_at) out["started_at"] = *r.started_at;
  if (r.finished_at) out["finished_at"] = *r.finished_at;
  json steps = json::array();
  std::map<std::string, size_t> index;
  auto attempts = wf.attempts(r.run_id);
  if (attempts) {
    for (const auto& a : *attempts) {
      auto it = index.find(a.step_id);
      if (it == index.end()) {
        index[a.step_id] = steps.size();
        steps.push_back({{"id", a.step_id}, {"attempts", json::array()}});
        it = index.find(a.step_id);
      }
      json j = {{"attempt", a.attempt},
                {"mode", a.mode},
                {"state", std::string(store::to_string(a.state))},
                {"inputs_digest", a.inputs_digest},
                {"started_at", a.started_at}};
      if (!a.kind.empty()) j["kind"] = a.kind;
      if (a.sandbox_id) j["sandbox"] = *a.sandbox_id;
      if (a.call_id) j["call"] = *a.call_id;
      if (a.finished_at) j["duration_ms"] = *a.finished_at - a.started_at;
      if (a.outputs_json) j["outputs"] = json::parse(*a.outputs_json, nullptr, false);
      if (a.error) j["error"] = *a.error;
      if (a.error_kind) j["error_kind"] = *a.error_kind;
      if (a.identity_json) j["identity"] = json::parse(*a.identity_json, nullptr, false);
      if (a.image_digest) j["image"] = *a.image_digest;
      if (a.exchanges_json) j["exchanges"] = json::parse(*a.exchanges_json, nullptr, false);
      if (j.contains("outputs") && j["outputs"].is_object() && j["outputs"].contains("replay")) {
        j["replay"] = j["outputs"]["replay"];
      }
      json& step = steps[it->second];
      step["attempts"].push_back(j);
      step["state"] = j["state"];
      step["mode"] = a.mode.empty() && step.contains("mode") ? step["mode"] : json(a.mode);
    }
  }
  if (r.replay_of && attempts) {
    // What the replay did with each step: the newest attempt's note.
    json lines = json::array();
    for (const auto& l : store::replay_report(*attempts)) {
      lines.push_back({{"step", l.step}, {"action", l.action}, {"why", l.why}});
      if (auto it = index.find(l.step); it != index.end()) steps[it->second]["replay"] = l.action;
    }
    out["replay"] = {{"of", *r.replay_of}, {"steps", std::move(lines)}};
  }
  out["steps"] = std::move(steps);
  return out;
}

void print_replay_report(store::Store& s, const store::WorkflowRunRow& r) {
  if (!r.replay_of) return;
  auto attempts = store::WorkflowStore(s).attempts(r.run_id);
  if (!attempts) return;
  std::printf("replay of %s:\n", printable(*r.replay_of).c_str());
  for (const auto& l : store::replay_report(*attempts)) {
    std::printf("  %-14s %s\n", printable(l.step).c_str(), replay_text(l.action, l.why).c_str());
  }
}

int follow_to_end(store::Store& s, const std::string& run_id, const FollowOptions& o,
                  bool as_json) {
  auto end = wait_for_run(s, run_id, o);
  if (!end) {
    std::fprintf(stderr, "ringfence: %s\n", end.error().to_string().c_str());
    return 125;
  }
  if (as_json) {
    std::printf("%s\n", printable_json(workflow_run_json(s, *end)).c_str());
  } else if (!o.follow) {
    print_workflow_run(s, *end);
  } else {
    print_replay_report(s, *end);
    std::printf("run %s %s%s\n", printable(run_id).c_str(),
                std::string(store::to_string(end->state)).c_str(),
                end->error ? (": " + printable(*end->error)).c_str() : "");
  }
  return end->state == store::WorkflowRunState::succeeded ? 0 : 1;
}

void print_workflow_run(store::Store& s, const store::WorkflowRunRow& r) {
  const json j = workflow_run_json(s, r);
  std::printf("run %s  workflow %s  project %s  %s%s\n", printable(r.run_id).c_str(),
              printable(r.workflow).c_str(), printable(r.project_id).c_str(),
              std::string(store::to_string(r.state)).c_str(),
              r.error ? (": " + one_line(*r.error, 300)).c_str() : "");
  if (r.replay_of) {
    std::printf("  a replay of %s: what it did with each step\n", printable(*r.replay_of).c_str());
    if (auto attempts = store::WorkflowStore(s).attempts(r.run_id)) {
      for (const auto& l : store::replay_report(*attempts)) {
        std::printf("    %-14s %s\n", printable(l.step).c_str(),
                    replay_text(l.action, l.why).c_str());
      }
    }
  }
  if (r.claims > 1) std::printf("  resumed: taken %lld times\n", static_cast<long long>(r.claims));
  std::printf("  %-14s %-20s %-7s %-12s %-16s %-9s %s\n", "STEP", "MODE", "ATTEMPT", "STATUS",
              "SANDBOX", "TIME", "OUTPUT / ERROR");
  for (const auto& step : j["steps"]) {
    for (const auto& a : step["attempts"]) {
      std::string mode = text_of(a, "mode");
      if (a.contains("kind")) mode += "/" + text_of(a, "kind");
      std::string text;
      if (a.contains("error")) {
        text = a["error"].get<std::string>();
      } else if (a.contains("outputs") && a["outputs"].contains("output") &&
                 a["outputs"]["output"].is_string()) {
        text = a["outputs"]["output"].get<std::string>();
      }
      std::printf(
          "  %-14s %-20s %-7lld %-12s %-16s %-9s %s\n", text_of(step, "id").c_str(), mode.c_str(),
          static_cast<long long>(a.value("attempt", 1)), text_of(a, "state").c_str(),
          text_of(a, "sandbox", "-").c_str(),
          a.contains("duration_ms") ? seconds(a["duration_ms"].get<int64_t>()).c_str() : "-",
          one_line(text, 80).c_str());
      if (a.contains("outputs") && a["outputs"].contains("artifact")) {
        std::printf("  %-14s artifact: %s\n", "", artifact_text(a["outputs"]["artifact"]).c_str());
      }
    }
  }
}

}  // namespace rf::cli
