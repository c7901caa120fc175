// The store's side of a fleet (issue 16), on both engines (ctest
// store_suites_on_postgres): calls and workflow runs routed by labels, work no
// live worker may take failed naming what each lacks, fencing tokens that
// refuse a process whose worker id was registered again, and the fleet view.
// Also the labels' own rules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/labels.h"
#include "store/labels.h"
#include "store/store.h"
#include "store/workflow_store.h"
#include "support/store_fixture.h"

namespace rf::store {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

class StoreFleet : public rf::testing::StoreFixture {
 protected:
  StoreFleet() : StoreFixture("rf-fleet") {}

  static void add_worker(Store& s, const std::string& id, const Labels& labels,
                         const std::optional<std::string>& project = std::nullopt) {
    auto r = s.register_worker(id, 100, "vm", project, WorkerSite{"host-" + id, labels});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  static int64_t enqueue(Store& s, const Labels& requires_labels, const std::string& run = "r1") {
    NewCall c;
    c.project = "p";
    c.run = run;
    c.argv = {"echo", "hi"};
    c.requires_labels = requires_labels;
    auto id = s.enqueue_call(c);
    EXPECT_TRUE(id.ok()) << id.error().to_string();
    return id.ok() ? *id : 0;
  }
  static std::optional<int64_t> claim(Store& s, const std::string& worker, const Labels& labels) {
    ClaimFilter f;
    f.labels = labels;
    auto c = s.claim_next(worker, milliseconds(5000), f);
    EXPECT_TRUE(c.ok()) << c.error().to_string();
    if (!c.ok() || !*c) return std::nullopt;
    return (**c).id;
  }

  // A workflow run of project p, queued.
  static void enqueue_run(WorkflowStore& wf, const std::string& id) {
    NewWorkflowRun run;
    run.run_id = id;
    run.project = "p";
    run.workflow = "w";
    run.file = "w.yaml";
    run.definition = "name: w";
    auto queued = wf.enqueue_run(run);
    ASSERT_TRUE(queued.ok()) << queued.error().to_string();
  }
};

TEST_F(StoreFleet, OnlyAWorkerWithEveryRequiredLabelClaimsTheCall) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  const Labels a = {{"zone", "a"}}, b = {{"gpu", "true"}, {"zone", "b"}};
  add_worker(*s, "wa", a);
  add_worker(*s, "wb", b);
  const int64_t needs_b = enqueue(*s, {{"zone", "b"}});
  const int64_t needs_gpu_a = enqueue(*s, {{"gpu", "true"}, {"zone", "a"}});
  const int64_t any = enqueue(*s, {});
  // wa skips the two it cannot take and gets the one that needs nothing.
  EXPECT_EQ(claim(*s, "wa", a), any);
  EXPECT_EQ(claim(*s, "wa", a), std::nullopt);
  EXPECT_EQ(claim(*s, "wb", b), needs_b);
  EXPECT_EQ(claim(*s, "wb", b), std::nullopt);  // gpu=true but zone=b, not a
  auto v = s->call(needs_gpu_a);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, CallState::queued);
  EXPECT_EQ(v->requires_labels, (Labels{{"gpu", "true"}, {"zone", "a"}}));
  // claim_running (the worker's batch claim) filters the same way.
  auto batch = s->claim_running("wa", milliseconds(5000), 8, ClaimFilter{std::nullopt, a});
  ASSERT_TRUE(batch.ok()) << batch.error().to_string();
  EXPECT_TRUE(batch->empty());
  batch = s->claim_running("wa", milliseconds(5000), 8,
                           ClaimFilter{std::nullopt, {{"gpu", "true"}, {"zone", "a"}}});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 1u);
  EXPECT_EQ(batch->at(0).id, needs_gpu_a);
  EXPECT_EQ(batch->at(0).call.requires_labels, (Labels{{"gpu", "true"}, {"zone", "a"}}));
}

TEST_F(StoreFleet, BadRequiredLabelsAreRefusedWritingNothing) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  NewCall c;
  c.project = "p";
  c.run = "r1";
  c.argv = {"true"};
  c.requires_labels = {{"zone", "b c"}};
  auto id = s->enqueue_call(c);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().to_string(),
            "enqueue call in run r1: required labels: label zone: the label value \"b c\" may "
            "hold only letters, digits and ._-");
  EXPECT_FALSE(s->run("r1").ok());  // not even its run was made
  auto w = s->register_worker("w", 1, "vm", std::nullopt, WorkerSite{"", {{"-x", "1"}}});
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.error().to_string(), HasSubstr("must start with a letter or a digit"));
}

