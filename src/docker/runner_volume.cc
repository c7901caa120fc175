#include "docker/runner_volume.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include "core/io.h"
#include "core/log.h"
#include "docker/helper_container.h"
#include "docker_api/tar_archive.h"
#include "host/seccomp_profile.h"

namespace rf::docker {
namespace {

constexpr const char* kLabelRunnerVolume = "ringfence.runner-volume";
constexpr const char* kReadyFile = "ready";

// Part of the volume's name: a new file layout must never reuse an old volume.
constexpr std::string_view kLayout = "layout 3: tool-runner seccomp.bpf bin/rf-cred ready\n";

std::string sha256_hex(std::string_view a, std::string_view b) {
  unsigned char md[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  for (std::string_view part : {kLayout, a, b}) {
    crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(part.data()),
                              part.size());
  }
  crypto_hash_sha256_final(&st, md);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

std::string RunnerVolumeContents::volume_name() const {
  return "ringfence-runner-" + sha256_hex(runner, seccomp).substr(0, 16);
}

Result<RunnerVolumeContents> load_runner_volume_contents(const std::string& runner_path) {
  RunnerVolumeContents c;
  auto runner = rf::read_file(runner_path);
  if (!runner) return make_error("tool runner " + runner_path, runner.error().to_string());
  c.runner = std::move(*runner);
  auto filters = host::build_seccomp_profile("default");
  if (!filters) return filters.take_error();
  c.seccomp = host::encode_seccomp_filters(*filters);
  return c;
}

Status ensure_runner_volume(ApiClient& api, const RunnerVolumeContents& contents,
                            const std::string& image) {
  const std::string name = contents.volume_name();
  const nlohmann::json body = {{"Name", name}, {"Labels", {{kLabelRunnerVolume, "1"}}}};
  if (auto made = api.call("POST", "/volumes/create", &body); !made) return made.take_error();
  // Look for the ready marker; fill when it is missing. Filling is
  // idempotent (same bytes), so two hosts racing here do no harm.
  auto helper = create_helper(api, image, {"/bin/true"}, {{name, "/.ringfence", false}});
  if (!helper) return make_error("runner volume " + name, helper.error().to_string());
  struct Remove {
    ApiClient& api;
    std::string id;
    ~Remove() {
      warn_unless_ok(remove_container(api, id), "docker: removing helper container " + id);
    }
  } remove{api, *helper};
  auto ready = stat_path(api, *helper, std::string("/.ringfence/") + kReadyFile);
  if (!ready) return ready.take_error();
  if (ready->exists) return ok_status();
  // Root-owned and read-only: the sandbox user can run them, not change them.
  // The marker goes in a second archive, after the files it vouches for.
  // bin/rf-cred, the JIT client, is the runner under another name.
  TarEntry bin{"bin", "", 0555, true};
  TarEntry cred{"bin/rf-cred", "", 0777};
  cred.symlink = "../tool-runner";
  auto files = write_tar(
      {{"tool-runner", contents.runner, 0555}, {"seccomp.bpf", contents.seccomp, 0444}, bin, cred});
  if (!files) return files.take_error();
  auto marker = write_tar({{kReadyFile, name + "\n", 0444}});
  if (!marker) return marker.take_error();
  RequestOptions tar;
  tar.content_type = "application/x-tar";
  for (const std::string* archive : {&*files, &*marker}) {
    auto put =
        api.request("PUT", "/containers/" + *helper + "/archive?path=%2F.ringfence", *archive, tar);
    if (!put) return put.take_error();
    if (put->status != 200) {
      return make_error("runner volume " + name, "copy through the archive API: " +
                                                     std::to_string(put->status) + " " + put->body);
    }
  }
  spdlog::info("docker: runner volume {} filled on {}", name, api.host().url);
  return ok_status();
}

}  // namespace rf::docker
