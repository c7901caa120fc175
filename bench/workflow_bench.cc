// rf_workflow_bench: what orchestrating a workflow costs (issue 12), with the
// real CLI and a real worker (per_run, native), measured from the run's own
// events (each carries a microsecond time, t_us):
//
//   template   a chain of N in_process template steps: the time from one
//              step's end to the next one's end (schedule, start, render,
//              record). Bar: <= 1 ms p50.
//   sandboxed  a chain of N sandboxed steps (`true`) sharing a per_run
//              sandbox: from one step's end to the next one's end, so the
//              sandbox is warm. Bar: <= 5 ms p50. Peer in the same run:
//              `ringfence call -- true` into a warm per_run sandbox.
//   portfolio  examples/portfolio.yaml against the fake model and the test
//              git server (needs the agents: scripts/install-agents.sh): the
//              run's wall time minus the time of every command in a sandbox
//              (the agent, the push, the verify) and of the model's answers.
//              Bar: <= 50 ms.
//
//   rf_workflow_bench [--steps N] [--portfolio-runs N] [--only template|sandboxed|portfolio]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "store/store.h"
#include "store/workflow_store.h"

extern char** environ;

using namespace rf;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kCli = RF_CLI_PATH;
const std::string kSource = RF_SOURCE_DIR;

struct Proc {
  pid_t pid = -1;
  ~Proc() { stop(); }
  void start(const std::vector<std::string>& argv, const std::string& log,
             const std::vector<std::string>& env = {}) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
    for (const auto& e : env) envs.push_back(e);
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data()) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  void stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