TEST_F(StoreFleet, ACallNoLiveWorkerMayTakeFailsNamingWhatEachLacks) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "wa", {{"zone", "a"}});
  add_worker(*s, "wgpu", {{"gpu", "true"}, {"zone", "a"}});
  add_worker(*s, "wq", {{"zone", "b"}}, "q");  // serves only project q: not asked
  const int64_t id = enqueue(*s, {{"zone", "b"}});
  const int64_t fine = enqueue(*s, {{"gpu", "true"}});
  // Not before its time.
  auto n = s->fail_unmatched_calls(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 0);
  clock_ += 6000;
  n = s->fail_unmatched_calls(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 1);
  auto v = s->call(id);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, CallState::failed);
  EXPECT_EQ(v->error,
            "no live worker has the labels this call requires (zone=b): worker wa (host host-wa) "
            "has zone=a (not zone=b); worker wgpu (host host-wgpu) has zone=a (not zone=b)");
  EXPECT_EQ(s->call(fine)->state, CallState::queued);  // wgpu may take it
  // A worker that stopped heartbeating is not live: the gpu call fails too.
  clock_ += 20'000;
  ASSERT_TRUE(s->heartbeat("wa", milliseconds(5000)).ok());
  n = s->fail_unmatched_calls(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(s->call(fine)->error,
            "no live worker has the labels this call requires (gpu=true): worker wa (host "
            "host-wa) lacks gpu=true");
}

TEST_F(StoreFleet, ACallOfAProjectNoLiveWorkerServesWaitsForOne) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "wq", {{"zone", "a"}}, "q");
  const int64_t id = enqueue(*s, {{"zone", "b"}});
  clock_ += 60'000;
  ASSERT_TRUE(s->heartbeat("wq", milliseconds(5000)).ok());
  auto n = s->fail_unmatched_calls(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(s->call(id)->state, CallState::queued);
}

TEST_F(StoreFleet, AProcessWhoseWorkerIdWasRegisteredAgainIsFenced) {
  auto old_process = open();
  ASSERT_TRUE(old_process->ensure_project("p", Environment::development).ok());
  add_worker(*old_process, "w1", {});
  const int64_t first = enqueue(*old_process, {});
  ASSERT_EQ(claim(*old_process, "w1", {}), first);
  // The same id registered again by another process (a restart on another
  // host while the first was partitioned): epoch 2.
  auto new_process = open();
  add_worker(*new_process, "w1", {});
  auto rows = new_process->workers();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->at(0).epoch, 2);
  const int64_t second = enqueue(*new_process, {});
  ASSERT_EQ(claim(*new_process, "w1", {}), second);
  // The old process writes nothing: not to its own call, not to the new one's,
  // and it neither claims nor heartbeats.
  auto finished = old_process->finish_call(first, "w1", 0, "{}");
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.error().to_string(),
            "finish call " + std::to_string(first) +
                ": worker w1 was registered again (epoch 2) since this process registered it "
                "(epoch 1): fenced, another process serves as w1 now");
  EXPECT_FALSE(old_process->append_output(second, "w1", Stream::out, "x").ok());
  auto over = old_process->finish_call(second, "w1", 0, "{}");
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.error().to_string(), HasSubstr("fenced"));
  enqueue(*new_process, {});
  auto claimed = old_process->claim_next("w1", milliseconds(5000));
  ASSERT_FALSE(claimed.ok());
  EXPECT_THAT(claimed.error().to_string(), HasSubstr("registered again (epoch 2)"));
  auto beat = old_process->heartbeat("w1", milliseconds(5000));
  ASSERT_FALSE(beat.ok());
  EXPECT_THAT(beat.error().to_string(), HasSubstr("fenced"));
  // The new process may not write over the old one's claim either: it was
  // claimed under epoch 1.
  auto stale = new_process->finish_call(first, "w1", 0, "{}");
  ASSERT_FALSE(stale.ok());
  EXPECT_THAT(stale.error().to_string(),
              HasSubstr("it was claimed under epoch 1 of the worker, and the writer holds epoch 2 "
                        "(fenced)"));
  // Its own call it finishes.
  auto done = new_process->finish_call(second, "w1", 0, "{}");
  ASSERT_TRUE(done.ok()) << done.error().to_string();
  EXPECT_EQ(new_process->call(second)->state, CallState::done);
  // A process that registered nothing (a client, `sandbox reap`) is checked
  // against the current epoch.
  auto third_party = open();
  EXPECT_THAT(third_party->finish_call(first, "w1", 0, "{}").error().to_string(),
              HasSubstr("(fenced)"));
}

