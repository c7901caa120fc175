#include "docker/image_resolver.h"

#include <spdlog/spdlog.h>

#include "core/json_input.h"
#include "docker/container_spec.h"
#include "docker/helper_container.h"
#include "proto/messages.h"

namespace rf::docker {
namespace {

constexpr std::chrono::milliseconds kVersionTimeout{30'000};

// "name:tag" -> ("name", "tag"); a digest reference keeps its "@sha256:...".
std::pair<std::string, std::string> split_reference(const std::string& ref) {
  if (ref.find('@') != std::string::npos) return {ref, ""};
  const auto slash = ref.rfind('/');
  const auto colon = ref.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    return {ref.substr(0, colon), ref.substr(colon + 1)};
  }
  return {ref, "latest"};
}

Status pull(ApiClient& api, const std::string& ref) {
  const auto [name, tag] = split_reference(ref);
  std::string target = "/images/create?fromImage=" + url_encode(name);
  if (!tag.empty()) target += "&tag=" + url_encode(tag);
  RequestOptions options;
  options.timeout = std::chrono::minutes(30);
  spdlog::info("docker: pulling {} on {}", ref, api.host().url);
  return api.stream_json_lines(
      "POST", target, [](const nlohmann::json&) {}, options);
}

// "ringfence-tool-runner 0.1.0 protocol 0.1.0" -> "0.1.0" (the protocol).
std::string protocol_of(const std::string& version_line) {
  const auto at = version_line.find(" protocol ");
  if (at == std::string::npos) return {};
  std::string v = version_line.substr(at + 10);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

}  // namespace

std::string ImageInfo::digest() const {
  const auto at = repo_digest.find('@');
  return at == std::string::npos ? id : repo_digest.substr(at + 1);
}

Result<ImageInfo> inspect_image(ApiClient& api, const std::string& ref, bool allow_pull) {
  ImageInfo info;
  info.ref = ref;
  auto r = api.request("GET", "/images/" + url_encode(ref) + "/json");
  if (!r) return r.take_error();
  if (r->status == 404) {
    if (!allow_pull) {
      return make_error(ErrorCode::kNotFound, "image " + ref,
                        "not on the daemon at " + api.host().url +
                            " and pulling is off: build or load it there first "
                            "(docker build -t " +
                            ref + " . / docker load)");
    }
    if (auto s = pull(api, ref); !s) {
      return make_error(ErrorCode::kNotFound, "image " + ref,
                        "not on the daemon at " + api.host().url +
                            " and the pull failed: " + s.error().to_string());
    }
    info.pulled = true;
    r = api.request("GET", "/images/" + url_encode(ref) + "/json");
    if (!r) return r.take_error();
  }
  if (r->status != 200) {
    return make_error("docker GET /images/" + ref + "/json",
                      std::to_string(r->status) + " " + r->body);
  }
  auto j = rf::parse_json_or_discarded(r->body);
  if (j.is_discarded() || !j.is_object() || !j.contains("Id") || !j["Id"].is_string()) {
    return make_error("docker GET /images/" + ref + "/json", "unexpected reply");
  }
  info.id = j["Id"].get<std::string>();
  if (j.contains("RepoDigests") && j["RepoDigests"].is_array() && !j["RepoDigests"].empty() &&
      j["RepoDigests"][0].is_string()) {
    info.repo_digest = j["RepoDigests"][0].get<std::string>();
  }
  if (j.contains("Config") && j["Config"].is_object() && j["Config"].contains("WorkingDir") &&
      j["Config"]["WorkingDir"].is_string()) {
    info.working_dir = j["Config"]["WorkingDir"].get<std::string>();
  }
  info.runner_path = kInjectedRunner;
  return info;
}

Status check_image_runner(ApiClient& api, ImageInfo& info) {
  // Does the image ship one? Look without running anything.
  auto probe = create_helper(api, info.id, {"/bin/true"});
  if (!probe) return probe.take_error();
  auto st = stat_path(api, *probe, kImageRunner);
  if (auto gone = remove_container(api, *probe); !gone) {
    spdlog::warn("docker: helper container {}: {}", *probe, gone.error().to_string());
  }
  if (!st) return st.take_error();
  if (!st->exists) return ok_status();
  auto run = run_helper(api, info.id, {kImageRunner, "--version"}, kVersionTimeout);
  if (!run) return run.take_error();
  std::string line = run->out.substr(0, run->out.find('\n'));
  const std::string protocol = protocol_of(line);
  const std::string where = "image " + info.ref + " ships " + kImageRunner;
  if (run->exit_code != 0 || protocol.empty()) {
    return make_error(ErrorCode::kIncompatible, where,
                      "its --version failed (exit " + std::to_string(run->exit_code) +
                          "): remove it from the image, and ringfence injects its own");
  }
  if (auto ok = proto::check_compatible(protocol); !ok) {
    return make_error(ErrorCode::kIncompatible, where,
                      "\"" + line + "\" is outside the host's range (" + ok.error().message +
                          "): update it, or remove it and ringfence injects its own");
  }
  info.own_runner = line;
  info.runner_path = kImageRunner;
  return ok_status();
}

}  // namespace rf::docker
