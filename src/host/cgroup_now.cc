#include "host/cgroup_now.h"

#include <charconv>

#include "core/io.h"

namespace rf::host {
namespace {

Result<uint64_t> number_in(const std::string& path, std::string_view key = "") {
  auto text = read_kernel_file(path);
  if (!text) return text.take_error();
  std::string_view t = *text;
  if (!key.empty()) {
    // "key value" lines (cpu.stat).
    size_t at = 0;
    for (;;) {
      if (at >= t.size()) return make_error(path, "has no " + std::string(key));
      const size_t nl = t.find('\n', at);
      std::string_view line = t.substr(at, nl == std::string_view::npos ? t.npos : nl - at);
      if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ' ') {
        t = line.substr(key.size() + 1);
        break;
      }
      if (nl == std::string_view::npos) return make_error(path, "has no " + std::string(key));
      at = nl + 1;
    }
  }
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc() || end == t.data()) return make_error(path, "holds no number");
  return n;
}

}  // namespace

std::string cgroup_path_of(std::string_view proc_cgroup, std::string_view controller) {
  size_t at = 0;
  while (at < proc_cgroup.size()) {
    const size_t nl = proc_cgroup.find('\n', at);
    const std::string_view line =
        proc_cgroup.substr(at, nl == std::string_view::npos ? proc_cgroup.npos : nl - at);
    at = nl == std::string_view::npos ? proc_cgroup.size() : nl + 1;
    // "ID:CONTROLLERS:PATH"; v2 is "0::PATH".
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string_view path = line.substr(b + 1);
    if (controller.empty()) {
      if (line.substr(0, a) == "0" && controllers.empty()) return std::string(path);
      continue;
    }
    size_t c = 0;
    while (c <= controllers.size()) {
      size_t comma = controllers.find(',', c);
      if (comma == std::string_view::npos) comma = controllers.size();
      if (controllers.substr(c, comma - c) == controller) return std::string(path);
      c = comma + 1;
    }
  }
  return {};
}

Result<ResourcesNow> resources_of_process(pid_t pid, const std::string& proc,
                                          const std::string& cgroup_root) {
  auto text = read_kernel_file(proc + "/" + std::to_string(pid) + "/cgroup");
  if (!text) return text.take_error();
  ResourcesNow now;
  // v1 first where its controllers are mounted apart (a hybrid host has a
  // v2 line too, with no controllers in it).
  const std::string memory_v1 = cgroup_path_of(*text, "memory");
  if (!memory_v1.empty()) {
    auto mem = number_in(cgroup_root + "/memory" + memory_v1 + "/memory.usage_in_bytes");
    if (!mem) return mem.take_error();
    now.memory_bytes = *mem;
    const std::string cpu = cgroup_path_of(*text, "cpuacct");
    if (!cpu.empty()) {
      for (const char* dir : {"/cpu,cpuacct", "/cpuacct"}) {
        if (auto ns = number_in(cgroup_root + dir + cpu + "/cpuacct.usage")) {
          now.cpu_usec = *ns / 1000;
          break;
        }
      }
    }
    return now;
  }
  const std::string v2 = cgroup_path_of(*text, "");
  if (v2.empty()) return make_error("pid " + std::to_string(pid), "is in no cgroup it can read");
  const std::string dir = cgroup_root + v2;
  auto mem = number_in(dir + "/memory.current");
  if (!mem) return mem.take_error();
  now.memory_bytes = *mem;
  auto cpu = number_in(dir + "/cpu.stat", "usage_usec");
  if (!cpu) return cpu.take_error();
  now.cpu_usec = *cpu;
  return now;
}

}  // namespace rf::host