// The same for a workflow run: once the worker id is registered again and
// the new process holds the run, the old one writes no step and cannot end
// the run, though the run's worker id is its own.
TEST_F(StoreFleet, AWorkflowRunsOldProcessIsFencedOnceItsWorkerIdIsRegisteredAgain) {
  auto old_process = open();
  ASSERT_TRUE(old_process->ensure_project("p", Environment::development).ok());
  add_worker(*old_process, "w1", {});
  WorkflowStore old_runs(*old_process);
  enqueue_run(old_runs, "wf-1");
  auto held = old_runs.claim_run("w1", milliseconds(60'000));
  ASSERT_TRUE(held.ok() && *held) << (held.ok() ? "none" : held.error().to_string());
  auto new_process = open();
  add_worker(*new_process, "w1", {});
  WorkflowStore new_runs(*new_process);
  auto requeued = new_runs.requeue_runs_of_worker("w1", "w1 restarted");
  ASSERT_TRUE(requeued.ok()) << requeued.error().to_string();
  EXPECT_EQ(*requeued, 1);
  auto again = new_runs.claim_run("w1", milliseconds(60'000));
  ASSERT_TRUE(again.ok() && *again);
  AttemptRow step;
  step.run_id = "wf-1";
  step.step_id = "build";
  step.mode = "sandboxed";
  step.worker_id = "w1";
  auto late = old_runs.start_attempt(step);
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.error().to_string(),
              HasSubstr("worker w1 was registered again (epoch 2) since this process registered "
                        "it (epoch 1): fenced"));
  auto ended = old_runs.finish_run("wf-1", "w1", WorkflowRunState::failed, "late");
  ASSERT_FALSE(ended.ok());
  EXPECT_THAT(ended.error().to_string(), HasSubstr("fenced"));
  ASSERT_TRUE(new_runs.start_attempt(step).ok());
  auto done = new_runs.finish_run("wf-1", "w1", WorkflowRunState::succeeded, std::nullopt);
  ASSERT_TRUE(done.ok()) << done.error().to_string();
  EXPECT_EQ(new_runs.run("wf-1")->state, WorkflowRunState::succeeded);
}

TEST_F(StoreFleet, AnExpiredLeaseIsNotRenewedByALateHeartbeatOfTheOldProcess) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "w1", {});
  const int64_t id = enqueue(*s, {});
  ASSERT_EQ(claim(*s, "w1", {}), id);
  clock_ += 6000;  // the lease (5 s) ran out: the sweep interrupts it
  auto swept = s->interrupt_orphaned_calls(clock_);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 1);
  ASSERT_TRUE(s->heartbeat("w1", milliseconds(5000)).ok());
  auto late = s->finish_call(id, "w1", 0, "{}");
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.error().to_string(), HasSubstr("(lease lost): it is interrupted"));
  EXPECT_EQ(s->call(id)->state, CallState::interrupted);
}

