#include "identity/secrets.h"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "identity/secret_box.h"
#include "identity/text_value.h"
#include "store/audit_log.h"

namespace rf::identity {
namespace {

using json = nlohmann::json;

std::string next_key_path(const std::string& key_path) { return key_path + ".next"; }

// Why a value that is not text is refused (never showing the value): it
// would reach the sandbox altered, as bytes the redactor does not know.
constexpr char kNotText[] =
    "the value is not UTF-8 text or holds a NUL byte; a sandbox receives values as text, so it "
    "would arrive altered and escape redaction (store it encoded, e.g. base64)";

Status check_value(const NewSecret& s) {
  if (s.name.empty()) return make_error("secret", "the name is empty");
  for (char c : s.name) {
    if (c == '/' || c == '\n' || c == '\0' || c == ' ')
      return make_error("secret " + s.name, "a name holds no '/', spaces or newlines");
  }
  if (s.value.empty()) return make_error("secret " + s.name, "the value is empty");
  if (s.value.size() > kMaxSecretBytes) {
    return make_error("secret " + s.name, "the value is " + std::to_string(s.value.size()) +
                                              " bytes; at most 65536 (64 KiB)");
  }
  if (!is_text_value(s.value.reveal())) return make_error("secret " + s.name, kNotText);
  if (s.backend != "builtin" && s.backend != "vault") {
    return make_error("secret " + s.name,
                      "unknown backend \"" + s.backend + "\" (expected builtin or vault)");
  }
  if (s.backend == "vault" && (!s.vault || s.vault->addr.empty())) {
    return make_error("secret " + s.name, "a vault secret needs --vault-addr");
  }
  return ok_status();
}

// The event that records a change to secrets: written in the change's own
// transaction (store::AuditAlong), so no change stands unrecorded.
std::vector<store::AuditEvent> event(const std::string& actor, std::string kind,
                                     const json& detail) {
  store::AuditEvent e;
  e.kind = std::move(kind);
  e.actor = actor;
  e.detail_json = detail.dump();
  return {std::move(e)};
}

}  // namespace

Secrets::Secrets(store::Store& store, SecretsOptions options)
    : store_(store),
      rows_(store),
      options_(std::move(options)),
      key_path_(key_file_path(options_.state_dir)) {}

Status Secrets::finish_rotation() {
  const std::string next = next_key_path(key_path_);
  if (::access(next.c_str(), F_OK) != 0) return ok_status();
  // Under the exclusive lock no rotation is under way: this .next was left
  // by one that crashed, before its commit or after it.
  auto next_key = load_key(next);
  if (!next_key.ok()) return next_key.take_error();
  auto versions = rows_.sealed_versions();
  if (!versions.ok()) return versions.take_error();
  const bool committed = !versions->empty() && versions->front().key_id == next_key->id;
  if (committed) {
    if (::rename(next.c_str(), key_path_.c_str()) != 0) return sys_error("rename " + next);
  } else if (::unlink(next.c_str()) != 0 && errno != ENOENT) {
    // The rotation did not commit: the old key holds.
    return sys_error("remove " + next);
  }
  return ok_status();
}

Result<KeyLock> Secrets::lock_for_opening() {
  const std::string next = next_key_path(key_path_);
  for (;;) {
    {
      auto shared = KeyLock::take(key_path_, KeyLock::Mode::shared);
      if (!shared.ok() || ::access(next.c_str(), F_OK) != 0) return shared;
    }  // a crashed rotation to finish first, under the exclusive lock
    auto exclusive = KeyLock::take(key_path_, KeyLock::Mode::exclusive);
    if (!exclusive.ok()) return exclusive.take_error();
    RF_TRY(finish_rotation());
  }
}

std::optional<Result<SealingKey>> Secrets::key_for_opening(const OpenRows& rows) {
  for (const auto& [name, pair] : rows) {
    if (pair.first.backend == "builtin") return load_key(key_path_);
  }
  return std::nullopt;
}

Result<SealingKey> Secrets::key_for_sealing() {
  RF_TRY(finish_rotation());
  auto versions = rows_.sealed_versions();
  if (!versions.ok()) return versions.take_error();
  // With sealed secrets, a missing key file is an error, not a new key: a new
  // one would seal new values while the old ones could no longer be opened.
  if (!versions->empty()) return load_key(key_path_);
  return load_or_create_key(key_path_);
}

Result<int64_t> Secrets::set(const NewSecret& s) {
  RF_TRY(check_value(s));
  int64_t version = 0;
  const store::AuditAlong audit = [&](int64_t v) {
    json detail = {{"secret", s.name}, {"version", v}, {"backend", s.backend}};
    if (s.vault) detail["vault"] = s.vault->addr + "/" + s.vault->mount + "/" + s.vault->path;
    return event(options_.actor, "secret.set", detail);
  };
  if (s.backend == "builtin") {
    // Exclusive, until the value is stored: a rotation neither retires the
    // key it is sealed with meanwhile nor misses it when re-sealing.
    auto lock = KeyLock::take(key_path_, KeyLock::Mode::exclusive);
    if (!lock.ok()) return make_error("set secret " + s.name, lock.error().to_string());
    auto key = key_for_sealing();
    if (!key.ok()) return make_error("set secret " + s.name, key.error().to_string());
    // Sealed as the version the store's transaction gives it, which is
    // bound into the sealed value: one picked before could be taken meanwhile.
    auto put = rows_.put_secret_version(
        s.name, "builtin", std::nullopt,
        [&](int64_t v) { return std::make_pair(seal(*key, s.name, v, s.value.reveal()), key->id); },
        audit);
    if (!put.ok()) return put.take_error();
    version = *put;
  } else {
    if (!options_.vault) return make_error("set secret " + s.name, "no Vault client is set up");
    auto written = options_.vault->write(*s.vault, s.value.reveal());
    if (!written.ok()) return make_error("set secret " + s.name, written.error().to_string());
    auto put = rows_.put_secret_version(s.name, "vault", s.vault, nullptr, audit);
    if (!put.ok()) return put.take_error();
    version = *put;
  }
  return version;
}

Result<std::vector<store::SecretRow>> Secrets::list() { return rows_.secrets(); }

Status Secrets::revoke(const std::string& name, bool hard) {
  return rows_.revoke_secret(name, hard, [&](const std::vector<store::InjectionRow>& live) {
    json received = json::array();
    for (const auto& i : live) {
      received.push_back({{"call", i.call_id ? json(*i.call_id) : json()},
                          {"sandbox", i.sandbox_id},
                          {"key", i.key},
                          {"version", i.version}});
    }
    return event(options_.actor, hard ? "secret.hard_revoke" : "secret.revoke",
                 {{"secret", name}, {"live_injections", received}});
  });
}

Result<size_t> Secrets::rotate_key() {
  // Held from writing .next to renaming it: another rotation would write its
  // own .next over this one's, and a set would seal with the key retired.
  auto lock = KeyLock::take(key_path_, KeyLock::Mode::exclusive);
  if (!lock.ok()) return make_error("rotate key", lock.error().to_string());
  RF_TRY(finish_rotation());
  auto versions = rows_.sealed_versions();
  if (!versions.ok()) return versions.take_error();
  auto old_key = versions->empty() ? load_or_create_key(key_path_) : load_key(key_path_);
  if (!old_key.ok()) return make_error("rotate key", old_key.error().to_string());
  SealingKey fresh = new_key(key_path_);
  const std::string next = next_key_path(key_path_);
  // The new key is on disk before any value is sealed with it.
  RF_TRY(write_key(fresh, next));
  size_t count = 0;
  auto resealed = rows_.reseal_all(
      [&](const store::SealedVersion& v) -> Result<std::pair<std::string, std::string>> {
        auto plain = open_sealed(*old_key, v.name, v.version, v.sealed, v.key_id);
        if (!plain.ok()) return plain.take_error();
        ++count;
        return std::make_pair(seal(fresh, v.name, v.version, plain->reveal()), fresh.id);
      },
      // In the re-sealing's transaction: a rotation is recorded if and only
      // if its values were committed (the key file follows them).
      [&](int64_t n) {
        return event(options_.actor, "secret.rotate_key",
                     {{"versions", n}, {"old_key", old_key->id}, {"new_key", fresh.id}});
      });
  if (!resealed.ok()) {
    ::unlink(next.c_str());
    return make_error("rotate key", resealed.error().to_string());
  }
  if (::rename(next.c_str(), key_path_.c_str()) != 0) return sys_error("rename " + next);
  return count;
}

Result<std::map<std::string, OpenedSecret>> Secrets::open_current(
    const std::vector<std::string>& names) {
  if (names.empty()) return std::map<std::string, OpenedSecret>{};
  // The rows and the key are read under one shared lock, so no rotation
  // commits between them; it is let go before Vault is read.
  OpenRows rows;
  std::optional<Result<SealingKey>> key;
  {
    auto lock = lock_for_opening();
    if (!lock.ok()) return lock.take_error();
    auto read = rows_.current_versions(names);
    if (!read.ok()) return read.take_error();
    rows = std::move(*read);
    key = key_for_opening(rows);
  }
  return open_with(rows, key);
}

Result<std::map<std::string, OpenedSecret>> Secrets::open_rows(const OpenRows& rows) {
  std::optional<Result<SealingKey>> key;
  OpenRows fresh;
  {
    auto lock = lock_for_opening();
    if (!lock.ok()) return lock.take_error();
    key = key_for_opening(rows);
    // Rows read before a rotation that has finished since hold the values as
    // sealed by the retired key: the same versions, sealed again by the key
    // now in the file, are read again (under the lock, so no rotation is
    // half done).
    if (key && key->ok()) {
      auto stale = rows_sealed_by_another_key(rows, (*key)->id);
      if (!stale.ok()) return stale.take_error();
      fresh = std::move(*stale);
    }
  }
  if (fresh.empty()) return open_with(rows, key);
  OpenRows merged = rows;
  for (auto& [name, pair] : fresh) merged[name] = std::move(pair);
  return open_with(merged, key);
}

Result<Secrets::OpenRows> Secrets::rows_sealed_by_another_key(const OpenRows& rows,
                                                              const std::string& key_id) {
  OpenRows out;
  bool any = false;
  for (const auto& [name, pair] : rows)
    any = any || (pair.first.backend == "builtin" && pair.second.key_id != key_id);
  if (!any) return out;
  auto versions = rows_.sealed_versions();
  if (!versions.ok()) return versions.take_error();
  for (const auto& [name, pair] : rows) {
    if (pair.first.backend != "builtin" || pair.second.key_id == key_id) continue;
    for (const auto& v : *versions) {
      if (v.name == name && v.version == pair.second.version) out[name] = {pair.first, v};
    }
  }
  return out;
}

Result<std::map<std::string, OpenedSecret>> Secrets::open_with(
    const OpenRows& rows, const std::optional<Result<SealingKey>>& key) {
  std::map<std::string, OpenedSecret> out;
  // Vault secrets are read together once every row has passed its checks
  // (a revoked one refuses the whole resolution before Vault is asked).
  std::vector<std::string> vault_names;
  std::vector<store::VaultLocation> vault_at;
  for (const auto& [name, pair] : rows) {
    const auto& [row, sealed] = pair;
    if (row.state != store::SecretState::active) {
      return make_error("secret " + name, "is " + std::string(store::to_string(row.state)) +
                                              "; it is given to no one");
    }
    OpenedSecret opened{row, sealed.version, SecretValue()};
    if (row.backend == "builtin") {
      if (!key) return make_error("secret " + name, "no key was loaded for it");
      if (!key->ok()) return key->error();
      auto value = open_sealed(**key, name, sealed.version, sealed.sealed, sealed.key_id);
      if (!value.ok()) return value.take_error();
      // Set before values were checked: refused now, as set refuses it.
      if (!is_text_value(value->reveal())) return make_error("secret " + name, kNotText);
      opened.value = std::move(*value);
    } else {
      if (!options_.vault || !row.vault) {
        return make_error("secret " + name, "lives in Vault, and no Vault client is set up");
      }
      vault_names.push_back(name);
      vault_at.push_back(*row.vault);
    }
    out.emplace(name, std::move(opened));
  }
  if (!vault_at.empty()) {
    auto values = options_.vault->read_all(vault_at);
    for (size_t i = 0; i < vault_names.size(); ++i) {
      if (!values[i].ok()) {
        return make_error("secret " + vault_names[i], values[i].error().to_string());
      }
      // Vault holds whatever was written there, by anyone: checked as read.
      if (!is_text_value(values[i]->reveal())) {
        return make_error("secret " + vault_names[i], kNotText);
      }
      out.at(vault_names[i]).value = std::move(*values[i]);
    }
  }
  return out;
}

}  // namespace rf::identity
