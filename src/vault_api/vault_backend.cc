#include "vault_api/vault_backend.h"

#include <string.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <thread>

namespace rf::vault {
namespace {

std::string cache_key(const store::VaultLocation& at) {
  return at.addr + '\n' + at.mount + '\n' + at.path;
}

}  // namespace

VaultBackend::VaultBackend(VaultBackendOptions options) : options_(std::move(options)) {}

VaultBackend::~VaultBackend() {
  if (!options_.token.empty()) explicit_bzero(options_.token.data(), options_.token.size());
}

Result<Kv2Client*> VaultBackend::client_for(const std::string& addr) {
  // Called with mu_ held.
  auto it = clients_.find(addr);
  if (it != clients_.end()) return it->second.get();
  auto parsed = parse_vault_address(addr);
  if (!parsed) return parsed.take_error();
  auto client = std::make_unique<Kv2Client>(std::move(*parsed), options_.token, options_.client);
  Kv2Client* raw = client.get();
  clients_.emplace(addr, std::move(client));
  return raw;
}

Result<int64_t> VaultBackend::write(const store::VaultLocation& at, std::string_view value) {
  Kv2Client* client = nullptr;
  {
    std::lock_guard lock(mu_);
    cache_.erase(cache_key(at));
    auto c = client_for(at.addr);
    if (!c) return c.take_error();
    client = *c;
  }
  std::map<std::string, std::string> fields{{kValueField, std::string(value)}};
  Kv2Failure why = Kv2Failure::kNone;
  auto version = client->write(at.mount, at.path, fields, &why);
  explicit_bzero(fields[kValueField].data(), fields[kValueField].size());
  if (!version && why == Kv2Failure::kForbidden) clear_cache();
  return version;
}

Result<identity::SecretValue> VaultBackend::read(const store::VaultLocation& at) {
  const std::string key = cache_key(at);
  const auto now = std::chrono::steady_clock::now();
  Kv2Client* client = nullptr;
  {
    std::lock_guard lock(mu_);
    if (auto hit = cached(key, now)) return std::move(*hit);
    auto c = client_for(at.addr);
    if (!c) return c.take_error();
    client = *c;
    ++counts_.fetched;
  }
  Kv2Failure why = Kv2Failure::kNone;
  auto data = client->read(at.mount, at.path, &why);
  if (!data) {
    std::lock_guard lock(mu_);
    if (why == Kv2Failure::kForbidden) {
      cache_.clear();
    } else {
      cache_.erase(key);
    }
    return data.take_error();
  }
  auto field = data->fields.find(kValueField);
  if (field == data->fields.end()) {
    return make_error("vault " + at.addr + "/v1/" + at.mount + "/data/" + at.path,
                      std::string("version ") + std::to_string(data->version) + " has no \"" +
                          kValueField + "\" field (ringfence keeps each value there)");
  }
  identity::SecretValue value(field->second);
  if (options_.ttl.count() > 0) {
    std::lock_guard lock(mu_);
    cache_[key] = Entry{value, now};
  }
  return value;
}

std::optional<identity::SecretValue> VaultBackend::cached(
    const std::string& key, std::chrono::steady_clock::time_point now) {
  // Called with mu_ held.
  if (options_.ttl.count() <= 0) return std::nullopt;
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  if (now - it->second.fetched >= options_.ttl) {
    cache_.erase(it);
    return std::nullopt;
  }
  ++counts_.cached;
  return it->second.value;
}

std::vector<Result<identity::SecretValue>> VaultBackend::read_all(
    const std::vector<store::VaultLocation>& at) {
  std::vector<std::optional<Result<identity::SecretValue>>> got(at.size());
  std::vector<size_t> misses;
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < at.size(); ++i) {
      if (auto hit = cached(cache_key(at[i]), now)) {
        got[i].emplace(std::move(*hit));
      } else {
        misses.push_back(i);
      }
    }
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t m; (m = next.fetch_add(1)) < misses.size();) {
      got[misses[m]].emplace(read(at[misses[m]]));
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(misses.size(), kParallel); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  std::vector<Result<identity::SecretValue>> out;
  out.reserve(at.size());
  for (auto& g : got) out.push_back(std::move(*g));
  return out;
}

VaultBackend::Counts VaultBackend::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void VaultBackend::clear_cache() {
  std::lock_guard lock(mu_);
  cache_.clear();
}

Result<VaultBackendOptions> vault_options_from_env() {
  VaultBackendOptions o;
  if (const char* t = std::getenv("VAULT_TOKEN"); t != nullptr) o.token = t;
  if (const char* ttl = std::getenv("RINGFENCE_VAULT_CACHE_TTL_MS"); ttl != nullptr) {
    char* end = nullptr;
    errno = 0;
    const long long ms = std::strtoll(ttl, &end, 10);
    if (*ttl == '\0' || *end != '\0' || errno != 0 || ms < 0 || ms > 86'400'000) {
      return make_error(
          "RINGFENCE_VAULT_CACHE_TTL_MS",
          "\"" + std::string(ttl) + "\" is not a number of milliseconds (0-86400000)");
    }
    o.ttl = std::chrono::milliseconds(ms);
  }
  return o;
}

}  // namespace rf::vault