TEST_F(StoreFleet, TheFleetViewCountsEachWorkersCallsAndSandboxesPerProject) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  ASSERT_TRUE(s->ensure_project("q", Environment::development).ok());
  add_worker(*s, "w1", {{"zone", "a"}});
  add_worker(*s, "w2", {}, "q");
  add_worker(*s, "w3", {});
  ASSERT_TRUE(s->stop_worker("w3").ok());
  enqueue(*s, {});
  ASSERT_TRUE(claim(*s, "w1", {}).has_value());
  ASSERT_TRUE(s->record_sandbox(SandboxRow{"sb1", "native", "p", "r1", "per_run", "w1"}).ok());
  ASSERT_TRUE(s->record_sandbox(SandboxRow{"sb2", "native", "q", "rq", "per_run", "w1"}).ok());
  auto all = s->fleet();
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->at(0).worker.id, "w1");  // running first, then by id
  EXPECT_EQ(all->at(0).worker.host_id, "host-w1");
  EXPECT_EQ(all->at(0).worker.labels, (Labels{{"zone", "a"}}));
  EXPECT_EQ(all->at(0).held_calls, 1);
  EXPECT_EQ(all->at(0).live_sandboxes, 2);
  EXPECT_EQ(all->at(1).worker.id, "w2");
  EXPECT_EQ(all->at(2).worker.id, "w3");
  EXPECT_EQ(all->at(2).worker.state, WorkerState::stopped);
  // Project q sees the workers that may serve it, and only its own load.
  auto q = s->fleet("q");
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ(q->at(0).held_calls, 0);
  EXPECT_EQ(q->at(0).live_sandboxes, 1);
  // Project p does not see w2, pinned to q.
  auto p = s->fleet("p");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ(p->at(0).worker.id, "w1");
  EXPECT_EQ(p->at(1).worker.id, "w3");
}

TEST_F(StoreFleet, AWorkflowRunHandedOffIsClaimedOnlyByAWorkerWithTheLabels) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "wa", {{"zone", "a"}});
  add_worker(*s, "wgpu", {{"gpu", "true"}});
  WorkflowStore wf(*s);
  enqueue_run(wf, "wr-1");
  auto claimed = wf.claim_run("wa", milliseconds(5000), {{"zone", "a"}});
  ASSERT_TRUE(claimed.ok() && *claimed) << (claimed.ok() ? "none" : claimed.error().to_string());
  // Another worker cannot hand off what it does not hold.
  auto not_held = wf.hand_off_run("wr-1", "wgpu", {{"gpu", "true"}}, "why");
  ASSERT_FALSE(not_held.ok());
  EXPECT_THAT(not_held.error().to_string(), HasSubstr("worker wa holds it"));
  ASSERT_TRUE(wf.hand_off_run("wr-1", "wa", {{"gpu", "true"}}, "worker wa lacks gpu=true").ok());
  EXPECT_EQ(wf.run("wr-1")->state, WorkflowRunState::queued);
  auto again = wf.claim_run("wa", milliseconds(5000), {{"zone", "a"}});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  auto gpu = wf.claim_run("wgpu", milliseconds(5000), {{"gpu", "true"}});
  ASSERT_TRUE(gpu.ok() && *gpu);
  EXPECT_EQ((**gpu).run_id, "wr-1");
  EXPECT_EQ((**gpu).claims, 2);
  auto events = s->events(EventFilter{"wr-1"});
  ASSERT_TRUE(events.ok());
  bool handoff = false;
  for (const auto& e : *events) handoff = handoff || e.kind == "run.handoff";
  EXPECT_TRUE(handoff);
}

TEST_F(StoreFleet, AWorkflowRunNoLiveWorkerMayTakeFails) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "wa", {{"zone", "a"}});
  WorkflowStore wf(*s);
  enqueue_run(wf, "wr-2");
  ASSERT_TRUE(wf.claim_run("wa", milliseconds(5000), {{"zone", "a"}}).ok());
  ASSERT_TRUE(wf.hand_off_run("wr-2", "wa", {{"gpu", "true"}}, "worker wa lacks gpu=true").ok());
  auto n = wf.fail_unmatched_runs(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 0);  // not yet
  clock_ += 6000;
  n = wf.fail_unmatched_runs(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 1);
  auto r = wf.run("wr-2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, WorkflowRunState::failed);
  EXPECT_EQ(r->error,
            "no live worker has the labels this run's next step requires (gpu=true): "
            "worker wa (host host-wa) lacks gpu=true");
  EXPECT_EQ(s->run("wr-2")->state, RunState::ended);
}

// Issue 40: "lacks gpu=false" was said of a worker that has gpu=true.
TEST(Labels, WhatAWorkerLacksIsSaidTruthfully) {
  EXPECT_EQ(lacking_text({{"gpu", "false"}}, {{"gpu", "true"}}), "has gpu=true (not gpu=false)");
  EXPECT_EQ(lacking_text({{"gpu", "true"}, {"zone", "c"}}, {{"zone", "a"}}),
            "lacks gpu=true, has zone=a (not zone=c)");
  EXPECT_EQ(lacking_text({{"a", "1"}, {"b", "2"}}, {}), "lacks a=1 b=2");
  EXPECT_EQ(lacking_text({{"a", "1"}}, {{"a", "1"}, {"b", "2"}}), "");
}

