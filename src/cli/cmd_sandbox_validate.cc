// `ringfence sandbox validate IMAGE [--backend docker|native]`: does an image
// meet the image contract (docs/images.md)? Six checks, one ✓/✗ line each,
// every ✗ with what to do, then PASS or FAIL (exit 0 or 1).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "cli/backends.h"
#include "cli/commands.h"
#include "proto/messages.h"
#include "sandbox/sandbox.h"

namespace rf::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ValidateFlags {
  std::string image;
  std::string backend = "docker";
  std::string docker_host;
};

// What to do when the image's own tool runner cannot serve.
std::string runner_remedy() {
  return "update /usr/local/bin/ringfence-tool-runner in the image to one that speaks the "
         "host's protocol (" +
         proto::compatible_range() + "), or remove it: ringfence then injects its own";
}

// What to do when the image cannot be had, by why.
std::string image_remedy(const Error& e, const std::string& image) {
  switch (e.code) {
    case ErrorCode::kUnavailable:
      return "start the Docker daemon, or point --docker-host / DOCKER_HOST at one that runs";
    case ErrorCode::kNotFound:
      return "build or load the image on that daemon (docker build -t " + image +
             " . / docker load -i image.tar), or check its name";
    default:
      return "check the image's name and the daemon (ringfence sandbox doctor --backend docker)";
  }
}

struct Line {
  std::string text;  // "container starts (312 ms)"
  bool ok = false;
  std::string remedy;  // when !ok
};

struct Collect : OutputSink {
  std::string out, err;
  void on_stdout(std::string_view d) override { out.append(d); }
  void on_stderr(std::string_view d) override { err.append(d); }
};

long ms_since(Clock::time_point start) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

std::string first_line(const std::string& text) {
  std::string s = text.substr(0, text.find('\n'));
  return s.size() > 300 ? s.substr(0, 300) + "..." : s;
}

std::string random_token() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// Runs `argv`; the call's result, or an error line.
Result<ExecResult> call(Sandbox& sb, std::vector<std::string> argv, Collect& out) {
  ExecCall c;
  c.argv = std::move(argv);
  c.timeout = std::chrono::seconds(30);
  return sb.exec(c, out);
}

