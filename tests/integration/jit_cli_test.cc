// JIT credentials end to end (issue 13), as a new user tries them: the real
// `ringfence` binary sets secrets, a profile whose keys are delivered by jit,
// and a policy file; a real worker runs `call --jit` in native sandboxes; and
// inside, `rf-cred get` asks. Each test asserts the exact outcome: the value
// (by hash) or the refusal's words and exit code, the audit trail, and that
// no form of the value leaves the sandbox.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <csignal>
#include <nlohmann/json.hpp>

#include "integration/identity_cli_fixture.h"
#include "proto/messages.h"
#include "store/identity_store.h"
#include "store/workflow_store.h"

namespace rf::testing {
namespace {

class JitCli : public IdentityCli {
 protected:
  // Secrets github-acme (the test's random value), deploy-acme and other-acme;
  // profile acme: GITHUB_TOKEN, DEPLOY, OTHER by jit, ENVKEY by env.
  void set_up_jit(const std::string& policy) {
    std::string err;
    ASSERT_EQ(run({"secret", "set", "github-acme"}, secret_, nullptr, &err), 0) << err;
    ASSERT_EQ(run({"secret", "set", "deploy-acme"}, secret_ + "-deploy", nullptr, &err), 0) << err;
    ASSERT_EQ(run({"secret", "set", "other-acme"}, secret_ + "-other", nullptr, &err), 0) << err;
    ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                   "GITHUB_TOKEN=jit:github-acme", "DEPLOY=jit:deploy-acme", "OTHER=jit:other-acme",
                   "ENVKEY=secret:other-acme"},
                  std::nullopt, nullptr, &err),
              0)
        << err;
    policy_ = dir_ + "/jit.yaml";
    std::ofstream(policy_) << policy;
  }
  Cli& start_jit_worker(std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--jit-policy", policy_});
    return start_worker(flags);
  }
  // The audit log's events of `kind`, oldest first.
  std::vector<nlohmann::json> audit_events(const std::string& kind) {
    std::string out, err;
    EXPECT_EQ(run({"audit", "show", "--json"}, std::nullopt, &out, &err), 0) << err;
    std::vector<nlohmann::json> found;
    for (const auto& e : nlohmann::json::parse(out)) {
      if (e["kind"] == kind) found.push_back(e);
    }
    return found;
  }
  std::unique_ptr<store::Store> open_store() {
    auto s = store::Store::open(worker::store_path(dir_));
    EXPECT_TRUE(s.ok());
    return s.ok() ? std::move(*s) : nullptr;
  }
  // Waits for the first pending approval; returns its id (0: none came).
  int64_t wait_for_approval() {
    auto s = open_store();
    const auto end = Clock::now() + 20s;
    while (Clock::now() < end) {
      auto pending = store::WorkflowStore(*s).pending_approvals("acme");
      if (pending.ok() && !pending->empty()) return pending->front().id;
      std::this_thread::sleep_for(20ms);
    }
    return 0;
  }
  // The ids of the pending approvals, oldest first.
  std::vector<int64_t> pending_ids() {
    auto s = open_store();
    std::vector<int64_t> ids;
    auto pending = store::WorkflowStore(*s).pending_approvals("acme");
    EXPECT_TRUE(pending.ok());
    if (pending.ok()) {
      for (const auto& a : *pending) ids.push_back(a.id);
    }
    return ids;
  }
  // Polls `done` until it holds or `within` passes (generous: the machines
  // are shared); returns its last answer.
  template <class F>
  bool wait_until(F done, std::chrono::seconds within = 60s) {
    const auto end = Clock::now() + within;
    while (!done()) {
      if (Clock::now() >= end) return false;
      std::this_thread::sleep_for(50ms);
    }
    return true;
  }
  // The host pid of the process whose argv[0] ends in `program` and that has
  // `arg` among its arguments (0: none). Sandboxed processes are visible
  // from the host's /proc; `arg` is the test's own random marker.
  static pid_t find_process(const std::string& program, const std::string& arg) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string cmdline = slurp_bytes(entry.path().string() + "/cmdline");
      std::vector<std::string> argv;
      for (size_t at = 0; at < cmdline.size();) {
        const size_t nul = cmdline.find('\0', at);
        argv.push_back(cmdline.substr(at, nul == std::string::npos ? nul : nul - at));
        at = nul == std::string::npos ? cmdline.size() : nul + 1;
      }
      if (argv.empty() || argv[0].size() < program.size() ||
          argv[0].compare(argv[0].size() - program.size(), program.size(), program) != 0) {
        continue;
      }
      for (size_t i = 1; i < argv.size(); ++i) {
        if (argv[i] == arg) return static_cast<pid_t>(std::stol(name));
      }
    }
    return 0;
  }
  // Nothing in `text` that a terminal acts on: no ESC, BEL, C1 CSI or bidi override.
  static void expect_no_terminal_controls(const std::string& text, const std::string& where) {
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << "an ESC byte in " << where;
    EXPECT_EQ(text.find('\x07'), std::string::npos) << "a BEL byte in " << where;
    EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << "a C1 CSI in " << where;
    EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << "a U+202E in " << where;
  }
  // A `call ...` as call() makes it (it carries --state-dir before the command).
  int run_call(const std::vector<std::string>& args, std::optional<std::string> in,
               std::string* out, std::string* err) {
    Cli c(args, std::move(in));
    const int code = c.wait(60s);
    *out = c.out();
    *err = c.err();
    return code;
  }
  std::string policy_;
};