TEST(Labels, TextAndJsonFormsAreCheckedAndNameWhatIsWrong) {
  auto ok = parse_label("zone=eu-1");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "zone");
  EXPECT_EQ(ok->second, "eu-1");
  EXPECT_EQ(parse_label("zone").error().to_string(),
            "expected KEY=VALUE such as zone=eu, got \"zone\"");
  EXPECT_EQ(parse_label("=x").error().to_string(), "the label's key is empty");
  EXPECT_EQ(parse_label("zone=").error().to_string(), "label zone: the label's value is empty");
  EXPECT_EQ(parse_label("k8s.io/arch=amd64").ok(), true);
  EXPECT_EQ(parse_label("a=b=c").error().to_string(),
            "label a: the label value \"b=c\" may hold only letters, digits and ._-");
  EXPECT_THAT(parse_label(std::string(64, 'k') + "=v").error().to_string(),
              HasSubstr("longer than 63 characters"));
  EXPECT_EQ(labels_json({{"b", "2"}, {"a", "1"}}), R"({"a":"1","b":"2"})");
  EXPECT_EQ(labels_json({}), "{}");
  EXPECT_EQ(labels_from_json(R"({"gpu": true})").error().to_string(),
            "label gpu: the value must be a string (such as \"true\"), not boolean");
  EXPECT_EQ(labels_from_json("[1]").error().to_string(), "labels must be a JSON object of strings");
  EXPECT_EQ(labels_text({{"gpu", "true"}, {"zone", "b"}}), "gpu=true zone=b");
  EXPECT_EQ(labels_text({}), "(none)");
  EXPECT_EQ(missing_labels({{"gpu", "true"}, {"zone", "b"}}, {{"zone", "b"}, {"x", "y"}}),
            (Labels{{"gpu", "true"}}));
  EXPECT_TRUE(labels_match({}, {{"zone", "a"}}));
  EXPECT_FALSE(labels_match({{"zone", "a"}}, {{"zone", "b"}}));
  Labels many;
  for (int i = 0; i < 33; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_EQ(check_labels(many).error().to_string(), "33 labels: at most 32 are allowed");
}

}  // namespace
}  // namespace rf::store

namespace rf::store {
namespace {

// `fleet cordon | drain | uncordon` (issue 40): the store refuses a cordoned
// or draining worker every claim, whatever its build does.
TEST_F(StoreFleet, ACordonedWorkerClaimsNothingUntilUncordoned) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "w1", {});
  const int64_t id = enqueue(*s, {});
  auto cordoned = s->set_worker_admin("w1", WorkerAdmin::cordoned);
  ASSERT_TRUE(cordoned.ok()) << cordoned.error().to_string();
  EXPECT_EQ(*cordoned, std::vector<std::string>{"w1"});
  EXPECT_EQ(claim(*s, "w1", {}), std::nullopt);
  auto batch = s->claim_running("w1", milliseconds(5000), 8, ClaimFilter{});
  ASSERT_TRUE(batch.ok()) << batch.error().to_string();
  EXPECT_TRUE(batch->empty());
  WorkflowStore wf(*s);
  enqueue_run(wf, "wr1");
  auto run = wf.claim_run("w1", milliseconds(5000), {});
  ASSERT_TRUE(run.ok()) << run.error().to_string();
  EXPECT_FALSE(*run);
  // Its heartbeat tells the worker, and keeps it live.
  auto beat = s->heartbeat("w1", milliseconds(5000));
  ASSERT_TRUE(beat.ok()) << beat.error().to_string();
  EXPECT_EQ(*beat, WorkerAdmin::cordoned);
  EXPECT_EQ(s->worker("w1")->value().admin, WorkerAdmin::cordoned);

  ASSERT_TRUE(s->set_worker_admin("w1", WorkerAdmin::none).ok());
  EXPECT_EQ(*s->heartbeat("w1", milliseconds(5000)), WorkerAdmin::none);
  EXPECT_EQ(claim(*s, "w1", {}), id);
  run = wf.claim_run("w1", milliseconds(5000), {});
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(*run);
  EXPECT_EQ((**run).run_id, "wr1");
}

