#include "core/counters.h"

#include <mutex>

namespace rf::counters {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, uint64_t, std::less<>> values;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may count at exit
  return *r;
}

}  // namespace

void add(std::string_view series, uint64_t n) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.values.find(series);
  if (it == r.values.end()) it = r.values.emplace(std::string(series), 0).first;
  it->second += n;
}

std::map<std::string, uint64_t> snapshot() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return {r.values.begin(), r.values.end()};
}

}  // namespace rf::counters
