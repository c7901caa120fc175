#include "docker/inventory.h"

#include <ctime>
#include <filesystem>
#include <set>

#include "docker/container_spec.h"
#include "docker/helper_container.h"
#include "docker/owner.h"
#include "host/idmapped_tree.h"

namespace rf::docker {
namespace {

struct Found {
  SandboxInfo info;
  std::string container_id;
};

Result<std::vector<Found>> find(ApiClient& api) {
  // Both sandboxes (ringfence.sandbox) and helpers (ringfence.helper) carry the owner labels.
  const std::string filters = R"({"label":[")" + std::string(kLabelOwnerHost) + R"("]})";
  auto listed = api.call("GET", "/containers/json?all=1&filters=" + url_encode(filters));
  if (!listed) return listed.take_error();
  std::vector<Found> out;
  if (!listed->is_array()) return out;
  const int64_t now = ::time(nullptr);
  for (const auto& c : *listed) {
    if (!c.is_object()) continue;
    std::map<std::string, std::string> labels;
    if (c.contains("Labels") && c["Labels"].is_object()) {
      for (auto it = c["Labels"].begin(); it != c["Labels"].end(); ++it) {
        if (it.value().is_string()) labels[it.key()] = it.value().get<std::string>();
      }
    }
    Found f;
    f.container_id = c.value("Id", std::string());
    auto sandbox = labels.find(kLabelSandbox);
    f.info.id =
        sandbox != labels.end() ? sandbox->second : "helper-" + f.container_id.substr(0, 12);
    f.info.backend = "docker";
    const int64_t created = c.value("Created", now);
    f.info.age = std::chrono::seconds(std::max<int64_t>(0, now - created));
    switch (owner_state(labels)) {
      case OwnerState::kAlive:
        f.info.owner_pid = std::atoi(labels[kLabelOwnerPid].c_str());
        break;
      case OwnerState::kGone:
        f.info.owner_pid = 0;
        break;
      case OwnerState::kUnknown:
        // Another host's: it may well live. Only age can reap it.
        f.info.owner_pid = std::max(1, std::atoi(labels[kLabelOwnerPid].c_str()));
        break;
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

Result<std::vector<SandboxInfo>> list_docker_sandboxes(ApiClient& api) {
  auto found = find(api);
  if (!found) return found.take_error();
  std::vector<SandboxInfo> out;
  for (auto& f : *found) out.push_back(std::move(f.info));
  return out;
}

Result<std::vector<SandboxInfo>> reap_docker_sandboxes(ApiClient& api,
                                                       std::chrono::seconds older_than,
                                                       bool dry_run,
                                                       const std::string& attach_dir) {
  auto found = find(api);
  if (!found) return found.take_error();
  std::vector<SandboxInfo> reaped;
  std::set<std::string> kept;  // ids whose containers stay
  std::string failed;
  auto note = [&](const std::string& what) { failed += (failed.empty() ? "" : "; ") + what; };
  for (auto& f : *found) {
    if (!f.info.orphaned() && f.info.age < older_than) {
      kept.insert(f.info.id);
      continue;
    }
    if (!dry_run) {
      if (auto s = remove_container(api, f.container_id); !s) {
        note(f.info.id + ": " + s.error().to_string());
        kept.insert(f.info.id);
        continue;
      }
      if (auto s = host::detach_trees_under(attach_dir + "/" + f.info.id); !s) {
        note(s.error().to_string());
      }
    }
    reaped.push_back(std::move(f.info));
  }
  // Volume mounts of containers that are gone.
  std::error_code ec;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const auto& entry : std::filesystem::directory_iterator(attach_dir, ec)) {
    const std::string id = entry.path().filename().string();
    if (kept.count(id) != 0 || dry_run) continue;
    std::error_code tec;
    const auto when = std::filesystem::last_write_time(entry.path(), tec);
    if (tec || now - when < std::chrono::minutes(1)) continue;
    if (auto s = host::detach_trees_under(entry.path().string()); !s) note(s.error().to_string());
  }
  if (!failed.empty()) return make_error("reap", failed);
  return reaped;
}

}  // namespace rf::docker
