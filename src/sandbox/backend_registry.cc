#include <mutex>

#include "sandbox/sandbox.h"

namespace rf {
namespace {

struct Entry {
  BackendFactory make;
  DoctorFactory doctor;
};

struct Registry {
  std::mutex mu;
  std::map<BackendKind, Entry> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::optional<Entry> find(BackendKind kind) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.entries.find(kind);
  if (it == r.entries.end()) return std::nullopt;
  return it->second;
}

std::string registered_names() {
  std::string out;
  for (BackendKind k : registered_backends())
    out += (out.empty() ? "" : ", ") + std::string(to_string(k));
  return out;
}

}  // namespace

void register_backend(BackendKind kind, BackendFactory make, DoctorFactory doctor) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.entries[kind] = Entry{std::move(make), std::move(doctor)};
}

Result<std::unique_ptr<Backend>> make_backend(BackendKind kind) {
  auto entry = find(kind);
  if (!entry) {
    return make_error("backend", "backend \"" + std::string(to_string(kind)) +
                                     "\" is not in this build (available: " + registered_names() +
                                     ")");
  }
  return entry->make();  // outside the lock: making a backend may take a while
}

std::vector<HealthCheck> backend_doctor(BackendKind kind) {
  auto entry = find(kind);
  HealthCheck missing{"backend", false,
                      "backend " + std::string(to_string(kind)) + " is not in this build",
                      "use one of: " + registered_names(), true};
  if (!entry) return {missing};
  if (entry->doctor) return entry->doctor();
  auto backend = entry->make();
  if (!backend) {
    return {HealthCheck{"backend", false, backend.error().to_string(),
                        "see the error; `ringfence sandbox doctor --backend " +
                            std::string(to_string(kind)) + "` lists what is missing",
                        true}};
  }
  return (*backend)->health();
}

std::vector<BackendKind> registered_backends() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<BackendKind> out;
  for (const auto& [k, _] : r.entries) out.push_back(k);
  return out;
}

}  // namespace rf