constexpr const char* kPolicy = R"(rules:
  - secret: "github-*"
    scope: push
    verdict: allow
    max_uses: 2
  - secret: "deploy-*"
    verdict: ask
    timeout: 30s
    approvers: [alice]
  - key: OTHER
    verdict: deny
)";

// Done when, allow: the asker gets the value on stdout (compared by hash),
// the call had no value before it asked, later execs of the run's sandbox see
// it, another run never does, and no form of it leaves: not the call's
// output, the store file, the worker's log or the audit log, which records
// requested, evaluated (the rule), approved (by the policy) and delivered.
TEST_F(JitCli, AnAllowRuleGivesTheValueToTheAskerAndLaterExecsOnly) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kPolicy));
  Cli& worker = start_jit_worker({"--sandbox-mode", "per_run"});
  std::string out, err;
  ASSERT_EQ(
      run_call(call("acme", "r1", {"--jit"},
                    {"sh", "-c",
                     "echo before:[$GITHUB_TOKEN]; "
                     "rf-cred get GITHUB_TOKEN --scope push --reason 'push the site' | sha256sum; "
                     "rf-cred get GITHUB_TOKEN --scope push; echo; "
                     "printf %s \"$GITHUB_TOKEN\" | base64 -w0"}),
               std::nullopt, &out, &err),
      0)
      << err;
  EXPECT_EQ(out, "before:[]\n" + sha256_hex(secret_) + "  -\n[REDACTED:GITHUB_TOKEN]\n") << out;
  EXPECT_EQ(err, "");
  // A later exec of the same run (no --jit): in its environment, redacted out.
  ASSERT_EQ(
      run_call(call("acme", "r1", {},
                    {"sh", "-c", "printf %s \"$GITHUB_TOKEN\" | sha256sum; echo $GITHUB_TOKEN"}),
               std::nullopt, &out, &err),
      0)
      << err;
  EXPECT_EQ(out, sha256_hex(secret_) + "  -\n[REDACTED:GITHUB_TOKEN]\n");
  // Another run's sandbox never has it.
  ASSERT_EQ(run_call(call("acme", "r2", {"--jit"}, {"sh", "-c", "echo [$GITHUB_TOKEN]"}),
                     std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "[]\n");
  // max_uses 2 per run: r1 had both.
  EXPECT_EQ(
      run_call(call("acme", "r1", {"--jit"}, {"rf-cred", "get", "GITHUB_TOKEN", "--scope", "push"}),
               std::nullopt, &out, &err),
      1);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("rf-cred: refused: rule 1 (" + policy_ +
                     ":2) allows 2 use(s) per run, and run r1 has had them"),
            std::string::npos)
      << err;
  // The trail, and nowhere a form of the value.
  const auto delivered = audit_events("jit.delivered");
  ASSERT_EQ(delivered.size(), 2u);
  const auto& d = delivered[0]["detail"];
  EXPECT_EQ(d["key"], "GITHUB_TOKEN");
  EXPECT_EQ(d["secret"], "github-acme");
  EXPECT_EQ(d["scope"], "push");
  EXPECT_EQ(d["reason"], "push the site");
  EXPECT_EQ(d["rule"], "rule 1 (" + policy_ + ":2)");
  EXPECT_EQ(audit_events("jit.requested").size(), 3u);
  EXPECT_EQ(audit_events("jit.evaluated").size(), 3u);
  const auto approved = audit_events("jit.approved");
  ASSERT_EQ(approved.size(), 3u);  // the third is then over max_uses
  EXPECT_EQ(approved[0]["detail"]["by"], "policy");
  worker.signal(SIGTERM);
  worker.wait(30s);
  const std::string worker_log = worker.out() + worker.err();
  workers_.clear();
  for (const char* f : {"/ringfence.db", "/ringfence.db-wal"}) {
    if (std::filesystem::exists(dir_ + f)) expect_no_form_in(slurp_bytes(dir_ + f), f);
  }
  expect_no_form_in(worker_log, "the worker's log");
  ASSERT_EQ(run({"audit", "show", "--json"}, std::nullopt, &out, &err), 0) << err;
  expect_no_form_in(out, "the audit log");
  ASSERT_EQ(run({"audit", "verify"}, std::nullopt, &out, &err), 0) << out << err;
}