TEST_F(StoreFleet, AHostIdCordonsEveryWorkerOfItsHostAndAnUnknownNameIsAnError) {
  auto s = open();
  for (const char* id : {"a1", "a2", "b1"}) {
    auto r = s->register_worker(id, 100, "vm", std::nullopt,
                                WorkerSite{id[0] == 'a' ? "host-a" : "host-b", {}});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  auto changed = s->set_worker_admin("host-a", WorkerAdmin::cordoned);
  ASSERT_TRUE(changed.ok()) << changed.error().to_string();
  EXPECT_EQ(*changed, (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(s->worker("b1")->value().admin, WorkerAdmin::none);
  auto unknown = s->set_worker_admin("host-z", WorkerAdmin::draining);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().to_string(),
            "drain host-z: no worker or host is named host-z (`ringfence fleet status --all` "
            "lists them)");
  // A stopped worker does not drain (there is no process to exit).
  ASSERT_TRUE(s->stop_worker("b1").ok());
  auto stopped = s->set_worker_admin("b1", WorkerAdmin::draining);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().to_string(), "drain b1: worker b1 is not running");
}

TEST_F(StoreFleet, ADrainEndsWithItsProcessWhileACordonOutlivesIt) {
  auto s = open();
  auto site = WorkerSite{"h", {}, "1.2.3"};
  ASSERT_TRUE(s->register_worker("w1", 100, "vm", std::nullopt, site).ok());
  ASSERT_TRUE(s->register_worker("w2", 101, "vm", std::nullopt, site).ok());
  EXPECT_EQ(s->worker("w1")->value().version, "1.2.3");
  ASSERT_TRUE(s->set_worker_admin("w1", WorkerAdmin::draining).ok());
  ASSERT_TRUE(s->set_worker_admin("w2", WorkerAdmin::cordoned).ok());
  // Both restart (the upgrade a drain makes way for), on a newer build.
  site.version = "1.2.4";
  ASSERT_TRUE(s->register_worker("w1", 200, "vm", std::nullopt, site).ok());
  ASSERT_TRUE(s->register_worker("w2", 201, "vm", std::nullopt, site).ok());
  EXPECT_EQ(s->worker("w1")->value().admin, WorkerAdmin::none);
  EXPECT_EQ(s->worker("w1")->value().version, "1.2.4");
  EXPECT_EQ(s->worker("w2")->value().admin, WorkerAdmin::cordoned);
}

// A call requiring labels no live worker takes waits for a worker as long as
// its client does (`call --wait-timeout`), then fails; a cordoned worker with
// the labels is named so.
TEST_F(StoreFleet, ALabelledCallWaitsItsWaitTimeoutForAWorkerAndACordonIsNamed) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::development).ok());
  add_worker(*s, "wa", {{"zone", "a"}});
  add_worker(*s, "wb", {{"zone", "b"}});
  ASSERT_TRUE(s->set_worker_admin("wb", WorkerAdmin::cordoned).ok());
  NewCall c;
  c.project = "p";
  c.run = "r1";
  c.argv = {"true"};
  c.requires_labels = {{"zone", "b"}};
  c.wait_for_worker = milliseconds(60'000);
  auto waits = s->enqueue_call(c);
  ASSERT_TRUE(waits.ok()) << waits.error().to_string();
  c.wait_for_worker.reset();
  c.run = "r2";
  auto plain = s->enqueue_call(c);
  ASSERT_TRUE(plain.ok());
  clock_ += 6000;
  auto n = s->fail_unmatched_calls(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(s->call(*waits)->state, CallState::queued);
  EXPECT_EQ(s->call(*plain)->error,
            "no live worker has the labels this call requires (zone=b): worker wa (host "
            "host-wa) has zone=a (not zone=b); worker wb (host host-wb) has them but is cordoned "
            "(`ringfence fleet uncordon wb`)");
  clock_ += 55'000;
  ASSERT_TRUE(s->heartbeat("wa", milliseconds(5000)).ok());
  ASSERT_TRUE(s->heartbeat("wb", milliseconds(5000)).ok());
  n = s->fail_unmatched_calls(clock_ - 5000, clock_ - 10'000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(s->call(*waits)->state, CallState::failed);
}

}  // namespace
}  // namespace rf::store
