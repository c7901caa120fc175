#include "local/owner_marker.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <map>

#include "core/io.h"
#include "core/proc_stat.h"
#include "core/unique_fd.h"

namespace rf::local {
namespace {

constexpr size_t kMaxMarker = 4096;

Result<uint64_t> positive(std::string_view key, std::string_view value) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n == 0) {
    return make_error("owner marker", std::string(key) + ": expected a positive number, got \"" +
                                          std::string(value) + "\"");
  }
  return n;
}

}  // namespace

std::string owner_marker_name(const std::string& id) { return id + ".owner"; }

OwnerMarker marker_for_runner(pid_t runner_pid) {
  OwnerMarker m;
  m.owner_pid = ::getpid();
  m.owner_start = start_time_of(m.owner_pid);
  m.runner_pid = runner_pid;
  m.runner_start = start_time_of(runner_pid);
  m.created_at = static_cast<int64_t>(std::time(nullptr));
  return m;
}

std::string format_owner_marker(const OwnerMarker& m) {
  return "owner_pid=" + std::to_string(m.owner_pid) +
         "\nowner_start=" + std::to_string(m.owner_start) +
         "\nrunner_pid=" + std::to_string(m.runner_pid) +
         "\nrunner_start=" + std::to_string(m.runner_start) +
         "\ncreated_at=" + std::to_string(m.created_at) + "\n";
}

Result<OwnerMarker> parse_owner_marker(std::string_view text) {
  std::map<std::string, uint64_t, std::less<>> values;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (nl == std::string_view::npos) return make_error("owner marker", "truncated");
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) return make_error("owner marker", "expected key=value");
    const std::string_view key = line.substr(0, eq);
    auto n = positive(key, line.substr(eq + 1));
    if (!n) return n.take_error();
    if (!values.emplace(std::string(key), *n).second) {
      return make_error("owner marker", std::string(key) + " given twice");
    }
  }
  for (const char* key : {"owner_pid", "owner_start", "runner_pid", "runner_start", "created_at"}) {
    if (!values.contains(key)) return make_error("owner marker", std::string(key) + " missing");
  }
  if (values.size() != 5) return make_error("owner marker", "unknown key");
  OwnerMarker m;
  m.owner_pid = static_cast<pid_t>(values["owner_pid"]);
  m.owner_start = values["owner_start"];
  m.runner_pid = static_cast<pid_t>(values["runner_pid"]);
  m.runner_start = values["runner_start"];
  m.created_at = static_cast<int64_t>(values["created_at"]);
  return m;
}

Status write_owner_marker(const std::string& root, const std::string& id, const OwnerMarker& m) {
  const std::string path = root + "/" + owner_marker_name(id);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return sys_error("owner marker " + path);
  if (auto s = write_all(fd.get(), format_owner_marker(m)); !s) {
    return make_error("owner marker " + path, s.error().to_string());
  }
  return ok_status();
}

Result<OwnerMarker> read_owner_marker(int root_fd, const std::string& id) {
  const std::string name = owner_marker_name(id);
  UniqueFd fd(::openat(root_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return sys_error("owner marker " + name);
  std::string text(kMaxMarker, '\0');
  ssize_t n;
  while ((n = ::read(fd.get(), text.data(), text.size())) < 0 && errno == EINTR) {
  }
  if (n < 0) return sys_error("owner marker " + name);
  text.resize(static_cast<size_t>(n));
  return parse_owner_marker(text);
}

Status remove_owner_marker(int root_fd, const std::string& id) {
  const std::string name = owner_marker_name(id);
  if (::unlinkat(root_fd, name.c_str(), 0) != 0 && errno != ENOENT)
    return sys_error("owner marker " + name);
  return ok_status();
}

Status remove_owner_marker(const std::string& root, const std::string& id) {
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_fd) return errno == ENOENT ? ok_status() : sys_error("scratch root " + root);
  return remove_owner_marker(root_fd.get(), id);
}

}  // namespace rf::local