// Denied by a rule, by no rule, for a key not delivered by jit, and for a key
// no profile has: each is exit 1 with the reason on stderr, nothing on
// stdout, and a jit.denied event saying by whom.
TEST_F(JitCli, RefusalsSayWhyOnStderrAndExitOne) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kPolicy));
  start_jit_worker({"--sandbox-mode", "per_tool"});
  std::string out, err;
  struct Case {
    std::vector<std::string> ask;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"OTHER"}, "rf-cred: refused: denied by rule 3 (" + policy_ + ":10)\n"},
      {{"GITHUB_TOKEN", "--scope", "admin"},
       "rf-cred: refused: no rule of " + policy_ +
           " matches (secret github-acme, key GITHUB_TOKEN, scope \"admin\", project acme), so it "
           "is denied\n"},
      {{"ENVKEY"},
       "rf-cred: refused: ENVKEY is delivered by env, not jit: it is not asked for with rf-cred\n"},
      {{"NOPE"},
       "rf-cred: refused: NOPE is not a key of the identity profiles of project acme (ringfence "
       "identity resolve --project acme lists them)\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> cmd = {"rf-cred", "get"};
    cmd.insert(cmd.end(), c.ask.begin(), c.ask.end());
    EXPECT_EQ(run_call(call("acme", "r1", {"--jit"}, cmd), std::nullopt, &out, &err), 1) << err;
    EXPECT_EQ(out, "");
    EXPECT_EQ(err, c.says);
  }
  const auto denied = audit_events("jit.denied");
  ASSERT_EQ(denied.size(), 4u);
  EXPECT_EQ(denied[0]["detail"]["by"], "policy");
  EXPECT_EQ(denied[2]["detail"]["by"], "identity");
  EXPECT_TRUE(audit_events("jit.delivered").empty());
}

