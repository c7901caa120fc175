#include <mutex>

#include "sandbox/sandbox.h"

namespace rf {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.factories[name] = std::move(factory);
}

Result<std::unique_ptr<Backend>> make_backend(const std::string& name) {
  BackendFactory f;
  {
    auto& r = registry();
    std::lock_guard lock(r.mu);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      std::string known;
      for (const auto& [n, _] : r.factories) known += (known.empty() ? "" : ", ") + n;
      return make_error("backend", "unknown backend \"" + name + "\" (available: " + known + ")");
    }
    f = it->second;
  }
  return f();
}

std::vector<std::string> backend_names() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [n, _] : r.factories) out.push_back(n);
  return out;
}

}  // namespace rf
