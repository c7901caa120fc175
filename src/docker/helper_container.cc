#include "docker/helper_container.h"

#include <unistd.h>

#include "core/base64.h"
#include "core/io.h"
#include "core/json_input.h"
#include "core/log.h"
#include "docker/container_spec.h"
#include "docker/owner.h"
#include "docker_api/stream_demux.h"

namespace rf::docker {
namespace {

// The header of GET/HEAD .../archive: base64 of {"name","size","mode","mtime","linkTarget"}.
Result<nlohmann::json> decode_path_stat(const std::string& b64) {
  const auto out = base64_decode(b64);
  if (!out) return make_error("docker archive stat", "bad base64");
  auto j = rf::parse_json_or_discarded(*out);
  if (j.is_discarded() || !j.is_object()) return make_error("docker archive stat", "bad JSON");
  return j;
}

}  // namespace

std::map<std::string, std::string> owner_labels() {
  const Owner& me = self_owner();
  return {{kLabelWorker, me.host + ":" + std::to_string(me.pid)},
          {kLabelOwnerHost, me.host},
          {kLabelOwnerPid, std::to_string(me.pid)},
          {kLabelOwnerStart, std::to_string(me.start)},
          {kLabelCreated, std::to_string(::time(nullptr))}};
}

Result<std::string> create_helper(ApiClient& api, const std::string& image,
                                  const std::vector<std::string>& entrypoint,
                                  const std::vector<HelperMount>& mounts) {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& mount : mounts) {
    m.push_back({{"Type", "volume"},
                 {"Source", mount.volume},
                 {"Target", mount.target},
                 {"ReadOnly", mount.read_only}});
  }
  auto labels = owner_labels();
  labels[kLabelHelper] = "1";
  const nlohmann::json body = {
      {"Image", image},
      {"Entrypoint", entrypoint},
      {"Cmd", nlohmann::json::array()},
      {"Env", nlohmann::json::array()},
      {"User", "65534:65534"},
      {"AttachStdout", true},
      {"AttachStderr", true},
      {"Tty", false},
      {"Labels", labels},
      {"HostConfig",
       {{"NetworkMode", "none"},
        {"ReadonlyRootfs", true},
        {"CapDrop", {"ALL"}},
        {"SecurityOpt", {"no-new-privileges:true"}},
        {"Memory", 256 << 20},
        {"PidsLimit", 64},
        {"Mounts", m},
        {"LogConfig", {{"Type", "none"}, {"Config", nlohmann::json::object()}}}}}};
  auto made = api.call("POST", "/containers/create", &body);
  if (!made) return made.take_error();
  if (!made->contains("Id") || !(*made)["Id"].is_string()) {
    return make_error("docker POST /containers/create", "the reply has no Id");
  }
  return (*made)["Id"].get<std::string>();
}

Status remove_container(ApiClient& api, const std::string& id) {
  auto r = api.request("DELETE", "/containers/" + id + "?force=1&v=0");
  if (!r) return r.take_error();
  // 404: already gone.
  if (r->status == 204 || r->status == 200 || r->status == 404) return ok_status();
  if (r->status == 409) {
    // The daemon is already removing it (AutoRemove, started as the force kill
    // ended it): done once it is gone, so that nothing lists it after destroy
    // returns (seen under load: DockerBackendTest's inspect still found it).
    auto gone = api.request("POST", "/containers/" + id + "/wait?condition=removed");
    if (!gone) return gone.take_error();
    return ok_status();
  }
  return make_error("docker DELETE /containers/" + id, std::to_string(r->status) + " " + r->body);
}

Result<PathStat> stat_path(ApiClient& api, const std::string& container_id,
                           const std::string& path) {
  auto r = api.request("HEAD", "/containers/" + container_id + "/archive?path=" + url_encode(path));
  if (!r) return r.take_error();
  PathStat st;
  if (r->status == 404) return st;
  if (r->status != 200) {
    return make_error("docker HEAD archive " + path, "status " + std::to_string(r->status));
  }
  auto it = r->headers.find("x-docker-container-path-stat");
  if (it == r->headers.end()) return make_error("docker HEAD archive " + path, "no path stat");
  auto j = decode_path_stat(it->second);
  if (!j) return j.take_error();
  st.exists = true;
  // Go's os.FileMode: the directory bit is 1<<31, permissions in the low 9 bits.
  const uint64_t mode = j->value("mode", uint64_t{0});
  st.directory = (mode & (uint64_t{1} << 31)) != 0;
  st.mode = static_cast<uint32_t>(mode & 07777);
  return st;
}

Result<HelperRun> run_helper(ApiClient& api, const std::string& image,
                             const std::vector<std::string>& entrypoint,
                             std::chrono::milliseconds timeout) {
  auto id = create_helper(api, image, entrypoint);
  if (!id) return id.take_error();
  struct Remove {
    ApiClient& api;
    std::string id;
    ~Remove() {
      warn_unless_ok(remove_container(api, id), "docker: removing helper container " + id);
    }
  } remove{api, *id};
  auto conn = api.hijack("POST", "/containers/" + *id + "/attach?stream=1&stdout=1&stderr=1");
  if (!conn) return conn.take_error();
  if (auto s = api.call("POST", "/containers/" + *id + "/start"); !s) return s.take_error();
  HelperRun run;
  StreamDemux demux([&](int stream, std::string_view data) {
    std::string& to = stream == 2 ? run.err : run.out;
    if (to.size() < (1 << 20)) to.append(data);
  });
  char buf[8192];
  for (;;) {
    auto n = (*conn)->read_some(buf, sizeof buf, timeout);
    if (!n) return n.take_error();
    if (*n == 0) break;
    RF_TRY(demux.feed(std::string_view(buf, *n)));
  }
  RequestOptions wait_options;
  wait_options.timeout = timeout;
  auto waited = api.call("POST", "/containers/" + *id + "/wait", nullptr, wait_options);
  if (!waited) return waited.take_error();
  run.exit_code = waited->value("StatusCode", int64_t{-1});
  return run;
}

}  // namespace rf::docker