// A call without --jit (identity-scoped or not) gets a clear refusal from
// rf-cred, which is there at /.ringfence/bin/rf-cred but not on its PATH.
TEST_F(JitCli, OnlyJitCallsMayAsk) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kPolicy));
  start_jit_worker({"--sandbox-mode", "per_tool"});
  std::string out, err;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--identity"}, std::vector<std::string>{}}) {
    EXPECT_EQ(run_call(call("acme", "r1", extra,
                            {"/.ringfence/bin/rf-cred", "get", "GITHUB_TOKEN", "--scope", "push"}),
                       std::nullopt, &out, &err),
              1);
    EXPECT_EQ(out, "");
    EXPECT_EQ(err,
              "rf-cred: refused: this sandbox takes no credential requests; only `ringfence call "
              "--jit` calls and cli_agent_jit steps may ask\n");
  }
  EXPECT_EQ(run_call(call("acme", "r1", {}, {"sh", "-c", "command -v rf-cred || echo none"}),
                     std::nullopt, &out, &err),
            0);
  EXPECT_EQ(out, "none\n");
  // Bad usage is exit 2 and says how.
  EXPECT_EQ(run_call(call("acme", "r1", {"--jit"}, {"rf-cred", "get"}), std::nullopt, &out, &err),
            2);
  EXPECT_NE(err.find("rf-cred: get: which credential? (NAME)"), std::string::npos) << err;
  EXPECT_NE(err.find("usage: rf-cred get NAME"), std::string::npos) << err;
}

// A sandbox on the host's network could not keep the socket private: a JIT
// call there is refused before it runs, saying what JIT needs.
TEST_F(JitCli, AJitCallOnTheHostsNetworkIsRefusedBeforeItRuns) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kPolicy));
  start_jit_worker({"--sandbox-mode", "per_tool", "--sandbox-network", "host"});
  std::string out, err;
  EXPECT_NE(run_call(call("acme", "r1", {"--jit"}, {"echo", "ran"}), std::nullopt, &out, &err), 0);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("cannot take credential requests: JIT needs a sandbox with a network "
                     "namespace of its own (network none or proxy)"),
            std::string::npos)
      << err;
}