std::vector<Line> validate(Backend& backend, const ValidateFlags& f) {
  std::vector<Line> lines;
  const std::string skipped = "not checked: the container did not start";
  // 1. The image is there (or was pulled), and what it is.
  auto report = backend.prepare_image(f.image);
  if (!report) {
    lines.push_back({"image present or pulled: " + report.error().to_string(), false,
                     image_remedy(report.error(), f.image)});
  } else {
    lines.push_back({"image present or pulled (" + report->description + ")", true, ""});
  }
  // 2. A sandbox starts from it, with every bound on.
  SandboxSpec spec;
  spec.backend = backend.kind();
  spec.image = f.image;
  spec.limits.timeout = std::chrono::seconds(30);
  const auto t0 = Clock::now();
  auto sb = report ? backend.create(spec) : Result<std::unique_ptr<Sandbox>>(report.error());
  const long start_ms = ms_since(t0);
  if (!sb && report && !report->runner_problem.empty()) {
    lines.push_back({"container starts: not started, the image's own runner cannot serve", false,
                     "see the next line"});
    lines.push_back({"tool-runner --version: " + report->runner_problem, false, runner_remedy()});
    lines.push_back({"bash echo round-trip", false, skipped});
    lines.push_back({"/workspace writable", false, skipped});
    lines.push_back({"env scrub: HOST_SECRET not visible", false, skipped});
    return lines;
  }
  if (!sb) {
    const std::string why = sb.error().to_string();
    const bool runner = sb.error().code == ErrorCode::kIncompatible;
    lines.push_back({"container starts: " + (report ? why : "no image"), false,
                     !report  ? "fix the image first (above)"
                     : runner ? runner_remedy()
                              : "run `ringfence sandbox doctor --backend " + f.backend +
                                    "`; the image needs a static-friendly Linux userland for the "
                                    "injected runner (x86_64)"});
    lines.push_back({"tool-runner --version", false, skipped});
    lines.push_back({"bash echo round-trip", false, skipped});
    lines.push_back({"/workspace writable", false, skipped});
    lines.push_back({"env scrub: HOST_SECRET not visible", false, skipped});
    return lines;
  }
  Sandbox& box = **sb;
  lines.push_back({"container starts (" + std::to_string(start_ms) + " ms)", true, ""});
  // 3. The runner that answered, and that it is in range (the handshake checked).
  const std::string runner = box.runner_version();
  lines.push_back({"tool-runner --version \u2192 " + (runner.empty() ? "?" : runner) +
                       " (compatible" +
                       (report->runner == "injected" ? ", injected" : ", the image's own") + ")",
                   !runner.empty(), "the runner did not say its version: rebuild it"});
  // 4. bash, which agents' shell calls use.
  {
    Collect out;
    const auto t = Clock::now();
    auto r = call(box, {"bash", "-c", "echo ringfence-ok"}, out);
    const long ms = ms_since(t);
    if (r && r->exit_code == 0 && out.out == "ringfence-ok\n") {
      lines.push_back({"bash echo round-trip \u2192 " + std::to_string(ms) + " ms", true, ""});
    } else {
      const std::string what = !r ? r.error().to_string()
                               : r->exit_code == 127
                                   ? "bash not found"
                                   : "exit " + std::to_string(r->exit_code) + ": " +
                                         first_line(out.err.empty() ? out.out : out.err);
      lines.push_back({"bash echo round-trip: " + what, false,
                       "install bash in the image (apt-get install bash / apk add bash): "
                       "agents' shell tool calls run `bash -c`"});
    }
  }
  // 5. /workspace: in the image itself, and writable at run time.
  {
    Collect out;
    auto r = call(
        box, {"/bin/sh", "-c", "echo x > /workspace/.rf-validate && rm /workspace/.rf-validate"},
        out);
    const bool writes = r && r->exit_code == 0;
    if (report->has_workspace && !*report->has_workspace) {
      lines.push_back({"/workspace writable: the image has no /workspace directory", false,
                       "add `RUN mkdir -p /workspace` and `WORKDIR /workspace` to the image's "
                       "Dockerfile (the image contract, docs/images.md)"});
    } else if (!writes) {
      lines.push_back({"/workspace writable: " + (r ? first_line(out.err) : r.error().to_string()),
                       false,
                       "the image must let ringfence mount a writable /workspace: make it an "
                       "empty directory, not a file or a symlink"});
    } else {
      lines.push_back({"/workspace writable", true, ""});
    }
  }
  // 6. Nothing of the host's environment reaches a call.
  {
    const std::string secret = "rf-validate-" + random_token();
    ::setenv("HOST_SECRET", secret.c_str(), 1);
    Collect out;
    auto r =
        call(box, {"/bin/sh", "-c", "env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'"}, out);
    ::unsetenv("HOST_SECRET");
    const bool leaked = out.out.find(secret) != std::string::npos ||
                        out.out.find("HOST_SECRET") != std::string::npos;
    if (!r) {
      lines.push_back({"env scrub: " + r.error().to_string(), false, "see the lines above"});
    } else if (leaked) {
      lines.push_back({"env scrub: HOST_SECRET is visible inside", false,
                       "this is a ringfence bug: report it with `ringfence --version`"});
    } else {
      lines.push_back({"env scrub: HOST_SECRET not visible", true, ""});
    }
  }
  if (auto gone = box.destroy(); !gone) {
    lines.push_back({"sandbox destroyed: " + gone.error().to_string(), false,
                     "run `ringfence sandbox reap --older-than 0s --backend " + f.backend + "`"});
  }
  return lines;
}

int run_validate(const ValidateFlags& f) {
  auto kind = parse_backend_kind(f.backend);
  if (!kind || *kind == BackendKind::kLocal) {
    std::fprintf(stderr,
                 "ringfence: sandbox validate: --backend: expected docker, remotedocker or "
                 "native, got \"%s\"\n",
                 f.backend.c_str());
    return kExitUsage;
  }
  register_backends({f.docker_host, {}});
  auto backend = make_backend(*kind);
  if (!backend) {
    std::printf("\u2717 image present or pulled: %s\n", backend.error().to_string().c_str());
    std::printf("    fix: run `ringfence sandbox doctor --backend %s`\nFAIL\n", f.backend.c_str());
    return 1;
  }
  const auto lines = validate(**backend, f);
  bool pass = true;
  for (const auto& l : lines) {
    std::printf("%s %s\n", l.ok ? "\u2713" : "\u2717", l.text.c_str());
    if (!l.ok) std::printf("    fix: %s\n", l.remedy.c_str());
    pass = pass && l.ok;
  }
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

void add_sandbox_validate_command(CLI::App* sandbox, CommandResult* result) {
  auto f = std::make_shared<ValidateFlags>();
  auto* cmd = sandbox->add_subcommand(
      "validate", "Check that an image meets the image contract (docs/images.md): six checks");
  cmd->add_option("image", f->image, "The image, e.g. python:3.12-slim")->required();
  cmd->add_option("--backend", f->backend, "docker (default), remotedocker or native (image host)")
      ->default_val("docker");
  cmd->add_option("--docker-host", f->docker_host,
                  "The Docker daemon (default $DOCKER_HOST, else unix:///var/run/docker.sock)");
  cmd->callback([f, result] { result->exit_code = run_validate(*f); });
}

}  // namespace rf::cli
