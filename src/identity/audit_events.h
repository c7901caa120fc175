// The identity layer's audit events (host side): profile changes, cascade
// resolutions, refusals, injections and redaction counts. Keys, secret names
// and versions only, never a value. A change (a profile set, an injection,
// and the secrets' own in identity/secrets.cc) is written with its event in
// one transaction: the events below are made for that (store::AuditAlong).
// The rest record what happened or was refused: one that cannot be written is
// logged as a warning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "identity/cascade.h"
#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/store.h"

namespace rf::identity {

// Where an event happened, beyond the project the request names.
struct AuditContext {
  std::optional<std::string> run_id;
  std::optional<int64_t> call_id;
  std::optional<std::string> sandbox_id;
};

// profile.set, to write with the profile (IdentityStore::put_profile).
store::AuditEvent profile_set_event(const std::string& actor, const store::ProfileRow& profile);
void audit_resolution(store::Store& store, const std::string& actor, const CascadePlan& plan,
                      const AuditContext& where);
void audit_refusal(store::Store& store, const std::string& actor, const CascadeRequest& request,
                   const std::string& reason, const AuditContext& where);
// identity.inject, to write with the injections (IdentityStore::record_injections):
// no value goes into a sandbox unrecorded.
store::AuditEvent injection_event(const std::string& actor, const CascadePlan& plan,
                                  const AuditContext& where);
// A JIT request's steps (issue 13): jit.requested, jit.evaluated (the rule),
// jit.approved / jit.denied (by whom: a person or the policy), jit.delivered,
// jit.withdrawn. `detail_json` is a JSON object of names, never a value.
void audit_jit(store::Store& store, const std::string& actor, const std::string& kind,
               const std::string& project, const AuditContext& where,
               const std::string& detail_json);
// The same event, to append with others in one transaction (AuditLog::append_all).
store::AuditEvent jit_event(const std::string& actor, const std::string& kind,
                            const std::string& project, const AuditContext& where,
                            const std::string& detail_json);
// Appends them all in one transaction; a failure is logged as a warning.
void audit_all(store::Store& store, const std::vector<store::AuditEvent>& events);
// counts: (key, form) -> matches redacted.
void audit_redactions(store::Store& store, const std::string& actor, const std::string& project,
                      const std::map<std::pair<std::string, std::string>, uint64_t>& counts,
                      const AuditContext& where);

}  // namespace rf::identity