// Done when, ask: the call waits; `approvals list` in another process shows
// the request; someone who is not an approver is refused; alice approves and
// the waiting rf-cred gets the value. A second ask is denied with a reason.
TEST_F(JitCli, AnAskIsAnsweredFromAnotherProcessWhileTheCallWaits) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kPolicy));
  start_jit_worker({"--sandbox-mode", "per_run"});
  Cli asker(call("acme", "r1", {"--jit"},
                 {"sh", "-c", "rf-cred get DEPLOY --reason 'ship it' | sha256sum"}));
  const int64_t id = wait_for_approval();
  ASSERT_NE(id, 0);
  // Attack: while the sandbox's socket serves a waiting request, a process on
  // the host cannot reach it (it lives in the sandbox's network namespace).
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string name = proto::kCredSocketName;
    std::memcpy(a.sun_path, name.data(), name.size());
    a.sun_path[0] = '\0';
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), len), -1);
    EXPECT_EQ(errno, ECONNREFUSED);
    ::close(fd);
  }
  std::string out, err;
  ASSERT_EQ(run({"approvals", "list", "--json"}, std::nullopt, &out, &err), 0) << err;
  const auto list = nlohmann::json::parse(out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["kind"], "credential");
  EXPECT_EQ(list[0]["run"], "r1");
  EXPECT_EQ(list[0]["request"]["key"], "DEPLOY");
  EXPECT_EQ(list[0]["request"]["secret"], "deploy-acme");
  EXPECT_EQ(list[0]["request"]["message"], "Give DEPLOY (secret deploy-acme) to run r1: ship it");
  EXPECT_EQ(
      run({"approvals", "approve", std::to_string(id), "--as", "bob"}, std::nullopt, &out, &err),
      1);
  EXPECT_NE(err.find("bob is not one of its approvers ([\"alice\"])"), std::string::npos) << err;
  ASSERT_EQ(
      run({"approvals", "approve", std::to_string(id), "--as", "alice"}, std::nullopt, &out, &err),
      0)
      << err;
  ASSERT_EQ(asker.wait(30s), 0) << asker.err();
  EXPECT_EQ(asker.out(), sha256_hex(secret_ + "-deploy") + "  -\n");
  const auto approved = audit_events("jit.approved");
  ASSERT_EQ(approved.size(), 1u);
  EXPECT_EQ(approved[0]["detail"]["by"], "alice");
  EXPECT_EQ(approved[0]["detail"]["approval"], id);
  // Denied, with the reason passed on to the asker.
  Cli second(call("acme", "r2", {"--jit"}, {"rf-cred", "get", "DEPLOY"}));
  const int64_t id2 = wait_for_approval();
  ASSERT_NE(id2, 0);
  ASSERT_EQ(run({"approvals", "deny", std::to_string(id2), "--as", "alice", "--reason",
                 "not on a friday"},
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(second.wait(30s), 1);
  EXPECT_EQ(second.out(), "");
  EXPECT_EQ(second.err(), "rf-cred: refused: approval " + std::to_string(id2) +
                              " was denied by alice: not on a friday\n");
}

// An ask nobody answers is denied when its timeout passes, and the approval
// is expired (it can no longer be approved).
TEST_F(JitCli, AnAskNobodyAnswersIsDeniedAtItsTimeout) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(R"(rules:
  - key: DEPLOY
    verdict: ask
    timeout: 1s
)"));
  start_jit_worker({"--sandbox-mode", "per_tool"});
  std::string out, err;
  const auto start = Clock::now();
  EXPECT_EQ(run_call(call("acme", "r1", {"--jit"}, {"rf-cred", "get", "DEPLOY"}), std::nullopt,
                     &out, &err),
            1);
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 1s);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "rf-cred: refused: approval 1 got no answer within 1s, so it counts as denied\n");
  auto s = open_store();
  auto a = store::WorkflowStore(*s).approval(1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->state, store::ApprovalState::expired);
  EXPECT_EQ(run({"approvals", "approve", "1"}, std::nullopt, &out, &err), 1);
  EXPECT_NE(err.find("approval 1 is expired already"), std::string::npos) << err;
  const auto denied = audit_events("jit.denied");
  ASSERT_EQ(denied.size(), 1u);
  EXPECT_EQ(denied[0]["detail"]["by"], "timeout");
}

