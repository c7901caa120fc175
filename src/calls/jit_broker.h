// JIT credentials (worker side, issue 13): answers `rf-cred get NAME` from
// inside a sandbox that runs JIT work (`ringfence call --jit`, a
// cli_agent_jit step). For each request, on a thread of its own:
//   1. audited (jit.requested): key, scope, reason, the asking pid;
//   2. the key is looked up in the call's identity cascade, as it stands now:
//      only entries delivered `jit` may be asked for; a revoked secret is
//      refused (fail closed);
//   3. the policy (identity/jit_policy.h) decides: allow, deny, or ask a
//      human through the approval queue (`ringfence approvals`), waiting up
//      to the rule's timeout, which then denies (jit.evaluated, then
//      jit.approved / jit.denied: by whom);
//   4. max_uses per run is taken in the store, in one transaction;
//   5. delivered (jit.delivered): recorded as an injection (hard revocation
//      ends the sandbox), added to the running call's redaction and to the
//      sandbox's, set into the sandbox's environment for later execs
//      (set_env), and only then sent to the asker.
// A grant with a TTL, or whose secret is revoked (soft), is taken out of the
// sandbox's environment again within the watch period (jit.withdrawn).
// Nothing here ever logs, stores or audits a value.
//
// A sandbox is hostile until shown otherwise, so what it can make the worker
// hold is bounded: at most kMaxAsking of its requests wait for a human at
// once and at most kMaxServing are served at once (a thread each); more are
// refused at once (jit.denied, by "worker"). An asker that leaves before its
// answer (killed, timed out: the runner says cred_withdrawn) takes its ask
// out of the approval queue (expired, decided by "asker"; jit.denied, by
// "asker") within a poll of the store, and its thread ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "calls/identity_calls.h"
#include "calls/redacting_sink.h"
#include "identity/jit_policy.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

namespace rf::calls {

// Who runs in the sandbox that may ask: the policy matches on these.
struct JitContext {
  IdentityUse use;  // project, run, identity scope, the call
  std::string step, agent;
  std::shared_ptr<Sandbox> sandbox;
  RedactingSink* sink = nullptr;  // the running call's output: redacted of each grant
};

class JitBroker {
 public:
  // Per sandbox: its requests waiting for a human at once, and being served.
  static constexpr size_t kMaxAsking = 4;
  static constexpr size_t kMaxServing = 8;

  struct Options {
    std::shared_ptr<const identity::JitPolicy> policy;  // null: every request is denied
    std::chrono::milliseconds watch_period{200};
  };
  JitBroker(store::Store& store, IdentityCalls& identity, Options options);
  // Refuses whatever waits, then joins every thread.
  ~JitBroker();
  JitBroker(const JitBroker&) = delete;
  JitBroker& operator=(const JitBroker&) = delete;

  // The sandbox takes requests for `ctx` until close(). Refused when the
  // sandbox cannot take requests (its runner has no credential socket).
  Status open(const JitContext& ctx);
  // Requests from here on are refused; those waiting (for a human) are
  // refused now; returns once none of them touches the call any more.
  void close(const std::string& sandbox_id);

  // Puts /.ringfence/bin (rf-cred) at the end of the PATH `call` will run with
  // in `sandbox`: its own PATH, else the spec's, else the base environment's.
  static void put_rf_cred_on_path(ExecCall& call, const Sandbox& sandbox);

 private:
  struct Session;
  struct Grant;
  // A request refused before it had a thread: answered by the watcher, as
  // the runner's reader (where it arrived) must not wait on the runner.
  struct Refusal {
    std::shared_ptr<Session> session;
    proto::CredRequest req;
    std::string why;
  };
  // On the runner's reader thread, under its lock: these only queue.
  void enqueue(const std::shared_ptr<Session>& session, const proto::CredRequest& req);
  void withdraw(const std::shared_ptr<Session>& session, const proto::CredWithdrawn& w);
  void serve(const std::shared_ptr<Session>& session, const proto::CredRequest& req);
  // The end of request `request`'s thread: its slot is free, the thread joinable.
  void served(Session& s, uint32_t request);
  // Whether the asker of `request` has left (the runner said so).
  bool asker_left(const Session& s, uint32_t request);
  // Takes one of the sandbox's kMaxAsking places in the approval queue.
  bool take_ask_slot(Session& s);
  void release_ask_slot(Session& s);
  // Step 3 for an `ask` rule: waits for a human. Empty: approved (by whom in *by).
  std::optional<std::string> ask_human(const Session& s, const proto::CredRequest& req,
                                       const identity::JitRule& rule, const std::string& secret,
                                       std::string* by, int64_t* approval_id);
  void send_refusal(const Refusal& r);
  void watch_loop();
  void withdraw_due();

  store::Store& store_;
  IdentityCalls& identity_;
  Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // by sandbox id
  std::map<std::string, std::vector<Grant>> grants_;          // by sandbox id
  std::vector<Refusal> refusals_;                             // for the watcher to send
  std::thread watcher_;
};

}  // namespace rf::calls
