// Issue 15 as a new user meets it: `sandbox exec --receipt`, `audit verify
// --receipt --key`, and the checks that need none of our code: openssl
// verifies every signature over the DSSE pre-authentication encoding and the
// checkpoint's text, and tests/proof/check_receipt.py (hashlib) walks each
// inclusion proof to the checkpoint's root.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/base64.h"
#include "integration/harness.h"
#include "proof/checkpoint.h"
#include "proof/digest.h"
#include "proof/merkle.h"
#include "proof/signing_key.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/serve_process.h"
#include "support/sha256_hex.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;

class ProofCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "real sandboxes need root";
    char tmpl[] = "/tmp/rf-proof-cli-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `sandbox exec --receipt` into dir_/name.
  CliRun exec(const std::string& name, std::vector<std::string> extra,
              const std::vector<std::string>& command) {
    std::vector<std::string> args = {"sandbox", "exec",      "--state-dir",
                                     dir_,      "--receipt", dir_ + "/" + name};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return run_cli(args);
  }
  CliRun verify(const std::string& receipt, const std::string& key = "") {
    return run_cli({"audit", "verify", "--receipt", receipt, "--key",
                    key.empty() ? dir_ + "/keys/proof.pub" : key});
  }
  std::string dir_;
};

TEST_F(ProofCli, EveryBoundHeldAndTheReceiptVerifiesOfflineAndByOpenssl) {
  const auto ran = exec("r.json", {}, {"sh", "-c", "echo hi; echo oops >&2"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "hi\n");
  const auto v = verify(dir_ + "/r.json");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("every bound held (24 of 24)"), std::string::npos) << v.out;

  // The receipt's digests are of the bytes as delivered.
  const json bundle = json::parse(slurp(dir_ + "/r.json"));
  const json receipt = json::parse(*base64_decode(bundle["receipt"]["payload"].get<std::string>()));
  EXPECT_EQ(receipt["predicate"]["stdout"]["sha256"], sha256_hex("hi\n"));
  EXPECT_EQ(receipt["predicate"]["stderr"]["sha256"], sha256_hex("oops\n"));
  EXPECT_EQ(receipt["predicate"]["exit"]["code"], 0);

  // The namespaces and maps were read by the host from the sandbox's PID 1
  // too, not only printed by the self-probe inside.
  const json report = json::parse(*base64_decode(bundle["report"]["payload"].get<std::string>()));
  int read_from_pid1 = 0;
  for (const auto& b : report["predicate"]["bounds"]) {
    const std::string name = b["bound"];
    if (name.rfind("namespace.", 0) == 0) {
      ASSERT_TRUE(b["evidence"].contains("pid1")) << b.dump();
      EXPECT_NE(b["evidence"]["pid1"], b["evidence"]["host"]) << b.dump();
      ++read_from_pid1;
    }
    if (name == "uid") {
      EXPECT_EQ(b["evidence"]["maps_read_by"], "host") << b.dump();
    }
  }
  EXPECT_EQ(read_from_pid1, 7);

  // Independently: hashlib for the log, openssl for every signature.
  const auto [py, py_rc] =
      run_capture("python3 " RF_PROOF_CHECK_PY " " + dir_ + "/r.json " + dir_ + " 2>&1");
  ASSERT_EQ(py_rc, 0) << py;
  EXPECT_NE(py.find("\"ok\": true"), std::string::npos) << py;
  for (const std::string what : {"receipt", "report", "checkpoint"}) {
    const std::string in = dir_ + "/" + what + (what == "checkpoint" ? ".txt" : ".pae");
    const auto [out, rc] = run_capture("openssl pkeyutl -verify -pubin -inkey " + dir_ +
                                       "/keys/proof.pub -rawin -in " + in + " -sigfile " + dir_ +
                                       "/" + what + ".sig 2>&1");
    EXPECT_EQ(rc, 0) << what << ": " << out;
    EXPECT_NE(out.find("Signature Verified Successfully"), std::string::npos) << out;
  }
  // ... and openssl refuses a changed byte, so the check above can fail.
  std::string pae = slurp(dir_ + "/receipt.pae");
  pae[pae.size() / 2] ^= 1;
  { std::ofstream(dir_ + "/receipt.pae", std::ios::binary | std::ios::trunc) << pae; }
  const auto [bad, bad_rc] =
      run_capture("openssl pkeyutl -verify -pubin -inkey " + dir_ + "/keys/proof.pub -rawin -in " +
                  dir_ + "/receipt.pae -sigfile " + dir_ + "/receipt.sig 2>&1");
  EXPECT_NE(bad_rc, 0) << bad;
}