// Revocation works for JIT values as for identity values: a soft revoke takes
// the value out of the sandbox's environment (jit.withdrawn) and refuses the
// next request; a hard revoke ends the sandbox that holds it, and its running
// call ends revoked. A ttl takes a grant out when it runs out.
TEST_F(JitCli, RevocationAndTtlTakeAGrantBackOut) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(R"(rules:
  - key: GITHUB_TOKEN
    verdict: allow
  - key: DEPLOY
    verdict: allow
    ttl: 1s
)"));
  start_jit_worker({"--sandbox-mode", "per_run"});
  std::string out, err;
  ASSERT_EQ(
      run_call(call("acme", "r1", {"--jit"},
                    {"sh", "-c", "rf-cred get GITHUB_TOKEN >/dev/null && rf-cred get DEPLOY"}),
               std::nullopt, &out, &err),
      0)
      << err;
  EXPECT_EQ(out, "[REDACTED:DEPLOY]");
  // The ttl: within the watch period after 1 s, DEPLOY is gone from later execs.
  std::this_thread::sleep_for(1500ms);
  ASSERT_EQ(run_call(call("acme", "r1", {}, {"sh", "-c", "echo [$DEPLOY] ${#GITHUB_TOKEN}"}),
                     std::nullopt, &out, &err),
            0);
  EXPECT_EQ(out, "[] " + std::to_string(secret_.size()) + "\n");
  // Soft: withdrawn, and asked again, refused (fail closed).
  ASSERT_EQ(run({"secret", "revoke", "github-acme"}, std::nullopt, &out, &err), 0) << err;
  std::this_thread::sleep_for(700ms);
  ASSERT_EQ(run_call(call("acme", "r1", {}, {"sh", "-c", "echo [$GITHUB_TOKEN]"}), std::nullopt,
                     &out, &err),
            0);
  EXPECT_EQ(out, "[]\n");
  EXPECT_EQ(run_call(call("acme", "r2", {"--jit"}, {"rf-cred", "get", "GITHUB_TOKEN"}),
                     std::nullopt, &out, &err),
            1);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("rf-cred: refused: "), std::string::npos) << err;
  EXPECT_NE(err.find("github-acme"), std::string::npos) << err;
  EXPECT_NE(err.find("revoked"), std::string::npos) << err;
  const auto withdrawn = audit_events("jit.withdrawn");
  ASSERT_EQ(withdrawn.size(), 2u);
  EXPECT_EQ(withdrawn[0]["detail"]["why"], "its ttl ran out");
  EXPECT_EQ(withdrawn[1]["detail"]["why"], "secret github-acme was revoked");
  // Hard: a new version, granted to a running call, then hard-revoked.
  ASSERT_EQ(run({"secret", "set", "github-acme"}, secret_ + "2", nullptr, &err), 0) << err;
  Cli sleeper(
      call("acme", "r3", {"--jit"}, {"sh", "-c", "rf-cred get GITHUB_TOKEN >/dev/null; sleep 30"}));
  auto s = open_store();
  const auto end = Clock::now() + 20s;
  while (audit_events("jit.delivered").size() < 3 && Clock::now() < end)
    std::this_thread::sleep_for(50ms);
  ASSERT_EQ(run({"secret", "revoke", "github-acme", "--hard"}, std::nullopt, &out, &err), 0) << err;
  EXPECT_NE(sleeper.wait(20s), 0);
  EXPECT_NE(sleeper.err().find("github-acme was hard-revoked"), std::string::npos) << sleeper.err();
}

// An ask that only a human (or its asker leaving) ends within a test.
constexpr const char* kLongAsk = R"(rules:
  - key: DEPLOY
    verdict: ask
    timeout: 10m
    approvers: [alice]
)";

