// `ringfence audit show | verify` (issue 11): the hash-chained audit log.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/proof_session.h"
#include "core/io.h"
#include "core/printable.h"
#include "core/utc_time.h"
#include "proof/proof_log.h"
#include "proof/signing_key.h"
#include "proof/verify.h"
#include "store/audit_log.h"

namespace rf::cli {
namespace {

using json = nlohmann::json;

// audit verify: the chain is broken (distinct from 125, the store cannot be read).
constexpr int kExitTampered = 1;

// audit verify --receipt: the file verified, but not every bound held.
constexpr int kExitBoundsNotHeld = 3;

struct AuditFlags {
  std::string state_dir, run, project;
  std::string receipt, key, output;
  int64_t call = 0, seq = 0;
  int64_t after = 0;
  int limit = 1000;
  bool json = false;
};

json event_json(const store::AuditEvent& e) {
  json j = {{"seq", e.seq},
            {"at", iso_utc(e.at, true)},
            {"kind", e.kind},
            {"actor", e.actor},
            {"detail", json::parse(e.detail_json, nullptr, false)},
            {"hash", e.hash}};
  if (e.project_id) j["project"] = *e.project_id;
  if (e.run_id) j["run"] = *e.run_id;
  if (e.call_id) j["call"] = *e.call_id;
  if (e.sandbox_id) j["sandbox"] = *e.sandbox_id;
  return j;
}

int run_show(const AuditFlags& f) {
  // A limit below 1 is refused: SQLite reads a negative LIMIT as none at all.
  if (f.limit < 1) {
    return fail(
        "--limit " + std::to_string(f.limit) + ": expected a whole number of events, 1 or more",
        kExitUsage);
  }
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::AuditFilter filter;
  if (!f.run.empty()) filter.run_id = f.run;
  if (!f.project.empty()) filter.project_id = f.project;
  filter.after_seq = f.after;
  filter.limit = f.limit;
  auto events = store::AuditLog(**st).list(filter);
  if (!events.ok()) return fail(events.error().to_string(), kExitRuntime);
  if (f.json) {
    json out = json::array();
    for (const auto& e : *events) out.push_back(event_json(e));
    std::printf("%s\n", printable_json(out).c_str());
    return 0;
  }
  // An event's detail holds what a sandbox or a tenant wrote (an rf-cred
  // reason, a step's error): shown as JSON with nothing a terminal acts on.
  std::printf("%-6s %-24s %-20s %-16s %-28s %s\n", "SEQ", "AT", "KIND", "ACTOR", "WHERE", "DETAIL");
  for (const auto& e : *events) {
    std::string where;
    if (e.project_id) where += "project=" + *e.project_id;
    if (e.run_id) where += (where.empty() ? "" : " ") + std::string("run=") + *e.run_id;
    if (e.call_id)
      where += (where.empty() ? "" : " ") + std::string("call=") + std::to_string(*e.call_id);
    if (e.sandbox_id) where += (where.empty() ? "" : " ") + std::string("sandbox=") + *e.sandbox_id;
    std::printf("%-6lld %-24s %-20s %-16s %-28s %s\n", static_cast<long long>(e.seq),
                iso_utc(e.at, true).c_str(), printable(e.kind).c_str(), printable(e.actor).c_str(),
                printable(where).c_str(), printable_json_text(e.detail_json).c_str());
  }
  return 0;
}

int run_verify_receipt(const AuditFlags& f) {
  auto text = read_file(f.receipt);
  if (!text.ok())
    return fail("--receipt " + f.receipt + ": " + text.error().to_string(), kExitUsage);
  // Not JSON is bad input (a file cut short, the wrong file), not a receipt
  // that fails its checks: the usage exit, and where the text breaks.
  json bundle;
  try {
    bundle = json::parse(*text);
  } catch (const json::parse_error& e) {
    std::string why = e.what();
    if (const size_t at = why.find(": ", why.find("column")); at != std::string::npos)
      why = why.substr(at + 2);
    return fail("--receipt " + f.receipt + ": not JSON: it breaks at byte " +
                    std::to_string(e.byte) + " of " + std::to_string(text->size()) + ": " + why,
                kExitUsage);
  }
  const std::string key_path =
      f.key.empty() ? proof::public_key_path(state_dir_or_default(f.state_dir)) : f.key;
  auto key = proof::read_public_key_file(key_path);
  if (!key.ok()) {
    return fail(
        key.error().to_string() + (f.key.empty() ? " (name the signer's key with --key)" : ""),
        kExitUsage);
  }
  auto v = proof::verify_bundle(bundle, *key);
  if (!v.ok()) {
    if (f.json) {
      std::printf("%s\n",
                  json({{"verified", false}, {"problem", v.error().to_string()}}).dump().c_str());
    } else {
      std::printf("receipt NOT verified: %s\n", v.error().to_string().c_str());
    }
    return kExitTampered;
  }
  const bool all_held = v->bounds.not_held.empty() && v->bounds.unknown.empty();
  if (f.json) {
    std::printf("%s\n", json({{"verified", true},
                              {"all_held", all_held},
                              {"held", v->bounds.held},
                              {"not_held", v->bounds.not_held},
                              {"unknown", v->bounds.unknown},
                              {"sandbox", v->report["predicate"].value("sandbox", "")},
                              {"log", {{"origin", v->origin}, {"size", v->log_size}}}})
                            .dump()
                            .c_str());
  } else {
    const auto& p = v->receipt["predicate"];
    std::printf("receipt verified: signed by %s..., in the log %s of %llu entries\n",
                key->key_id().substr(0, 16).c_str(), v->origin.c_str(),
                static_cast<unsigned long long>(v->log_size));
    std::printf("call %s in sandbox %s: exit %d, stdout sha256 %s\n", p.value("call", "").c_str(),
                p.value("sandbox", "").c_str(), p["exit"].value("code", 0),
                p["stdout"].value("sha256", "").c_str());
    const size_t total =
        static_cast<size_t>(v->bounds.held) + v->bounds.not_held.size() + v->bounds.unknown.size();
    if (all_held) {
      std::printf("every bound held (%zu of %zu)\n", total, total);
    } else {
      std::printf("NOT every bound held: %d of %zu held\n", v->bounds.held, total);
      for (const auto& b : v->bounds.not_held) std::printf("  not held: %s\n", b.c_str());
      for (const auto& b : v->bounds.unknown) std::printf("  unknown:  %s\n", b.c_str());
    }
  }
  return all_held ? 0 : kExitBoundsNotHeld;
}

// The receipt file of a call (or of the receipt event --seq), proven against a new checkpoint.
int run_receipt(const AuditFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto st = open_client_store(dir);
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  auto key = proof::SigningKey::load(dir);
  if (!key.ok()) return fail(key.error().to_string(), kExitRuntime);
  proof::ProofLog log(**st, *key, proof::default_origin());
  int64_t seq = f.seq;
  if (seq == 0) {
    auto found = log.receipt_of_call(f.call);
    if (!found.ok()) return fail(found.error().to_string(), kExitRuntime);
    if (!*found)
      return fail("call " + std::to_string(f.call) + ": no receipt in the audit log", kExitRuntime);
    seq = **found;
  }
  auto bundle = log.bundle_for_receipt(seq);
  if (!bundle.ok()) return fail(bundle.error().to_string(), kExitRuntime);
  if (f.output.empty() || f.output == "-") {
    std::printf("%s\n", bundle->dump(2).c_str());
    return 0;
  }
  if (auto w = write_receipt_file(f.output, *bundle, "-o"); !w)
    return fail(w.error().to_string(), kExitRuntime);
  return 0;
}

int run_checkpoint(const AuditFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto st = open_client_store(dir);
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  auto key = proof::SigningKey::load_or_create(dir);
  if (!key.ok()) return fail(key.error().to_string(), kExitRuntime);
  auto note = proof::ProofLog(**st, *key, proof::default_origin()).checkpoint();
  if (!note.ok()) return fail(note.error().to_string(), kExitRuntime);
  std::printf("%s", note->c_str());
  return 0;
}

// Every receipt of run R's calls, made from the state dir's log and verified
// as `--receipt` verifies a file: a call that finished (done) must have one
// that verifies; calls that never finished in a sandbox are listed.
int run_verify_run(const AuditFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto st = open_client_store(dir);
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  auto run = (*st)->run(f.run);
  if (!run.ok()) return fail("--run " + f.run + ": " + run.error().to_string(), kExitUsage);
  auto signer = proof::SigningKey::load(dir);
  if (!signer.ok()) return fail(signer.error().to_string(), kExitRuntime);
  auto key = proof::read_public_key_file(f.key.empty() ? proof::public_key_path(dir) : f.key);
  if (!key.ok()) return fail(key.error().to_string(), kExitUsage);
  proof::ProofLog log(**st, *signer, proof::default_origin());
  bool all_verified = true, all_held = true;
  int verified = 0;
  json calls = json::array();
  for (const auto& c : run->calls) {
    json j = {{"call", c.id}, {"state", store::to_string(c.state)}};
    std::string line;
    auto not_verified = [&](const std::string& problem) {
      j["verified"] = false;
      j["problem"] = problem;
      line = "receipt NOT verified: " + problem;
      all_verified = false;
    };
    auto bundle = log.bundle_for_call(c.id);
    if (!bundle.ok()) {
      not_verified(bundle.error().to_string());
    } else if (!*bundle) {
      j["verified"] = false;
      const bool finished = c.state == store::CallState::done;
      j["problem"] = finished ? "no receipt" : "no receipt: it never finished in a sandbox";
      line = finished ? "finished, but has NO receipt in the audit log"
                      : "no receipt (" + std::string(store::to_string(c.state)) + ")";
      if (finished) all_verified = false;
    } else if (auto v = proof::verify_bundle(**bundle, *key); !v.ok()) {
      not_verified(v.error().to_string());
    } else {
      ++verified;
      const bool held = v->bounds.not_held.empty() && v->bounds.unknown.empty();
      all_held = all_held && held;
      j["verified"] = true;
      j["all_held"] = held;
      j["not_held"] = v->bounds.not_held;
      j["unknown"] = v->bounds.unknown;
      j["sandbox"] = v->report["predicate"].value("sandbox", "");
      line =
          "receipt verified (sandbox " + j["sandbox"].get<std::string>() + "), " +
          (held ? "every bound held"
                : "NOT every bound held: " + json(v->bounds.not_held).dump() +
                      (v->bounds.unknown.empty() ? ""
                                                 : ", unknown: " + json(v->bounds.unknown).dump()));
    }
    calls.push_back(j);
    if (!f.json) std::printf("call %lld: %s\n", static_cast<long long>(c.id), line.c_str());
  }
  if (f.json) {
    std::printf("%s\n", json({{"run", f.run},
                              {"verified", all_verified},
                              {"all_held", all_verified && all_held},
                              {"calls", calls}})
                            .dump()
                            .c_str());
  } else {
    std::printf("run %s: %zu calls, %d receipts verified; %s\n", f.run.c_str(), run->calls.size(),
                verified,
                !all_verified ? "NOT every receipt verified"
                : all_held    ? "every bound held in each"
                              : "NOT every bound held");
  }
  if (!all_verified) return kExitTampered;
  return all_held ? 0 : kExitBoundsNotHeld;
}

int run_verify(const AuditFlags& f) {
  if (!f.receipt.empty() && !f.run.empty())
    return fail("audit verify: --receipt and --run are exclusive: name one", kExitUsage);
  if (!f.receipt.empty()) return run_verify_receipt(f);
  if (!f.run.empty()) return run_verify_run(f);
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  auto verdict = store::AuditLog(**st).verify();
  if (!verdict.ok()) return fail(verdict.error().to_string(), kExitRuntime);
  if (f.json) {
    json j = {{"intact", verdict->intact}, {"events", verdict->events}};
    if (verdict->first_bad) j["first_bad"] = *verdict->first_bad;
    if (!verdict->intact) j["reason"] = verdict->reason;
    std::printf("%s\n", j.dump().c_str());
  } else if (verdict->intact) {
    std::printf("audit log intact: %lld events\n", static_cast<long long>(verdict->events));
  } else {
    std::printf("audit log NOT intact: %s\n", verdict->reason.c_str());
  }
  return verdict->intact ? 0 : kExitTampered;
}

}  // namespace

void add_audit_commands(CLI::App* audit, CommandResult* result) {
  auto f = std::make_shared<AuditFlags>();
  audit->require_subcommand(1);
  auto* show = audit->add_subcommand("show", "List audit events, oldest first");
  show->add_option("--run", f->run, "Only this run's events");
  show->add_option("--project", f->project, "Only this project's events");
  show->add_option("--after", f->after, "Only events after this seq");
  show->add_option("--limit", f->limit, "At most this many")->default_val(1000);
  show->add_flag("--json", f->json, "As a JSON array");
  show->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  show->callback([f, result] { result->exit_code = run_show(*f); });
  auto* verify = audit->add_subcommand(
      "verify",
      "Check the hash chain of every event; with --receipt, a receipt offline; with --run, every "
      "receipt of a run");
  verify->add_flag("--json", f->json, "As JSON");
  verify->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  verify->add_option("--receipt", f->receipt,
                     "A receipt file (sandbox exec --receipt, audit receipt): its signatures, the "
                     "report it names, its place in the log and the checkpoint, with only the "
                     "public key");
  verify->add_option("--run", f->run,
                     "Every receipt of this run's calls, from the state dir's log, verified "
                     "against the key as --receipt is");
  verify->add_option("--key", f->key,
                     "The signer's public key (PEM; `ringfence keys show`); default: the state "
                     "dir's");
  verify->footer(
      "Exit codes: 0 the chain is intact (with --receipt: the receipt verifies and every bound "
      "held; with --run: so does every finished call's); 1 it is not (an event was edited, "
      "deleted or reordered; a receipt's signature, report, log entry or checkpoint does not "
      "verify; a finished call has no receipt): what is named; 3 the receipts verify but not "
      "every bound held: those are listed; 125 the store cannot be read.");
  auto* receipt = audit->add_subcommand(
      "receipt", "The receipt file of a call, with a new checkpoint: receipt CALL_ID -o FILE");
  receipt->add_option("call", f->call, "The call's id");
  receipt->add_option("--seq", f->seq, "The receipt's audit event instead of a call id");
  receipt->add_option("-o,--output", f->output, "Where to write it (default: stdout)");
  receipt->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  receipt->callback([f, result] {
    if (f->call == 0 && f->seq == 0) {
      result->exit_code = fail("audit receipt: name a call id (or --seq)", kExitUsage);
      return;
    }
    result->exit_code = run_receipt(*f);
  });
  auto* checkpoint = audit->add_subcommand(
      "checkpoint", "A signed checkpoint of the audit log's Merkle tree (C2SP signed note)");
  checkpoint->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  checkpoint->callback([f, result] { result->exit_code = run_checkpoint(*f); });
  verify->callback([f, result] { result->exit_code = run_verify(*f); });
}

}  // namespace rf::cli