int run(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  std::string cmd;
  for (const auto& a : args) cmd += "'" + a + "' ";
  FILE* p = ::popen((cmd + ">/dev/null 2>&1").c_str(), "w");
  if (p == nullptr) return -1;
  if (!stdin_text.empty()) std::fwrite(stdin_text.data(), 1, stdin_text.size(), p);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int wait_port(const std::string& file) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(file);
    int port = 0;
    if (in >> port && port > 0) return port;
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Bench {
 public:
  explicit Bench(std::string dir) : dir_(std::move(dir)), state_(dir_ + "/state") {}

  bool start_worker(const std::vector<std::string>& extra = {},
                    const std::vector<std::string>& env = {}) {
    worker_.stop();
    std::vector<std::string> a = {kCli,      "worker",      "start", "--sandbox-mode",
                                  "per_run", "--state-dir", state_};
    a.insert(a.end(), extra.begin(), extra.end());
    worker_.start(a, dir_ + "/worker.log", env);
    auto s = store::Store::open(state_ + "/ringfence.db");
    for (int i = 0; s && i < 1000; ++i) {
      auto w = (*s)->workers_serving("bench", store::now_ms() - 10'000);
      if (w && !w->empty()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // Runs the workflow to its end; returns its events (detail JSON, in order).
  std::vector<json> run_workflow(const std::string& file, const std::string& run_id) {
    if (run({kCli, "workflow", "run", file, "--project", "bench", "--run-id", run_id, "--state-dir",
             state_}) != 0) {
      std::fprintf(stderr, "run %s did not succeed (see %s/worker.log)\n", run_id.c_str(),
                   dir_.c_str());
    }
    auto s = store::Store::open(state_ + "/ringfence.db");
    std::vector<json> out;
    if (!s) return out;
    store::EventFilter f;
    f.run_id = run_id;
    f.limit = 100000;
    auto events = (*s)->events(f);
    if (!events) return out;
    for (const auto& e : *events) {
      json d = json::parse(e.detail_json.value_or("{}"), nullptr, false);
      d["kind"] = e.kind;
      out.push_back(std::move(d));
    }
    return out;
  }

  const std::string& state() const { return state_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, state_;
  Proc worker_;
};

// From one step's end to the next one's, in a chain.
std::vector<double> step_gaps(const std::vector<json>& events) {
  std::vector<double> ends;
  for (const auto& e : events) {
    if (e["kind"] == "step.end") ends.push_back(e["t_us"].get<double>());
  }
  std::vector<double> gaps;
  for (size_t i = 1; i < ends.size(); ++i) gaps.push_back((ends[i] - ends[i - 1]) / 1000.0);
  return gaps;
}

std::string chain(const std::string& name, int n, const std::string& step) {
  std::string y = "name: " + name + "\nsteps:\n";
  for (int i = 0; i < n; ++i) {
    y += "  - id: s" + std::to_string(i) + "\n" + step;
    if (i > 0) y += "    needs: [s" + std::to_string(i - 1) + "]\n";
  }
  return y;
}

void print(const char* what, const std::vector<double>& ms, const char* bar) {
  std::vector<double> us;
  for (double v : ms) us.push_back(v * 1000);
  const auto s = bench::summarise(us);
  std::printf("%-44s p50 %8.3f ms  p99 %8.3f ms  mean %8.3f ms  (n=%zu)  bar %s\n", what,
              s.p50 / 1000, s.p99 / 1000, s.mean / 1000, ms.size(), bar);
}

void template_chain(Bench& b, int n) {
  const std::string f = b.dir() + "/template.yaml";
  std::ofstream(f) << chain("template", n,
                            "    mode: in_process\n    kind: template\n"
                            "    template: \"{{run.id}} step\"\n");
  print("in_process template step (end to end)", step_gaps(b.run_workflow(f, "t1")), "1 ms");
}

void sandboxed_chain(Bench& b, int n) {
  const std::string f = b.dir() + "/sandboxed.yaml";
  std::ofstream(f) << chain("sandboxed", n,
                            "    mode: sandboxed\n    sandbox: {mode: per_run}\n"
                            "    run: \"true\"\n");
  auto gaps = step_gaps(b.run_workflow(f, "s1"));
  if (!gaps.empty()) gaps.erase(gaps.begin());  // the first made the sandbox
  print("sandboxed step, warm per_run sandbox", gaps, "5 ms");
  // Peer: a tool call into a warm per_run sandbox, through the same worker.
  run({kCli, "call", "--project", "bench", "--run", "peer", "--state-dir", b.state(), "--",
       "true"});
  std::vector<double> calls;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run({kCli, "call", "--project", "bench", "--run", "peer", "--state-dir", b.state(), "--",
         "true"});
    calls.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  print("peer: ringfence call -- true (warm per_run)", calls, "-");
}

void portfolio(Bench& b, int runs) {
  if (!std::filesystem::exists("/usr/local/bin/claude")) {
    std::printf("portfolio: skipped (no /usr/local/bin/claude: scripts/install-agents.sh)\n");
    return;
  }
  Proc model, git;
  model.start({"/usr/bin/python3", kSource + "/tests/agents/fake_model.py", "--script",
               kSource + "/examples/portfolio-model.json", "--port", "0", "--port-file",
               b.dir() + "/model-port"},
              b.dir() + "/model.log");
  std::filesystem::create_directories(b.dir() + "/git");
  const std::string token = "ghp_bench_token_123456";
  git.start({"/usr/bin/python3", kSource + "/tests/artifacts/git_server.py", "--root",
             b.dir() + "/git", "--port", "0", "--port-file", b.dir() + "/git-port", "--token",
             token, "--anonymous-read", "--init", "site"},
            b.dir() + "/git.log");
  const int mport = wait_port(b.dir() + "/model-port");
  const int gport = wait_port(b.dir() + "/git-port");
  run({kCli, "secret", "set", "a", "--state-dir", b.state()}, "sk-ant-bench-key-0123456789");
  run({kCli, "secret", "set", "g", "--state-dir", b.state()}, token);
  run({kCli, "identity", "profile", "set", "portfolio", "--level", "workflow", "--workflow",
       "portfolio", "ANTHROPIC_API_KEY=secret:a",
       "ANTHROPIC_BASE_URL=value:http://model.test:" + std::to_string(mport),
       "GITHUB_TOKEN=secret:g", "--state-dir", b.state()});
  b.start_worker(
      {"--proxy-resolve", "model.test=127.0.0.1", "--proxy-resolve", "git.test=127.0.0.1"},
      {"PLANNER_KEY=sk-planner-bench"});
  std::string text = slurp(kSource + "/examples/portfolio.yaml");
  for (const auto& [from, to] : {std::pair<std::string, int>{"18080", mport}, {"18081", gport}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), std::to_string(to));
    }
  }
  const std::string f = b.dir() + "/portfolio.yaml";
  std::ofstream(f) << text;
  std::vector<double> overhead, total, agent;
  for (int i = 0; i < runs; ++i) {
    const std::string id = "p" + std::to_string(i);
    const auto events = b.run_workflow(f, id);
    double start = 0, end = 0;
    for (const auto& e : events) {
      if (e["kind"] == "run.start") start = e["t_us"].get<double>();
      if (e["kind"] == "run.end") end = e["t_us"].get<double>();
    }
    // The commands' own time (agent, push, verify) and the model's answers.
    double own = 0, agent_ms = 0;
    auto s = store::Store::open(b.state() + "/ringfence.db");
    auto r = (*s)->run(id);
    for (const auto& c : r->calls) {
      if (!c.result_json) continue;
      const json j = json::parse(*c.result_json, nullptr, false);
      own += j.value("wall_ms", 0.0);
      if (j.value("step", "") == "scaffold" && agent_ms == 0) agent_ms = j.value("wall_ms", 0.0);
    }
    auto attempts = store::WorkflowStore(**s).attempts(id);
    for (const auto& a : *attempts) {
      if (!a.exchanges_json) continue;
      for (const auto& x : json::parse(*a.exchanges_json)) own += x.value("duration_ms", 0.0);
    }
    const double wall = (end - start) / 1000.0;
    total.push_back(wall);
    agent.push_back(agent_ms);
    overhead.push_back(wall - own);
  }
  print("portfolio: run wall", total, "-");
  print("portfolio: the agent's own exec (claude)", agent, "-");
  print("portfolio: orchestration overhead", overhead, "50 ms");
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 200, portfolio_runs = 10;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    if (a == "--portfolio-runs" && i + 1 < argc) portfolio_runs = std::atoi(argv[++i]);
    if (a == "--only" && i + 1 < argc) only = argv[++i];
  }
  char tmpl[] = "/tmp/rf-workflow-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  {
    Bench b(tmpl);
    if (only.empty() || only != "portfolio") {
      if (!b.start_worker()) {
        std::fprintf(stderr, "no worker came up (%s/worker.log)\n", tmpl);
        return 1;
      }
      if (only.empty() || only == "template") template_chain(b, steps);
      if (only.empty() || only == "sandboxed") sandboxed_chain(b, std::min(steps, 100));
    }
    if (only.empty() || only == "portfolio") portfolio(b, portfolio_runs);
  }
  std::filesystem::remove_all(tmpl);
  return 0;
}
