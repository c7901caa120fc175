#include "worker/artifact_delivery.h"

#include <sodium.h>

#include "artifact/git_push.h"
#include "artifact/s3_client.h"
#include "artifact/workspace.h"
#include "net/egress_policy.h"
#include "redact/stream_redactor.h"
#include "store/workflow_store.h"

namespace rf::worker {
namespace {

using nlohmann::json;
using workflow::ArtifactDest;

Result<std::string> rendered(const ArtifactJob& job, const std::string& text,
                             const std::string& fallback = "") {
  if (text.empty()) return fallback;
  auto r = job.request.render(text);
  if (!r) return make_error("artifact", r.error().to_string());
  return r;
}

std::string key_value(const ArtifactJob& job, const std::string& key) {
  auto it = job.identity_env.find(key);
  return it == job.identity_env.end() ? "" : it->second;
}

// An artifact leaves the sandbox as its output does, but a file cannot be
// redacted without changing what the step made: a workspace any file of which
// (or any name) holds a form of a value the step's sandbox was given (its
// identity, its JIT grants) is not delivered. The error names the file and the
// key, never the value.
Status check_holds_no_secret(const ArtifactJob& job, const artifact::Workspace& ws,
                             const std::string& what) {
  if (!job.patterns || job.patterns->empty()) return ok_status();
  std::vector<redact::Match> found;
  for (const artifact::WorkspaceEntry& e : ws.entries) {
    found.clear();
    job.patterns->find_all(e.path, &found);
    if (!e.directory) job.patterns->find_all(e.content, &found);
    if (found.empty()) continue;
    const auto& p = job.patterns->patterns()[found.front().pattern];
    const std::string name = redact::redact_all(*job.patterns, e.path);
    return make_error(what, name + " holds the value of " + job.patterns->keys()[p.key] +
                                ", a credential of the step: not delivered (keep credentials "
                                "out of " +
                                ws.root + ")");
  }
  return ok_status();
}

Result<artifact::Workspace> workspace(const ArtifactJob& job, const std::string& path,
                                      const std::string& what) {
  auto ws = artifact::read_workspace(*job.sandbox, path, job.def.max_bytes, {".git"});
  if (!ws) return ws;
  RF_TRY(check_holds_no_secret(job, *ws, what));
  return ws;
}

Result<json> push_git(const ArtifactJob& job) {
  auto url = rendered(job, job.def.url);
  if (!url) return url.take_error();
  auto branch = rendered(job, job.def.branch, "main");
  if (!branch) return branch.take_error();
  auto message =
      rendered(job, job.def.message,
               "ringfence: run " + job.request.run_id + ", step " + job.request.step->id);
  if (!message) return message.take_error();
  const std::string token = key_value(job, job.def.token_key);
  if (token.empty()) {
    return make_error("git artifact " + *url,
                      job.def.token_key +
                          " is not in the step's identity (add it to a profile, "
                          "e.g. " +
                          job.def.token_key + "=secret:NAME)");
  }
  artifact::GitTarget t;
  t.url = *url;
  t.branch = *branch;
  t.message = *message;
  auto path = rendered(job, job.def.path, "/workspace");
  if (!path) return path.take_error();
  t.path = *path;
  // The push reads the files inside the sandbox; they are checked here first.
  if (auto ws = workspace(job, t.path, "git artifact " + t.url); !ws) return ws.take_error();
  auto plan = artifact::plan_git_push(t, token);
  if (!plan) return plan.take_error();
  auto ran = job.run(plan->argv, plan->env, t.path);
  for (auto& [k, v] : plan->env) sodium_memzero(v.data(), v.size());
  if (!ran) return make_error("git artifact " + t.url, ran.error().to_string());
  const auto& [exit_code, out] = *ran;
  if (exit_code != 0) {
    return make_error("git artifact " + t.url,
                      "the push exited " + std::to_string(exit_code) +
                          " (its output is in the step's calls: ringfence run show " +
                          job.request.run_id + ")");
  }
  auto commit = artifact::pushed_commit(out);
  if (!commit) return make_error("git artifact " + t.url, "the push printed no commit");
  return json{{"dest", "git"}, {"url", t.url}, {"branch", t.branch}, {"commit", *commit}};
}

Result<json> upload_s3(const ArtifactJob& job, const std::string& path) {
  auto endpoint = rendered(job, job.def.endpoint);
  if (!endpoint) return endpoint.take_error();
  auto bucket = rendered(job, job.def.bucket);
  if (!bucket) return bucket.take_error();
  auto key = rendered(job, job.def.key, job.request.run_id + "/" + job.request.step->id + ".tar");
  if (!key) return key.take_error();
  const std::string what = "s3 artifact s3://" + *bucket + "/" + *key;
  artifact::AwsCredentials creds{
      key_value(job, job.def.access_key_key), key_value(job, job.def.secret_key_key),
      job.def.session_token_key.empty() ? std::string()
                                        : key_value(job, job.def.session_token_key)};
  if (creds.access_key.empty() || creds.secret_key.empty()) {
    return make_error(what, job.def.access_key_key + " and " + job.def.secret_key_key +
                                " must be in the step's identity");
  }
  // The worker uploads; it may go only where the step's sandbox could.
  if (job.spec.network != NetworkPolicy::kProxy) {
    return make_error(what,
                      "the step's sandbox has no network: put the endpoint in its "
                      "sandbox.network.allow rules");
  }
  auto policy = net::EgressPolicy::parse(job.spec.allow);
  if (!policy) return make_error(what, policy.error().to_string());
  http::Options options;
  options.policy = &*policy;
  options.resolve = job.services.resolve;
  auto ws = workspace(job, path, what);
  if (!ws) return ws.take_error();
  auto tar = artifact::workspace_tar(*ws);
  if (!tar) return tar.take_error();
  artifact::S3Target target{*endpoint, *bucket, *key, job.def.region};
  auto up = artifact::s3_put_object(target, creds, *tar, options);
  sodium_memzero(creds.secret_key.data(), creds.secret_key.size());
  if (!up) return make_error(what, up.error().to_string());
  return json{{"dest", "s3"},         {"url", *endpoint + "/" + *bucket + "/" + *key},
              {"bucket", *bucket},    {"key", *key},
              {"etag", up->etag},     {"size", up->size},
              {"sha256", up->sha256}, {"parts", up->parts},
              {"files", ws->files}};
}

}  // namespace

Result<json> deliver_artifact(const ArtifactJob& job) {
  auto path = rendered(job, job.def.path, "/workspace");
  if (!path) return path.take_error();
  Result<json> ref = make_error("artifact", "unknown destination");
  std::optional<std::string> data;
  switch (job.def.dest) {
    case ArtifactDest::kGit:
      ref = push_git(job);
      break;
    case ArtifactDest::kS3:
      ref = upload_s3(job, "/workspace");
      break;
    case ArtifactDest::kLocal: {
      auto ws = workspace(job, "/workspace", "local artifact " + *path);
      if (!ws) return ws.take_error();
      auto copied =
          artifact::copy_to_local(*ws, job.services.artifact_root, job.request.project, *path);
      if (!copied) return copied.take_error();
      (*copied)["dest"] = "local";
      ref = std::move(*copied);
      break;
    }
    case ArtifactDest::kStore: {
      auto ws = workspace(job, *path, "artifact of the store");
      if (!ws) return ws.take_error();
      auto tar = artifact::workspace_tar(*ws);
      if (!tar) return tar.take_error();
      ref = json{{"dest", "none"},
                 {"size", tar->size()},
                 {"sha256", artifact::sha256_hex(*tar)},
                 {"files", ws->files},
                 {"path", *path}};
      data = std::move(*tar);
      break;
    }
  }
  if (!ref) return ref;
  store::ArtifactRow row;
  row.run_id = job.request.run_id;
  row.step_id = job.request.step->id;
  row.attempt = job.request.attempt;
  row.dest = (*ref)["dest"].get<std::string>();
  row.ref_json = ref->dump();
  row.size = data ? static_cast<int64_t>(data->size())
                  : (ref->contains("size")    ? (*ref)["size"].get<int64_t>()
                     : ref->contains("bytes") ? (*ref)["bytes"].get<int64_t>()
                                              : 0);
  row.sha256 = ref->contains("sha256") ? (*ref)["sha256"].get<std::string>() : "";
  row.data = std::move(data);
  RF_TRY(store::WorkflowStore(*job.services.store).put_artifact(row));
  return ref;
}

}  // namespace rf::worker