TEST_F(ProofCli, OneByteEditedAnywhereFailsAndNamesIt) {
  ASSERT_EQ(exec("r.json", {}, {"echo", "hi"}).exit_code, 0);
  const std::string original = slurp(dir_ + "/r.json");
  const json bundle = json::parse(original);
  struct Edit {
    std::string what, expect;
    std::function<void(json&)> apply;
  };
  auto payload_edit = [](const char* which, const std::string& from, const std::string& to) {
    return [=](json& b) {
      std::string p = *base64_decode(b[which]["payload"].get<std::string>());
      const auto at = p.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      p.replace(at, from.size(), to);
      b[which]["payload"] = base64_encode(p);
    };
  };
  const std::vector<Edit> edits = {
      {"the receipt's exit code", "receipt: the signature does not match",
       payload_edit("receipt", "\"code\":0", "\"code\":1")},
      {"a bound of the report", "report: the signature does not match",
       payload_edit("report", "\"status\":\"held\"", "\"status\":\"hald\"")},
      {"the checkpoint's size", "log checkpoint",
       [](json& b) {
         std::string n = b["log"]["checkpoint"];
         n[n.find('\n') + 1] += 1;
         b["log"]["checkpoint"] = n;
       }},
      {"the receipt's log event", "its hash does not match its fields",
       [](json& b) { b["log"]["receipt_entry"]["event"]["actor"] = "clj"; }},
      {"an inclusion hash", "checkpoint's root",
       [](json& b) {
         auto& inc = b["log"]["report_entry"]["inclusion"];
         if (inc.empty()) {
           b["log"]["report_entry"]["index"] = 1;
           return;
         }
         std::string h = inc[0];
         h[0] = h[0] == '0' ? '1' : '0';
         inc[0] = h;
       }},
  };
  for (const auto& e : edits) {
    json b = bundle;
    e.apply(b);
    { std::ofstream(dir_ + "/edited.json", std::ios::trunc) << b.dump(2); }
    const auto v = verify(dir_ + "/edited.json");
    EXPECT_EQ(v.exit_code, 1) << e.what << ": " << v.out << v.err;
    EXPECT_NE(v.out.find("receipt NOT verified"), std::string::npos) << e.what << ": " << v.out;
    EXPECT_NE(v.out.find(e.expect), std::string::npos) << e.what << ": " << v.out;
  }
  // A single raw byte of the file: no longer a receipt, or no longer verifies.
  std::string raw = original;
  raw[raw.find("\"payload\"") + 14] ^= 1;
  { std::ofstream(dir_ + "/edited.json", std::ios::trunc) << raw; }
  EXPECT_EQ(verify(dir_ + "/edited.json").exit_code, 1);
}

TEST_F(ProofCli, AnotherKeyDoesNotVerifyAndRotationKeepsTheOldPublicKey) {
  ASSERT_EQ(exec("r.json", {}, {"true"}).exit_code, 0);
  const std::string old_pub = slurp(dir_ + "/keys/proof.pub");
  const auto rotated = run_cli({"keys", "rotate", "--state-dir", dir_});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  EXPECT_NE(rotated.out, old_pub);
  const auto v = verify(dir_ + "/r.json");
  EXPECT_EQ(v.exit_code, 1) << v.out;
  EXPECT_NE(v.out.find("signed by another key"), std::string::npos) << v.out;
  // The retired key still verifies what it signed.
  std::string retired;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/keys/retired"))
    retired = e.path();
  ASSERT_FALSE(retired.empty());
  EXPECT_EQ(slurp(retired), old_pub);
  EXPECT_EQ(verify(dir_ + "/r.json", retired).exit_code, 0);
}