// Attack: a sandbox writes terminal escape sequences (retitle, clear the
// screen), a C1 CSI and a bidi override into the reason of an ask, and into
// a command's argv. Stopped when every operator view of them (`approvals
// list`, `approvals show`, `audit show`, `run show`, human and --json) holds
// none of those bytes, shows their escaped form, and JSON still carries the
// exact value.
TEST_F(JitCli, AnEscapeSequenceInAReasonReachesTheOperatorEscaped) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kLongAsk));
  start_jit_worker({"--sandbox-mode", "per_tool"});
  const std::string raw = "\x1b]0;pwned\x07\x1b[2J\u202e\u009b";
  Cli asker(call("acme", "r1", {"--jit"},
                 {"sh", "-c",
                  "rf-cred get DEPLOY --reason \"$(printf "
                  "'\\033]0;pwned\\007\\033[2J\\342\\200\\256\\302\\233')\""}));
  const int64_t id = wait_for_approval();
  ASSERT_NE(id, 0) << asker.err();
  std::string out, err;
  // approvals list: one line per request, escaped.
  ASSERT_EQ(run({"approvals", "list"}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "approvals list");
  EXPECT_NE(out.find("Give DEPLOY (secret deploy-acme) to run r1: \\x1b]0;pwned\\x07\\x1b[2J"),
            std::string::npos)
      << out;
  ASSERT_EQ(run({"approvals", "list", "--json"}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "approvals list --json");
  const auto list = nlohmann::json::parse(out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["request"]["reason"], raw);  // the value itself, as JSON carries it
  // approvals show: every field in full.
  ASSERT_EQ(run({"approvals", "show", std::to_string(id)}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "approvals show");
  EXPECT_NE(out.find("reason     \\x1b]0;pwned\\x07\\x1b[2J\\u202e\\u009b\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("key        DEPLOY\n"), std::string::npos) << out;
  ASSERT_EQ(run({"approvals", "show", std::to_string(id), "--json"}, std::nullopt, &out, &err), 0)
      << err;
  expect_no_terminal_controls(out, "approvals show --json");
  EXPECT_EQ(nlohmann::json::parse(out)["request"]["reason"], raw);
  // audit show: the jit.requested event carries the reason.
  ASSERT_EQ(run({"audit", "show"}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "audit show");
  EXPECT_NE(out.find("\\u001b]0;pwned\\u0007\\u001b[2J\\u202e\\u009b"), std::string::npos) << out;
  ASSERT_EQ(run({"audit", "show", "--json"}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "audit show --json");
  // run show: a command's argv is a sandbox user's text too.
  ASSERT_EQ(run_call(call("acme", "r2", {}, {"true", raw}), std::nullopt, &out, &err), 0) << err;
  ASSERT_EQ(run({"run", "show", "r2"}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "run show");
  EXPECT_NE(out.find("true \\x1b]0;pwned\\x07\\x1b[2J\\u202e\\u009b"), std::string::npos) << out;
  ASSERT_EQ(run({"run", "show", "r2", "--json"}, std::nullopt, &out, &err), 0) << err;
  expect_no_terminal_controls(out, "run show --json");
  ASSERT_EQ(run({"approvals", "deny", std::to_string(id), "--as", "alice", "--reason", "no"},
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(asker.wait(60s), 1) << asker.err();
}

// Attack: a sandbox asks, then its asker is killed (or times out), leaving
// an operator to answer for a process that is gone, and a broker thread
// waiting for the ask's timeout (10 minutes here). Stopped when the ask
// leaves the queue (expired, decided by "asker", the reason on record and
// in the audit trail: jit.denied by "asker", written by the thread as it
// ends) while the call that asked still runs, long before its timeout.
TEST_F(JitCli, AnAskWhoseAskerWasKilledLeavesTheQueue) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kLongAsk));
  start_jit_worker({"--sandbox-mode", "per_tool"});
  const std::string mark = "killed-asker-" + hex(random_secret()).substr(0, 16);
  // After the killed asker, a second ask keeps the call running (and says so).
  Cli asker(call("acme", "r1", {"--jit"},
                 {"sh", "-c",
                  "rf-cred get DEPLOY --reason " + mark +
                      "; echo asker-gone:$?; rf-cred get DEPLOY --reason second"}));
  const int64_t first = wait_for_approval();
  ASSERT_NE(first, 0) << asker.err();
  const pid_t pid = find_process("rf-cred", mark);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  auto s = open_store();
  store::WorkflowStore wf(*s);
  ASSERT_TRUE(wait_until([&] {
    auto a = wf.approval(first);
    return a.ok() && a->state != store::ApprovalState::pending;
  }));
  auto a = wf.approval(first);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->state, store::ApprovalState::expired);
  EXPECT_EQ(a->decided_by.value_or(""), "asker");
  EXPECT_NE(a->reason.value_or("").find("left before the answer, so approval " +
                                        std::to_string(first) + " was withdrawn"),
            std::string::npos)
      << a->reason.value_or("");
  // The call goes on: its second ask is the only one waiting.
  int64_t second = 0;
  ASSERT_TRUE(wait_until([&] {
    const auto ids = pending_ids();
    second = ids.size() == 1 && ids[0] != first ? ids[0] : 0;
    return second != 0;
  }));
  EXPECT_TRUE(asker.running());
  std::string out, err;
  EXPECT_EQ(run({"approvals", "approve", std::to_string(first), "--as", "alice"}, std::nullopt,
                &out, &err),
            1);
  EXPECT_NE(err.find("approval " + std::to_string(first) + " is expired already (by asker)"),
            std::string::npos)
      << err;
  // The thread that waited for it wrote its end.
  ASSERT_TRUE(wait_until([&] {
    for (const auto& e : audit_events("jit.denied")) {
      if (e["detail"]["approval"] == first) return true;
    }
    return false;
  }));
  for (const auto& e : audit_events("jit.denied")) {
    if (e["detail"]["approval"] != first) continue;
    EXPECT_EQ(e["detail"]["by"], "asker");
    EXPECT_EQ(e["detail"]["reason"], mark);
    EXPECT_NE(e["detail"]["why"].get<std::string>().find("left before the answer"),
              std::string::npos)
        << e.dump();
  }
  ASSERT_EQ(run({"approvals", "deny", std::to_string(second), "--as", "alice", "--reason", "no"},
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(asker.wait(60s), 1) << asker.err();
  EXPECT_EQ(asker.out(), "asker-gone:137\n");
  EXPECT_TRUE(audit_events("jit.delivered").empty());
}

// Attack: a sandbox floods the approval queue (and the worker with threads
// that wait) by asking many times at once. Stopped when at most 4 of one
// sandbox's requests wait for a human, the rest are refused at once with
// the reason and audited as denied (by "worker"), and another sandbox can
// still ask.
TEST_F(JitCli, PendingAsksOfOneSandboxAreBounded) {
  ASSERT_NO_FATAL_FAILURE(set_up_jit(kLongAsk));
  start_jit_worker({"--sandbox-mode", "per_tool"});
  Cli flood(
      call("acme", "r1", {"--jit"},
           {"sh", "-c",
            "for i in 1 2 3 4 5 6 7; do rf-cred get DEPLOY --reason ask$i 2>&1 & done; wait"}));
  const std::string says = "credential requests waiting for a human, the most allowed";
  auto refused = [&] {
    size_t n = 0;
    for (const auto& e : audit_events("jit.denied")) {
      if (e["detail"]["by"] == "worker" &&
          e["detail"]["why"].get<std::string>().find("has 4 " + says) != std::string::npos) {
        ++n;
      }
    }
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return pending_ids().size() >= 4 && refused() >= 3; }))
      << pending_ids().size() << " pending, " << refused() << " refused; " << flood.err();
  EXPECT_EQ(pending_ids().size(), 4u);
  EXPECT_EQ(refused(), 3u);
  // Per sandbox: another call's sandbox may still ask.
  Cli other(call("acme", "r2", {"--jit"}, {"rf-cred", "get", "DEPLOY", "--reason", "other"}));
  ASSERT_TRUE(wait_until([&] { return pending_ids().size() == 5; })) << other.err();
  std::string out, err;
  for (const int64_t id : pending_ids()) {
    ASSERT_EQ(run({"approvals", "deny", std::to_string(id), "--as", "alice", "--reason", "no"},
                  std::nullopt, &out, &err),
              0)
        << err;
  }
  EXPECT_EQ(flood.wait(60s), 0) << flood.err();
  EXPECT_EQ(other.wait(60s), 1) << other.err();
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(flood.out(), "rf-cred: refused: sandbox "), 3u) << flood.out();
  EXPECT_EQ(count(flood.out(), " has 4 " + says + "\n"), 3u) << flood.out();
  EXPECT_EQ(count(flood.out(), "was denied by alice: no\n"), 4u) << flood.out();
}

// A policy file that cannot be used stops the worker at start, naming FILE:LINE.
TEST_F(JitCli, ABadPolicyStopsTheWorkerNamingTheLine) {
  policy_ = dir_ + "/jit.yaml";
  std::ofstream(policy_) << "rules:\n  - secret: x\n    verdict: maybe\n";
  Cli worker({"worker", "start", "--state-dir", dir_, "--jit-policy", policy_});
  EXPECT_NE(worker.wait(30s), 0);
  EXPECT_NE(worker.err().find(policy_ + ":3: rule 1.verdict: \"maybe\" is not allow, deny or ask"),
            std::string::npos)
      << worker.err();
}

}  // namespace
}  // namespace rf::testing
