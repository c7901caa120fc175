#include "docker/docker_sandbox.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <sstream>

#include "core/io.h"
#include "core/log.h"
#include "docker/helper_container.h"
#include "host/setup_step.h"

namespace rf::docker {
namespace {

constexpr std::chrono::milliseconds kHandshakeTimeout{30'000};
constexpr std::chrono::milliseconds kLivenessEvery{3'000};

// The cgroup path of `pid` in the hierarchy that holds the memory controller
// (v1), or in the unified one (v2): "/docker/<id>".
std::string cgroup_path_of(pid_t pid, host::CgroupVersion version) {
  auto text = rf::read_file("/proc/" + std::to_string(pid) + "/cgroup");
  if (!text) return {};
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':');
    const auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (version == host::CgroupVersion::kV2 && line.compare(0, 3, "0::") == 0) return path;
    if (version == host::CgroupVersion::kV1) {
      std::istringstream cs(controllers);
      std::string c;
      while (std::getline(cs, c, ',')) {
        if (c == "memory") return path;
      }
    }
  }
  return {};
}

}  // namespace

Status DockerSandbox::start(const ContainerPlan& plan, std::vector<StepTiming> host_steps,
                            const host::CgroupLayout* cgroups) {
  timings_ = std::move(host_steps);
  image_id_ = plan.image;
  takes_credentials_ = serves_credentials(spec_, plan);
  host::StepTimer timer(&timings_);
  const nlohmann::json body = container_create_body(spec_, plan);
  auto made = timer.run("create container", [&] {
    return api_->call("POST", "/containers/create?name=" + url_encode(container_name(spec_)),
                      &body);
  });
  if (!made) return host::setup_error("create container", made.error());
  if (!made->contains("Id") || !(*made)["Id"].is_string()) {
    return host::setup_error("create container", make_error("docker", "the reply has no Id"));
  }
  container_id_ = (*made)["Id"].get<std::string>();
  // Attach before start, or the runner's hello could be missed.
  auto conn = timer.run("attach", [&] {
    return api_->hijack(
        "POST", "/containers/" + container_id_ + "/attach?stream=1&stdin=1&stdout=1&stderr=1");
  });
  if (!conn) return host::setup_error("attach", conn.error());
  auto channel = AttachChannel::start(std::move(*conn), spec_.id);
  if (!channel) return host::setup_error("attach", channel.error());
  channel_ = std::move(*channel);
  auto started = timer.run("start container", [&] {
    return api_->call("POST", "/containers/" + container_id_ + "/start");
  });
  if (!started) return host::setup_error("start container", started.error());
  if (cgroups) {
    // A local daemon: the runner's host pid, and the container's cgroup for
    // the per-call counters (OOM kills, pids limit hits, peak memory).
    auto found = timer.run("find cgroup", [&]() -> Status {
      auto info = api_->call("GET", "/containers/" + container_id_ + "/json");
      if (!info) return info.take_error();
      host_pid_ = (*info)["State"].value("Pid", 0);
      return find_cgroup(*cgroups);
    });
    if (!found) spdlog::warn("{}: no cgroup counters: {}", spec_.id, found.error().to_string());
  }
  runner_ = std::make_unique<host::RunnerClient>(channel_->take_client_fd());
  // dockerd can keep the attach stream open after the container died (killed
  // while it started): a call waiting on silence asks the daemon every few seconds.
  runner_->set_liveness_check([this] { return ended_reason(); }, kLivenessEvery);
  if (starts_probe(spec_, plan)) expect_start_probe(/*inside_only=*/false);
  if (auto s = timer.run("handshake", [&] { return runner_->handshake(kHandshakeTimeout); }); !s) {
    if (auto why = ended_reason()) return host::setup_error("handshake", *why);
    return host::setup_error("handshake", s.error());
  }
  return ok_status();
}

Status DockerSandbox::find_cgroup(const host::CgroupLayout& layout) {
  if (host_pid_ <= 0) return make_error("cgroup", "the container has no host pid");
  std::string path = cgroup_path_of(host_pid_, layout.version);
  while (!path.empty() && path.front() == '/') path.erase(0, 1);
  const auto slash = path.rfind('/');
  if (path.empty() || slash == std::string::npos) {
    return make_error("cgroup", "pid " + std::to_string(host_pid_) + " is in no nested cgroup");
  }
  auto cg = host::open_cgroup(layout, path.substr(0, slash), path.substr(slash + 1));
  if (!cg) return cg.take_error();
  cgroup_ = std::move(*cg);
  return ok_status();
}

std::optional<Error> DockerSandbox::ended_reason() {
  if (container_id_.empty()) return std::nullopt;
  auto info = api_->call("GET", "/containers/" + container_id_ + "/json");
  std::string what;
  if (!info) {
    // AutoRemove: a container that ended may already be gone.
    if (info.error().code != ErrorCode::kNotFound) return std::nullopt;
    what = "container is gone";
  } else {
    const auto& state = (*info)["State"];
    if (state.value("Running", false)) return std::nullopt;
    what = "container exited with code " + std::to_string(state.value("ExitCode", -1));
    if (state.value("OOMKilled", false)) what += " (OOM killed)";
  }
  const std::string tail = channel_ ? channel_->stderr_tail() : std::string();
  if (!tail.empty()) what += "; tool runner said: " + tail;
  return make_error("sandbox ended", what);
}

DockerSandbox::~DockerSandbox() { warn_unless_ok(destroy(), "destroying " + spec_.id); }

Status DockerSandbox::destroy() {
  std::lock_guard lock(mu_);
  if (destroyed_) return ok_status();
  destroyed_ = true;
  if (runner_) runner_->fail_all(make_error("sandbox", "destroyed"));
  Status result;
  // A paused container is unpaused first (the daemon refuses to kill one).
  if (paused_ && !container_id_.empty()) {
    (void)api_->request("POST", "/containers/" + container_id_ + "/unpause");
    paused_ = false;
  }
  // Kill and remove in one request; the daemon ends every process in it.
  if (!container_id_.empty()) result = remove_container(*api_, container_id_);
  if (channel_) channel_->close();
  volume_trees_.clear();  // after the container: nothing holds them now
  egress_.reset();
  slot_.release();
  return result;
}

Status DockerSandbox::set_paused(bool paused) {
  std::lock_guard lock(mu_);
  if (destroyed_) return paused ? make_error("pause " + id(), "it is gone") : ok_status();
  if (paused_ == paused) return ok_status();
  const char* action = paused ? "pause" : "unpause";
  auto r = api_->request("POST", "/containers/" + container_id_ + "/" + action);
  if (!r) return r.take_error();
  if (r->status != 204) {
    return make_error(
        std::string(paused ? "pause " : "resume ") + id(),
        "the daemon answered " + std::to_string(r->status) + ": " + r->body.substr(0, 200));
  }
  paused_ = paused;
  return ok_status();
}

Status DockerSandbox::with_egress(const std::function<Status(host::EgressLease&)>& fn) {
  std::lock_guard lock(mu_);
  if (destroyed_ || !egress_) return make_error("edge credentials", "sandbox " + id() + " is gone");
  return fn(*egress_);
}

}  // namespace rf::docker
