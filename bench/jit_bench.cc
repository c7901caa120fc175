// rf_jit_bench: JIT credentials (issue 13).
//  1. Policy evaluation: a 20-rule policy, the request matching the last rule,
//     and one matching none (bar: 50 us p50).
//  2. A JIT request answered by an allow rule, round trip as the asker sees
//     it: a real worker (per_run, native), a `call --jit` whose bash times
//     each `rf-cred get KEY` with $EPOCHREALTIME (bar: 2 ms p50). The floor in
//     the same sandbox: the same loop running `rf-cred --help`, which starts
//     the same binary and asks nothing.
//
//   build/bench/rf_jit_bench [requests]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "identity/jit_policy.h"

using namespace rf;
using Clock = std::chrono::steady_clock;

namespace {

void row(const char* what, const bench::Stats& s) {
  std::printf("  %-62s p50 %9.3f us  p99 %9.3f us  mean %9.3f us\n", what, s.p50, s.p99, s.mean);
}

int run_cli(const std::vector<std::string>& args, std::string* out, const std::string& in = "") {
  return bench::run_cli(RF_CLI_PATH, args, out, in);
}

// "START END" lines of $EPOCHREALTIME pairs -> microseconds each.
std::vector<double> intervals(const std::string& text) {
  std::vector<double> us;
  std::istringstream in(text);
  double a = 0, b = 0;
  while (in >> a >> b) us.push_back((b - a) * 1e6);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 300;

  // 1. The policy.
  std::string text = "rules:\n";
  for (int i = 0; i < 19; ++i) {
    text += "  - secret: \"team" + std::to_string(i) +
            "-*\"\n    scope: push\n    project: acme\n" +
            "    agent: claude-*\n    verdict: allow\n";
  }
  text += "  - secret: \"github-*\"\n    scope: push\n    project: acme\n    verdict: allow\n";
  auto policy = identity::parse_jit_policy(text, "bench.yaml");
  if (!policy) {
    std::fprintf(stderr, "%s\n", policy.error().to_string().c_str());
    return 1;
  }
  const identity::JitAsk last{"GITHUB_TOKEN", "github-acme", "push",  "why",
                              "acme",         "site",        "build", "claude-code"};
  identity::JitAsk none = last;
  none.secret = "other";
  std::printf("rf_jit_bench: policy of %zu rules, 100 evaluations per sample\n",
              policy->rules.size());
  for (const identity::JitAsk* ask : {&last, static_cast<const identity::JitAsk*>(&none)}) {
    std::vector<double> us;
    for (int s = 0; s < 2000; ++s) {
      const auto t0 = Clock::now();
      for (int i = 0; i < 100; ++i) {
        auto d = identity::evaluate_jit(*policy, *ask);
        asm volatile("" : : "r"(d.rule) : "memory");
      }
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 100);
    }
    row(ask == &last ? "policy evaluation, the 20th rule matches"
                     : "policy evaluation, no rule matches (deny)",
        bench::summarise(us));
  }

  // 2. The round trip, through a real worker.
  char tmpl[] = "/tmp/rf-jit-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  const std::string state = dir + "/state";
  std::ofstream(dir + "/jit.yaml") << "rules:\n  - secret: \"github-*\"\n    verdict: allow\n";
  std::string out;
  if (run_cli({"secret", "set", "github-acme", "--state-dir", state}, &out,
              "ghp_benchvalue0123456789") != 0 ||
      run_cli({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
               "GITHUB_TOKEN=jit:github-acme", "--state-dir", state},
              &out) != 0) {
    std::fprintf(stderr, "setting up the secret and profile failed\n");
    return 1;
  }
  std::vector<std::string> wargs = {RF_CLI_PATH,   "worker",       "start",
                                    "--state-dir", state,          "--sandbox-mode",
                                    "per_run",     "--jit-policy", dir + "/jit.yaml"};
  const pid_t worker = bench::start_background(wargs, dir + "/worker.log");
  if (worker < 0) return 1;
  const std::string loop =
      "for i in $(seq " + std::to_string(n) +
      "); do s=$EPOCHREALTIME; CMD >/dev/null || exit 9; e=$EPOCHREALTIME; echo $s $e; done";
  auto timed = [&](const std::string& cmd) {
    std::string script = loop;
    script.replace(script.find("CMD"), 3, cmd);
    std::string text;
    const int rc = run_cli({"call", "--state-dir", state, "--project", "acme", "--run", "bench",
                            "--jit", "--timeout", "600s", "--", "/bin/bash", "-c", script},
                           &text);
    if (rc != 0) {
      std::fprintf(stderr, "the timed call failed (exit %d): %s\n", rc, text.c_str());
      ::kill(worker, SIGTERM);
      std::exit(1);
    }
    return intervals(text);
  };
  timed("rf-cred --help");  // the sandbox is made and warm
  const auto floor = timed("rf-cred --help");
  const auto asked = timed("rf-cred get GITHUB_TOKEN --scope push");
  std::printf("JIT round trip through a worker (native, per_run), %d requests\n", n);
  row("rf-cred get, answered by an allow rule (as the asker sees it)", bench::summarise(asked));
  row("floor: rf-cred --help (the same binary started, nothing asked)", bench::summarise(floor));
  ::kill(worker, SIGTERM);
  ::waitpid(worker, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