TEST_F(ProofCli, TheStateDirGivenBeforeTheCommandIsEveryCommands) {
  const auto ran = run_cli(
      {"--state-dir", dir_, "sandbox", "exec", "--receipt", dir_ + "/r.json", "--", "true"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/keys/proof.pub"));
  const auto shown = run_cli({"--state-dir", dir_, "keys", "show"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out, slurp(dir_ + "/keys/proof.pub"));
  const auto v = run_cli({"--state-dir", dir_, "audit", "verify", "--receipt", dir_ + "/r.json"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // The command's own option wins over the program's.
  const std::string other = dir_ + "/other";
  ASSERT_EQ(run_cli({"--state-dir", dir_, "keys", "show", "--state-dir", other}).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(other + "/keys/proof.pub"));
}

// The runner binary's digest is kept under the state dir while the binary
// is the same file (path, inode, size, mtime, ctime): a short-lived `sandbox
// exec --receipt` does not hash 2 MB each time. A cache that does not match
// the binary is made again, and the report names the binary's real digest.
TEST_F(ProofCli, TheRunnersDigestIsKeptWhileTheBinaryIsTheSame) {
  const std::string real = sha256_hex(slurp(RF_RUNNER_PATH));
  auto runner_in_report = [&](const std::string& name) {
    const json bundle = json::parse(slurp(dir_ + "/" + name));
    const json report = json::parse(*base64_decode(bundle["report"]["payload"].get<std::string>()));
    return report["predicate"]["runner"]["sha256"].get<std::string>();
  };
  ASSERT_EQ(exec("a.json", {}, {"true"}).exit_code, 0);
  const std::string cache = dir_ + "/keys/runner.sha256";
  const std::string kept = slurp(cache);
  ASSERT_GE(kept.size(), 64u) << kept;
  EXPECT_EQ(kept.substr(kept.size() - 64), real);
  EXPECT_EQ(runner_in_report("a.json"), real);
  // Another binary's entry (another identity line): not used, made again.
  const std::string forged = "/elsewhere/tool-runner\n1 2 3 4.5 6.7\n" + std::string(64, 'a');
  { std::ofstream(cache, std::ios::trunc) << forged; }
  ASSERT_EQ(exec("b.json", {}, {"true"}).exit_code, 0);
  EXPECT_EQ(runner_in_report("b.json"), real);
  EXPECT_EQ(slurp(cache), kept);
}

TEST_F(ProofCli, AskingForTheHostsNetworkIsReportedNotHeld) {
  const auto ran = exec("h.json", {"--network", "host"}, {"true"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const auto v = verify(dir_ + "/h.json");
  EXPECT_EQ(v.exit_code, 3) << v.out;
  EXPECT_NE(v.out.find("NOT every bound held: 22 of 24 held"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("not held: network"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("not held: namespace.net"), std::string::npos) << v.out;
}

TEST_F(ProofCli, AReceiptIsFetchedLaterAndTheLogChecksOut) {
  ASSERT_EQ(exec("r.json", {}, {"true"}).exit_code, 0);
  ASSERT_EQ(exec("r2.json", {}, {"true"}).exit_code, 0);
  // The first receipt again, proven against the log as it is now (larger).
  const json first = json::parse(slurp(dir_ + "/r.json"));
  const int64_t seq = first["log"]["receipt_entry"]["event"]["seq"];
  const auto got = run_cli({"audit", "receipt", "--seq", std::to_string(seq), "-o",
                            dir_ + "/again.json", "--state-dir", dir_});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  const json again = json::parse(slurp(dir_ + "/again.json"));
  EXPECT_GT(again["log"]["size"].get<int>(), first["log"]["size"].get<int>());
  EXPECT_EQ(verify(dir_ + "/again.json").exit_code, 0);
  // A path that cannot be written: the error names the option given, -o.
  const auto nowhere = run_cli({"audit", "receipt", "--seq", std::to_string(seq), "-o",
                                dir_ + "/no/such/dir/r.json", "--state-dir", dir_});
  EXPECT_NE(nowhere.exit_code, 0);
  EXPECT_EQ(nowhere.err.rfind("ringfence: -o " + dir_ + "/no/such/dir/r.json: ", 0), 0u)
      << nowhere.err;
  const auto chain = run_cli({"audit", "verify", "--state-dir", dir_});
  EXPECT_EQ(chain.exit_code, 0) << chain.out;
  const auto cp = run_cli({"audit", "checkpoint", "--state-dir", dir_});
  ASSERT_EQ(cp.exit_code, 0);
  EXPECT_NE(cp.out.find("\n4\n"), std::string::npos) << cp.out;
}

TEST_F(ProofCli, AReceiptThatCannotBeWrittenFailsBeforeAnythingRuns) {
  const auto ran = run_cli({"sandbox", "exec", "--state-dir", dir_, "--receipt",
                            dir_ + "/no/such/dir/r.json", "--", "echo", "ran"});
  EXPECT_EQ(ran.exit_code, 2) << ran.err;
  EXPECT_EQ(ran.out, "");
  EXPECT_NE(ran.err.find("nothing was run"), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("--receipt " + dir_ + "/no/such/dir/r.json"), std::string::npos)
      << ran.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/no"));
}

// The key is opened beside the sandbox's creation: one that fails closed
// still stops the command before it runs.
TEST_F(ProofCli, AKeyThatCannotBeUsedFailsBeforeTheCommandRuns) {
  ASSERT_EQ(run_cli({"keys", "show", "--state-dir", dir_}).exit_code, 0);  // made on first use
  const std::string seed = dir_ + "/keys/proof.key";
  ASSERT_EQ(::chmod(seed.c_str(), 0644), 0);
  const auto ran = run_cli({"sandbox", "exec", "--state-dir", dir_, "--receipt", dir_ + "/r.json",
                            "--", "sh", "-c", "echo ran; touch /workspace/x"});
  EXPECT_EQ(ran.exit_code, 125) << ran.err;
  EXPECT_EQ(ran.out, "");
  EXPECT_NE(ran.err.find("nothing was run"), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find(seed), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("it must be 0600"), std::string::npos) << ran.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/r.json"));
}

// A worker's calls: every call gets a receipt, and `call --receipt` fetches it.
TEST_F(ProofCli, AWorkersCallGetsAReceiptThatVerifies) {
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run"});
  const auto ran = run_cli({"call", "--state-dir", dir_, "--project", "p", "--run", "r1",
                            "--receipt", dir_ + "/c.json", "--", "sh", "-c", "echo from-worker"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "from-worker\n");
  const auto v = verify(dir_ + "/c.json");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("every bound held (24 of 24)"), std::string::npos) << v.out;
  const json bundle = json::parse(slurp(dir_ + "/c.json"));
  const json receipt = json::parse(*base64_decode(bundle["receipt"]["payload"].get<std::string>()));
  EXPECT_EQ(receipt["predicate"]["call"], "1");
  EXPECT_EQ(receipt["predicate"]["stdout"]["sha256"], sha256_hex("from-worker\n"));
  // The same run's next call shares the sandbox, and so its report.
  ASSERT_EQ(run_cli({"call", "--state-dir", dir_, "--project", "p", "--run", "r1", "--receipt",
                     dir_ + "/c2.json", "--", "true"})
                .exit_code,
            0);
  const json second = json::parse(slurp(dir_ + "/c2.json"));
  EXPECT_EQ(second["report"], bundle["report"]);
  // Later, by call id.
  const auto got = run_cli({"audit", "receipt", "1", "--state-dir", dir_, "-o", dir_ + "/1.json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(verify(dir_ + "/1.json").exit_code, 0);
  // The whole run at once: each call's receipt, made from the log and verified.
  const auto run = run_cli({"audit", "verify", "--run", "r1", "--state-dir", dir_});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("run r1: 2 calls, 2 receipts verified; every bound held in each"),
            std::string::npos)
      << run.out;
  const auto as_json = run_cli({"audit", "verify", "--run", "r1", "--state-dir", dir_, "--json"});
  const json j = json::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << as_json.out;
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["calls"].size(), 2u);
  // Another key: every receipt fails, and says so.
  const std::string other = dir_ + "/other-key";
  ASSERT_EQ(run_cli({"keys", "show", "--state-dir", other}).exit_code, 0);
  const auto wrong = run_cli(
      {"audit", "verify", "--run", "r1", "--state-dir", dir_, "--key", other + "/keys/proof.pub"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("call 1: receipt NOT verified"), std::string::npos) << wrong.out;
  // A run that does not exist is named.
  const auto none = run_cli({"audit", "verify", "--run", "no-such-run", "--state-dir", dir_});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--run no-such-run"), std::string::npos) << none.err;
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(), 0) << worker.err();
}

// A per_tool sandbox is destroyed right after its call: it lives until its
// report (made beside the call) is, so the call still gets a receipt.
TEST_F(ProofCli, APerToolCallGetsAReceiptToo) {
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_tool"});
  const auto ran = run_cli({"call", "--state-dir", dir_, "--project", "p", "--run", "r1",
                            "--receipt", dir_ + "/c.json", "--", "true"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const auto v = verify(dir_ + "/c.json");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("every bound held (24 of 24)"), std::string::npos) << v.out;
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(), 0) << worker.err();
}

// A workflow's sandboxed steps are calls like any other: each gets a receipt
// naming its sandbox's report, and `audit verify --run` checks them all; an
// in_process step runs in no sandbox and has none.
TEST_F(ProofCli, AWorkflowsSandboxedStepsGetReceiptsThatVerify) {
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run"});
  const std::string wf = dir_ + "/wf.yaml";
  std::ofstream(wf) << R"(name: proven
steps:
  - id: first
    mode: sandboxed
    run: "echo one"
  - id: second
    needs: [first]
    mode: sandboxed
    sandbox: {mode: per_run}
    run: "echo two"
  - id: joined
    needs: [second]
    mode: in_process
    kind: template
    template: "{{steps.first.output}}{{steps.second.output}}"
)";
  const auto ran = run_cli(
      {"workflow", "run", wf, "--project", "p", "--run-id", "w1", "--follow", "--state-dir", dir_});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  // Receipts are filed just after each call's result: wait for the second's.
  CliRun v;
  for (int i = 0; i < 100; ++i) {
    v = run_cli({"audit", "verify", "--run", "w1", "--state-dir", dir_});
    if (v.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("run w1: 2 calls, 2 receipts verified; every bound held in each"),
            std::string::npos)
      << v.out;
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(), 0) << worker.err();
}

// The seqs of the audit log's proof.report events.
std::vector<int64_t> report_seqs(const std::string& state_dir) {
  const auto shown = run_cli({"audit", "show", "--json", "--state-dir", state_dir});
  std::vector<int64_t> out;
  const json events = json::parse(shown.out, nullptr, false);
  if (!events.is_array()) return out;
  for (const auto& e : events)
    if (e.value("kind", "") == "proof.report") out.push_back(e["seq"].get<int64_t>());
  return out;
}

// A pooled sandbox's report is made as the pool warms it up: before any call
// is even sent, so no call waits for one (issue 15's bar), and a call's
// receipt names that report.
TEST_F(ProofCli, APooledSandboxIsReportedBeforeAnyCallAndItsCallsReceiptNamesThatReport) {
  Cli worker(
      {"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run", "--pool-target", "2"});
  std::vector<int64_t> before;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((before = report_seqs(dir_)).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(before.size(), 2u) << "the pool's two sandboxes were never reported";
  const auto ran = run_cli({"call", "--state-dir", dir_, "--project", "p", "--run", "r1",
                            "--receipt", dir_ + "/c.json", "--", "echo", "pooled"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "pooled\n");
  const auto v = verify(dir_ + "/c.json");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  const json bundle = json::parse(slurp(dir_ + "/c.json"));
  const int64_t named = bundle["log"]["report_entry"]["event"]["seq"].get<int64_t>();
  EXPECT_NE(std::find(before.begin(), before.end(), named), before.end())
      << "the receipt names report " << named << ", not one made at warm-up";
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(), 0) << worker.err();
}

// The log's checkpoint and proofs, served (issue 15): what a verifier that
// watches the log over time asks for.
TEST_F(ProofCli, ServeAnswersCheckpointsAndInclusionAndConsistencyProofs) {
  ASSERT_EQ(exec("r.json", {}, {"true"}).exit_code, 0);
  ASSERT_EQ(exec("r2.json", {}, {"true"}).exit_code, 0);
  ASSERT_EQ(exec("r3.json", {}, {"true"}).exit_code, 0);
  // An operator's token reads every project's events (token.create: seven events now).
  const std::string token = make_token(dir_, "p", {"--role", "operator"});
  int port = 0;
  auto server = start_serve(dir_, &port);
  ASSERT_NE(port, 0);
  auto key = proof::read_public_key_file(dir_ + "/keys/proof.pub");
  ASSERT_TRUE(key.ok());
  auto get = [&](const std::string& target) {
    HttpProbe probe(port);
    return probe.request("GET", target, token);
  };
  const auto cp = get("/v1/audit/checkpoint");
  ASSERT_EQ(cp.status, 200) << cp.body;
  auto now = proof::verify_checkpoint(json::parse(cp.body)["checkpoint"].get<std::string>(), *key);
  ASSERT_TRUE(now.ok()) << now.error().to_string();
  EXPECT_EQ(now->size, 7u);

  const auto inc = get("/v1/audit/proofs/inclusion?seq=3");
  ASSERT_EQ(inc.status, 200) << inc.body;
  const json i = json::parse(inc.body);
  std::vector<std::string> path;
  for (const auto& h : i["inclusion"]) path.push_back(*proof::from_hex(h.get<std::string>()));
  EXPECT_TRUE(proof::verify_inclusion(
                  2, 7, proof::leaf_hash(*proof::from_hex(i["event"]["hash"].get<std::string>())),
                  path, now->root)
                  .ok());

  const auto con = get("/v1/audit/proofs/consistency?from=2&to=7");
  ASSERT_EQ(con.status, 200) << con.body;
  const json c = json::parse(con.body);
  std::vector<std::string> cpath;
  for (const auto& h : c["consistency"]) cpath.push_back(*proof::from_hex(h.get<std::string>()));
  // The old root, from the first receipt's checkpoint (two events then).
  const json first = json::parse(slurp(dir_ + "/r.json"));
  auto then = proof::verify_checkpoint(first["log"]["checkpoint"].get<std::string>(), *key);
  ASSERT_TRUE(then.ok());
  ASSERT_EQ(then->size, 2u);
  EXPECT_TRUE(proof::verify_consistency(2, 7, then->root, now->root, cpath).ok());
  std::vector<std::string> bent = cpath;
  bent[0][0] ^= 1;
  EXPECT_FALSE(proof::verify_consistency(2, 7, then->root, now->root, bent).ok());

  EXPECT_EQ(get("/v1/audit/proofs/consistency?from=8").status, 400);
  EXPECT_EQ(get("/v1/audit/proofs/inclusion?seq=99").status, 404);
  EXPECT_EQ(get("/v1/audit/proofs/inclusion?seq=x").status, 400);
  // An agent's token of project p: event 3 (a sandbox of no project) answers
  // as an event that does not exist, word for word.
  const std::string agent = make_token(dir_, "p");
  HttpProbe as_agent(port);
  const auto hidden = as_agent.request("GET", "/v1/audit/proofs/inclusion?seq=3", agent);
  EXPECT_EQ(hidden.status, 404);
  HttpProbe unknown(port);
  const auto missing = unknown.request("GET", "/v1/audit/proofs/inclusion?seq=99999", agent);
  EXPECT_EQ(missing.status, 404);
  std::string shown = hidden.body;
  if (auto at = shown.find("event 3:"); at != std::string::npos)
    shown.replace(at, 8, "event 99999:");
  EXPECT_EQ(shown, missing.body);
  HttpProbe anonymous(port);
  EXPECT_EQ(anonymous.request("GET", "/v1/audit/checkpoint").status, 401);
  server->signal(SIGTERM);
  server->wait();
}

// A receipt cut short is not JSON: the error says where it breaks, and the
// exit is the input error (2), not the one for a tampered receipt (1).
TEST_F(ProofCli, ATruncatedReceiptSaysWhereItBreaksAndIsAnInputError) {
  ASSERT_EQ(exec("r.json", {}, {"true"}).exit_code, 0);
  const std::string whole = slurp(dir_ + "/r.json");
  { std::ofstream(dir_ + "/cut.json", std::ios::trunc) << whole.substr(0, 100); }
  const auto v = verify(dir_ + "/cut.json");
  EXPECT_EQ(v.exit_code, 2) << v.out << v.err;
  EXPECT_EQ(v.err.rfind("ringfence: --receipt " + dir_ +
                            "/cut.json: not JSON: it breaks at byte 101 of 100: ",
                        0),
            0u)
      << v.err;
}

// `audit show --limit` takes a positive count only: -1 once listed every
// event (SQLite reads a negative LIMIT as none).
TEST_F(ProofCli, AuditShowRefusesALimitThatIsNotPositive) {
  ASSERT_EQ(exec("r.json", {}, {"true"}).exit_code, 0);
  for (const std::string bad : {"-1", "0"}) {
    const auto r = run_cli({"audit", "show", "--state-dir", dir_, "--limit", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_EQ(r.err,
              "ringfence: --limit " + bad + ": expected a whole number of events, 1 or more\n")
        << bad;
    EXPECT_EQ(r.out, "") << bad;
  }
  const auto one = run_cli({"audit", "show", "--state-dir", dir_, "--limit", "1", "--json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(json::parse(one.out).size(), 1u) << one.out;
}

// A signing key that cannot be written: the error names the key's file, not
// a bare "write", and no temporary file is left beside it.
TEST_F(ProofCli, ASigningKeyThatCannotBeWrittenNamesItsFile) {
  // Through a pipe: with RLIMIT_FSIZE 0 a file could not take the error either.
  const auto [err, code] = run_capture(
      "(trap '' XFSZ; ulimit -f 0; exec " RF_CLI_PATH " keys show --state-dir " + dir_ + ") 2>&1");
  EXPECT_NE(code, 0);
  EXPECT_NE(err.find(dir_ + "/keys/proof.key: write: File too large"), std::string::npos) << err;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/keys"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

}  // namespace
}  // namespace rf::testing
