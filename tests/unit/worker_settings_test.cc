#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

#include "cli/worker_flags.h"
#include "worker/config_file.h"
#include "worker/settings.h"

namespace rf::worker {
namespace {

const std::string kPath = "/etc/rf/worker.yaml";
const std::string kHome = "/home/u";

// Parses `args` as the flags of a command, the way `worker config` does.
WorkerFlags parse_flags(std::vector<std::string> args) {
  WorkerFlags flags;
  CLI::App app;
  cli::add_worker_settings_flags(&app, &flags);
  args.insert(args.begin(), "ringfence");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return flags;
}

SettingsLayer flag_layer_of(std::vector<std::string> args) {
  auto layer = flag_layer(parse_flags(std::move(args)));
  EXPECT_TRUE(layer.ok()) << layer.error().to_string();
  return layer.ok() ? *layer : SettingsLayer{};
}

SettingsLayer config_layer_of(const std::string& yaml) {
  auto layer = parse_config_yaml(yaml, kPath);
  EXPECT_TRUE(layer.ok()) << layer.error().to_string();
  return layer.ok() ? *layer : SettingsLayer{};
}

std::string config_error(const std::string& yaml, const std::string& path = kPath) {
  auto layer = parse_config_yaml(yaml, path);
  return layer.ok() ? "(no error)" : layer.error().to_string();
}

std::string flag_error(std::vector<std::string> args) {
  auto layer = flag_layer(parse_flags(std::move(args)));
  return layer.ok() ? "(no error)" : layer.error().to_string();
}

WorkerSettings merged(std::vector<std::string> args, const std::string& yaml) {
  return merge_settings(flag_layer_of(std::move(args)), config_layer_of(yaml),
                        Resolved<std::string>{yaml.empty() ? "" : kPath}, kHome);
}

std::string validation_error(std::vector<std::string> args, const std::string& yaml) {
  Status st = validate_settings(merged(std::move(args), yaml));
  return st.ok() ? "(no error)" : st.error().to_string();
}

// A scratch directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rf-worker-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string write(const std::string& rel, const std::string& text) const {
    const std::string p = path_ + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string path_;
};

// --- precedence: flag > config > project environment default > default ---

TEST(WorkerSettings, ModeFromFlagBeatsConfigAndEnvironment) {
  const WorkerSettings s =
      merged({"--sandbox-mode", "per_tool", "--project-environment", "development"},
             "sandbox:\n  mode: per_run\n");
  EXPECT_EQ(s.mode.value, SandboxMode::kPerTool);
  EXPECT_EQ(s.mode.source, "flag --sandbox-mode");
}

TEST(WorkerSettings, ModeFromConfigBeatsEnvironment) {
  const WorkerSettings s =
      merged({}, "project_environment: production\nsandbox:\n  mode: per_tool\n");
  EXPECT_EQ(s.mode.value, SandboxMode::kPerTool);
  EXPECT_EQ(s.mode.source, "config /etc/rf/worker.yaml:3");
}

TEST(WorkerSettings, ModeFromEachProjectEnvironment) {
  WorkerSettings s = merged({"--project-environment", "production"}, "");
  EXPECT_EQ(s.mode.value, SandboxMode::kPerRun);
  EXPECT_EQ(s.mode.source, "project environment production");
  s = merged({"--project-environment", "staging"}, "");
  EXPECT_EQ(s.mode.value, SandboxMode::kPerTool);
  EXPECT_EQ(s.mode.source, "project environment staging");
  s = merged({}, "project_environment: development\n");
  EXPECT_EQ(s.mode.value, SandboxMode::kNone);
  EXPECT_EQ(s.mode.source, "project environment development");
  EXPECT_EQ(s.project_environment.source, "config /etc/rf/worker.yaml:1");
}

TEST(WorkerSettings, EnvironmentFlagBeatsEnvironmentInConfig) {
  const WorkerSettings s =
      merged({"--project-environment", "staging"}, "project_environment: production\n");
  EXPECT_EQ(s.project_environment.value, ProjectEnvironment::kStaging);
  EXPECT_EQ(s.project_environment.source, "flag --project-environment");
  EXPECT_EQ(s.mode.value, SandboxMode::kPerTool);
  EXPECT_EQ(s.mode.source, "project environment staging");
}

TEST(WorkerSettings, ModeDefaultsToNone) {
  const WorkerSettings s = merged({}, "");
  EXPECT_EQ(s.mode.value, SandboxMode::kNone);
  EXPECT_EQ(s.mode.source, "default");
  EXPECT_EQ(s.project_environment.value, ProjectEnvironment::kNone);
  EXPECT_EQ(s.project_environment.source, "default");
}

TEST(WorkerSettings, CpuAndMemPrecedence) {
  const std::string yaml = "sandbox:\n  cpu: 3\n  mem: 2g\n";
  WorkerSettings s = merged({"--sandbox-cpu", "2", "--sandbox-mem", "4g"}, yaml);
  EXPECT_EQ(s.limits.value.cpus, 2.0);
  EXPECT_EQ(s.limits.source_of("cpu"), "flag --sandbox-cpu");
  EXPECT_EQ(s.limits.value.memory_bytes, 4ull << 30);
  EXPECT_EQ(s.limits.source_of("mem"), "flag --sandbox-mem");

  s = merged({}, yaml);
  EXPECT_EQ(s.limits.value.cpus, 3.0);
  EXPECT_EQ(s.limits.source_of("cpu"), "config /etc/rf/worker.yaml:2");
  EXPECT_EQ(s.limits.value.memory_bytes, 2ull << 30);
  EXPECT_EQ(s.limits.source_of("mem"), "config /etc/rf/worker.yaml:3");

  // A project environment has a default for the mode only.
  s = merged({"--project-environment", "production"}, "");
  EXPECT_EQ(s.limits.value.cpus, 1.0);
  EXPECT_EQ(s.limits.source_of("cpu"), "default");
  EXPECT_EQ(s.limits.value.memory_bytes, 512ull << 20);
  EXPECT_EQ(s.limits.source_of("mem"), "default");
}

TEST(WorkerSettings, BuiltInDefaults) {
  const WorkerSettings s = merged({}, "");
  EXPECT_EQ(s.backend.value, BackendKind::kNative);
  EXPECT_EQ(s.image.value, "host");
  EXPECT_EQ(s.network.value, NetworkPolicy::kNone);
  EXPECT_EQ(s.limits.value.pids, 256u);
  EXPECT_EQ(s.limits.value.disk_bytes, 1ull << 30);
  EXPECT_EQ(s.limits.value.timeout, std::chrono::seconds(30));
  EXPECT_EQ(s.idle_timeout.value, std::chrono::minutes(10));
  EXPECT_TRUE(s.fallback_backends.value.empty());
  EXPECT_EQ(s.pool_name.value, "default");
  EXPECT_EQ(s.pool_target.value, 0u);
  EXPECT_EQ(s.pool_max.value, 4u);
  EXPECT_EQ(s.state_dir.value, "/home/u/.ringfence/state");
  EXPECT_TRUE(validate_settings(s).ok());
}

TEST(WorkerSettings, OnlyGivenFlagsCountAsFlags) {
  const WorkerFlags flags = parse_flags({"--sandbox-mem", "1g"});
  EXPECT_EQ(flags.given.size(), 1u);
  EXPECT_EQ(flags.given.at("--sandbox-mem"), "1g");
  EXPECT_FALSE(flags.config.has_value());
  const SettingsLayer layer = flag_layer_of({"--sandbox-mem", "1g"});
  EXPECT_TRUE(layer.limits.count("mem"));
  EXPECT_FALSE(layer.limits.count("cpu"));
  EXPECT_FALSE(layer.mode.has_value());
  EXPECT_FALSE(layer.pool_name.has_value());
  const WorkerSettings s = merged({"--sandbox-mem", "1g"}, "");
  EXPECT_EQ(s.limits.source_of("mem"), "flag --sandbox-mem");
  EXPECT_EQ(s.limits.source_of("cpu"), "default");
  // A flag given with the default's value is still a flag.
  EXPECT_EQ(merged({"--sandbox-cpu", "1"}, "").limits.source_of("cpu"), "flag --sandbox-cpu");
}

TEST(WorkerSettings, ExplainLines) {
  const WorkerSettings s =
      merged({"--project-environment", "production", "--sandbox-mem", "4g", "--pool", "gpu"},
             "sandbox:\n  cpu: 2\n  fallback_backends: [native]\npool:\n  target: 2\n");
  const std::vector<std::string> want = {
      "config file: /etc/rf/worker.yaml (default)",
      "project_environment: production (flag --project-environment)",
      "project: (none) (default)",
      "state_dir: /home/u/.ringfence/state (default)",
      "store: /home/u/.ringfence/state/ringfence.db (default)",
      "host_id: (the hostname) (default)",
      "labels: (none) (default)",
      "sandbox.mode: per_run (project environment production)",
      "sandbox.backend: native (default)",
      "sandbox.docker_host: (none) (default)",
      "sandbox.fallback_backends: [native] (config /etc/rf/worker.yaml:3)",
      "sandbox.image: host (default)",
      "sandbox.network: none (default)",
      "sandbox.allow: [] (default)",
      "sandbox.proxy_resolve: [] (default)",
      "sandbox.egress_ca_file: (none) (default)",
      "sandbox.allow_host_network: false (default)",
      "sandbox.allow_identity_without_sandbox: false (default)",
      "sandbox.cpu: 2 (config /etc/rf/worker.yaml:2)",
      "sandbox.mem: 4g (flag --sandbox-mem)",
      "sandbox.pids: 256 (default)",
      "sandbox.disk: 1g (default)",
      "sandbox.timeout: 30s (default)",
      "sandbox.output_limit: 16m (default)",
      "sandbox.nofile: 1024 (default)",
      "sandbox.egress_connections: 64 (default)",
      "sandbox.egress_bytes: 0 (default)",
      "sandbox.idle_timeout: 10m (default)",
      "pool.name: gpu (flag --pool)",
      "pool.target: 2 (config /etc/rf/worker.yaml:5)",
      "pool.max: 4 (default)",
  };
  EXPECT_EQ(s.explain(), want);
}

TEST(WorkerSettings, FullExampleConfig) {
  const std::string yaml = R"(project_environment: production   # production | staging | development
project: acme                       # per_worker only
state_dir: /var/lib/ringfence
sandbox:
  mode: per_worker
  backend: docker
  fallback_backends: [native, local]
  image: python:3.12-slim
  network: none
  cpu: 1.5
  mem: 4g
  pids: 512
  disk: 10g
  timeout: 45s
  idle_timeout: 5m
pool:
  name: default
  target: 2
  max: 8
)";
  const WorkerSettings s = merged({}, yaml);
  EXPECT_TRUE(validate_settings(s).ok()) << validate_settings(s).error().to_string();
  EXPECT_EQ(s.project.value, "acme");
  EXPECT_EQ(s.state_dir.value, "/var/lib/ringfence");
  EXPECT_EQ(s.mode.value, SandboxMode::kPerWorker);
  EXPECT_EQ(s.mode.source, "config /etc/rf/worker.yaml:5");
  EXPECT_EQ(s.fallback_backends.value,
            (std::vector<BackendKind>{BackendKind::kNative, BackendKind::kLocal}));
  EXPECT_EQ(s.pool_max.source, "config /etc/rf/worker.yaml:19");
  const SandboxSpec spec = s.sandbox_spec();
  EXPECT_EQ(spec.backend, BackendKind::kDocker);
  EXPECT_EQ(spec.image, "python:3.12-slim");
  EXPECT_EQ(spec.network, NetworkPolicy::kNone);
  EXPECT_EQ(spec.limits.cpus, 1.5);
  EXPECT_EQ(spec.limits.memory_bytes, 4ull << 30);
  EXPECT_EQ(spec.limits.pids, 512u);
  EXPECT_EQ(spec.limits.disk_bytes, 10ull << 30);
  EXPECT_EQ(spec.limits.timeout, std::chrono::seconds(45));
  EXPECT_EQ(s.idle_timeout.value, std::chrono::minutes(5));
}

TEST(WorkerSettings, YamlRoundTrip) {
  const WorkerSettings s =
      merged({"--project-environment", "staging", "--project", "acme", "--sandbox-cpu", "0.5",
              "--sandbox-fallback-backends", "docker,local"},
             "");
  const WorkerSettings back = merged({}, settings_to_yaml(s));
  for (size_t i = 1; i < s.explain().size(); ++i) {
    const std::string a = s.explain()[i], b = back.explain()[i];
    EXPECT_EQ(a.substr(0, a.rfind(" (")), b.substr(0, b.rfind(" (")));
  }
}

// The store (issue 16): the state dir's SQLite file unless the flag or the
// file names one; a password only from the file, and shown by no line.
TEST(WorkerSettings, TheStoreComesFromTheFlagOrTheFileAndHidesItsPassword) {
  EXPECT_EQ(merged({}, "").store_target(), "/home/u/.ringfence/state/ringfence.db");
  WorkerSettings s = merged({}, "store: postgres://rf:pw@db/rf\n");
  EXPECT_EQ(s.store_target(), "postgres://rf:pw@db/rf");
  EXPECT_TRUE(validate_settings(s).ok());
  for (const std::string& line : s.explain()) EXPECT_EQ(line.find(":pw@"), std::string::npos);
  EXPECT_NE(settings_to_yaml(s).find("store: postgres://rf:***@db/rf"), std::string::npos);
  s = merged({"--store", "postgresql:///rf?host=/run/pg"}, "store: /var/lib/rf/other.db\n");
  EXPECT_EQ(s.store_target(), "postgresql:///rf?host=/run/pg");
  EXPECT_EQ(s.store.source, "flag --store");
  s = merged({"--store", "postgres://rf:pw@db/rf"}, "");
  auto refused = validate_settings(s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().to_string(),
            "--store: the URI holds a password, which any process can read in argv; put it in "
            "the config file (store:) or in libpq's PGPASSFILE");
  EXPECT_EQ(config_error("store: relative.db\n"),
            std::string(kPath) +
                ":1: store: expected an absolute SQLite file path (PATH or sqlite:PATH) or a "
                "postgres:// URI, got "
                "\"relative.db\"");
}

TEST(WorkerSettings, StateDirTildeIsHome) {
  EXPECT_EQ(merged({}, "state_dir: ~/rf\n").state_dir.value, "/home/u/rf");
}

// --- config file errors: file:line: key: message ---

// The JIT policy file (issue 13): identity.jit_policy, or --jit-policy, which wins.
TEST(WorkerConfig, TheJitPolicyComesFromTheFileOrTheFlag) {
  const std::string yaml = "identity:\n  jit_policy: /etc/rf/jit.yaml\n";
  WorkerSettings s = merged({}, yaml);
  EXPECT_EQ(s.jit_policy.value, "/etc/rf/jit.yaml");
  EXPECT_NE(s.jit_policy.source.find(std::string(kPath) + ":2"), std::string::npos)
      << s.jit_policy.source;
  s = merged({"--jit-policy", "/tmp/other.yaml"}, yaml);
  EXPECT_EQ(s.jit_policy.value, "/tmp/other.yaml");
  EXPECT_EQ(s.jit_policy.source, "flag --jit-policy");
  EXPECT_TRUE(merged({}, "").jit_policy.value.empty());
  EXPECT_EQ(config_error("identity:\n  jit: x\n"),
            std::string(kPath) + ":2: identity.jit: unknown key (did you mean \"jit_policy\"?)");
}

TEST(WorkerConfig, UnknownTopLevelKey) {
  EXPECT_EQ(config_error("colour: red\n"),
            "/etc/rf/worker.yaml:1: colour: unknown key (allowed: project_environment, project, "
            "state_dir, store, host_id, labels, sandbox, pool, identity)");
  EXPECT_EQ(config_error("pool:\n  max: 3\nprojects: acme\n"),
            "/etc/rf/worker.yaml:3: projects: unknown key (did you mean \"project\"?)");
}

TEST(WorkerConfig, UnknownNestedKeyWithItsLine) {
  EXPECT_EQ(config_error("project_environment: staging\nstate_dir: /x\n\n# limits\nsandbox:\n"
                         "  mem: 1g\n  cpus: 2\n"),
            "/etc/rf/worker.yaml:7: sandbox.cpus: unknown key (did you mean \"cpu\"?)");
  EXPECT_EQ(config_error("pool:\n  size: 3\n"),
            "/etc/rf/worker.yaml:2: pool.size: unknown key (allowed: name, target, max)");
}

// Issue 40: a config file that is a stray ',' made yaml-cpp's LoadAll read
// empty documents until memory ran out (std::bad_alloc).
TEST(WorkerConfig, AFileThatIsNoYamlIsRefusedNotReadForever) {
  EXPECT_EQ(config_error(",\n"), "/etc/rf/worker.yaml:1: not YAML: unexpected text");
  EXPECT_EQ(config_error("sandbox:\n  mem: 1g\n---\nstate_dir: /x\n"),
            "/etc/rf/worker.yaml:3: expected one YAML document, got more");
}

TEST(WorkerConfig, WrongTypes) {
  EXPECT_EQ(config_error("sandbox:\n  mem: [1g, 2g]\n"),
            "/etc/rf/worker.yaml:2: sandbox.mem: expected a size such as 512m, got a list");
  EXPECT_EQ(config_error("sandbox:\n  cpu:\n    max: 2\n"),
            "/etc/rf/worker.yaml:2: sandbox.cpu: expected a number of cpus such as 1.5, got a "
            "mapping");
  EXPECT_EQ(config_error("sandbox:\n  pids:\n"),
            "/etc/rf/worker.yaml:2: sandbox.pids: expected a whole number, got nothing");
  EXPECT_EQ(
      config_error("sandbox: per_run\n"),
      "/etc/rf/worker.yaml:1: sandbox: expected a mapping of sandbox settings, got \"per_run\"");
  EXPECT_EQ(config_error("- mode: per_run\n"),
            "/etc/rf/worker.yaml:1: expected a mapping of settings, got a list");
  EXPECT_EQ(config_error("sandbox:\n  fallback_backends: native\n"),
            "/etc/rf/worker.yaml:2: sandbox.fallback_backends: expected a list of backends such "
            "as [native], got \"native\"");
}

TEST(WorkerConfig, BadValues) {
  EXPECT_EQ(config_error("project: acme\nsandbox:\n  mem: lots\n", "worker.yaml"),
            "worker.yaml:3: sandbox.mem: expected a size such as 512m, got \"lots\"");
  EXPECT_EQ(config_error("sandbox:\n  mode: fast\n"),
            "/etc/rf/worker.yaml:2: sandbox.mode: unknown sandbox mode \"fast\" (allowed: none, "
            "per_tool, per_run, per_worker)");
  EXPECT_EQ(config_error("project_environment: qa\n"),
            "/etc/rf/worker.yaml:1: project_environment: unknown project environment \"qa\" "
            "(allowed: production, staging, development)");
  EXPECT_EQ(config_error("sandbox:\n  backend: podman\n"),
            "/etc/rf/worker.yaml:2: sandbox.backend: unknown backend \"podman\" (allowed: native, "
            "docker, remotedocker, local)");
  EXPECT_EQ(config_error("sandbox:\n  fallback_backends:\n    - native\n    - lxc\n"),
            "/etc/rf/worker.yaml:4: sandbox.fallback_backends[1]: unknown backend \"lxc\" "
            "(allowed: native, docker, remotedocker, local)");
  EXPECT_EQ(config_error("sandbox:\n  pids: 2.5\n"),
            "/etc/rf/worker.yaml:2: sandbox.pids: expected a whole number, got \"2.5\"");
  EXPECT_EQ(
      config_error("sandbox:\n  timeout: soon\n"),
      "/etc/rf/worker.yaml:2: sandbox.timeout: expected a duration such as 30s, got \"soon\"");
  EXPECT_EQ(config_error("project: acme corp\n"),
            "/etc/rf/worker.yaml:1: project: expected a project name, 1 to 64 of letters, "
            "digits, '.', '_' and '-', not starting with '.', got \"acme corp\"");
}

TEST(WorkerConfig, DuplicateKey) {
  EXPECT_EQ(config_error("sandbox:\n  mem: 1g\n  mem: 2g\n"),
            "/etc/rf/worker.yaml:3: sandbox.mem: duplicate key (first at line 2)");
}

TEST(WorkerConfig, YamlSyntaxErrorWithLine) {
  EXPECT_EQ(config_error("sandbox:\n  mem: 1g\n  cpu: [2\n"),
            "/etc/rf/worker.yaml:4:1: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(config_error("sandbox:\n  mem: 1g\n cpu: 2\n"),
            "/etc/rf/worker.yaml:3:2: invalid YAML: end of map not found");
}

TEST(WorkerConfig, EmptyFileIsNoSettings) {
  const SettingsLayer layer = config_layer_of("# nothing yet\n");
  EXPECT_FALSE(layer.mode.has_value());
  EXPECT_FALSE(layer.limits.count("mem"));
  EXPECT_TRUE(config_layer_of("").project.value_or(Resolved<std::string>{"unset"}).value ==
              "unset");
}

// --- semantic validation: errors name the flag or file:line: key ---

TEST(WorkerSettings, PerWorkerNeedsAProject) {
  EXPECT_EQ(validation_error({"--sandbox-mode", "per_worker"}, ""),
            "--sandbox-mode: per_worker needs a project (--project, or project: in the config "
            "file)");
  EXPECT_EQ(validation_error({}, "sandbox:\n  mode: per_worker\n"),
            "/etc/rf/worker.yaml:2: sandbox.mode: per_worker needs a project (--project, or "
            "project: in the config file)");
  EXPECT_EQ(validation_error({"--sandbox-mode", "per_worker", "--project", "acme"}, ""),
            "(no error)");
  EXPECT_EQ(validation_error({"--project", "acme"}, "sandbox:\n  mode: per_worker\n"),
            "(no error)");
}

// The one project of a per_worker worker is named as every door names one
// (policy::check_project_name): a name no token could hold is refused here.
TEST(WorkerSettings, AProjectIsNamedAsEveryDoorNamesOne) {
  EXPECT_EQ(flag_error({"--project", "acme.prod-2"}), "(no error)");
  const std::string want =
      "expected a project name, 1 to 64 of letters, digits, '.', '_' and '-', not starting with "
      "'.', got ";
  EXPECT_NE(flag_error({"--project", ".."}).find(want + "\"..\""), std::string::npos);
  EXPECT_NE(flag_error({"--project", std::string(65, 'a')}).find(want), std::string::npos);
  EXPECT_EQ(config_error("project: .hidden\n"),
            "/etc/rf/worker.yaml:1: project: " + want + "\".hidden\"");
}

TEST(WorkerSettings, LimitsValidatedLikeSandboxSpec) {
  EXPECT_EQ(validation_error({"--sandbox-mem", "1m"}, ""),
            "--sandbox-mem: must be at least 8m, got 1m");
  EXPECT_EQ(validation_error({}, "sandbox:\n  mem: 1m\n"),
            "/etc/rf/worker.yaml:2: sandbox.mem: must be at least 8m, got 1m");
  EXPECT_EQ(validation_error({}, "sandbox:\n  pids: 2\n"),
            "/etc/rf/worker.yaml:2: sandbox.pids: must be between 8 and 1000000, got 2");
  EXPECT_EQ(validation_error({"--sandbox-cpu", "0"}, ""),
            "--sandbox-cpu: must be between 0.01 and 1024, got 0");
  EXPECT_EQ(validation_error({"--sandbox-disk", "1k"}, ""),
            "--sandbox-disk: must be at least 1m, got 1k");
  EXPECT_EQ(config_error("sandbox:\n  network: wide\n"),
            "/etc/rf/worker.yaml:2: sandbox.network: unknown network policy \"wide\" (allowed: "
            "none, proxy, host)");
  // The limits the worker could not set before the one table: output, nofile, egress caps.
  EXPECT_EQ(validation_error({"--sandbox-output-limit", "10"}, ""),
            "--sandbox-output-limit: must be between 1k and 4g, got 10");
  EXPECT_EQ(validation_error({}, "sandbox:\n  nofile: 4\n"),
            "/etc/rf/worker.yaml:2: sandbox.nofile: must be between 16 and 1048576, got 4");
  EXPECT_EQ(validation_error({"--sandbox-egress-connections", "0"}, ""),
            "--sandbox-egress-connections: must be between 1 and 65536, got 0");
  EXPECT_EQ(config_error("sandbox:\n  egress_bytes: lots\n"),
            "/etc/rf/worker.yaml:2: sandbox.egress_bytes: expected a size such as 512m, got "
            "\"lots\"");
  EXPECT_EQ(config_error("sandbox:\n  proxy_resolve: [api.test]\n"),
            "/etc/rf/worker.yaml:2: sandbox.proxy_resolve[0]: expected NAME=ADDR such as "
            "api.test=127.0.0.1, got \"api.test\"");
  // network host: trusted steps only; production needs the config to say so.
  EXPECT_EQ(validation_error({}, "sandbox:\n  network: host\n"), "(no error)");
  EXPECT_EQ(
      validation_error({"--project-environment", "production"}, "sandbox:\n  network: host\n"),
      "/etc/rf/worker.yaml:2: sandbox.network: host is refused for production projects (the host's "
      "network has no egress policy); set sandbox.allow_host_network: true in the config file to "
      "allow it");
  EXPECT_EQ(validation_error({"--project-environment", "production"},
                             "sandbox:\n  network: host\n  allow_host_network: true\n"),
            "(no error)");
  EXPECT_EQ(validation_error({}, "sandbox:\n  allow: [api.example.com]\n"),
            "/etc/rf/worker.yaml:2: sandbox.allow: rules apply only with network proxy (network is "
            "none)");
  EXPECT_EQ(
      validation_error(
          {"--sandbox-network", "proxy", "--sandbox-allow", "api.example.com,*.pkg.org:443"}, ""),
      "(no error)");
  EXPECT_EQ(validation_error({"--sandbox-image", "ubuntu"}, ""),
            "--sandbox-image: unknown image \"ubuntu\" (the native backend has only: host)");
  // Other backends check their own images.
  EXPECT_EQ(validation_error({"--sandbox-backend", "docker", "--sandbox-image", "ubuntu"}, ""),
            "(no error)");
  EXPECT_EQ(validation_error({"--sandbox-backend", "docker"}, ""),
            "sandbox.image: the docker backend needs a docker image (--sandbox-image NAME); "
            "\"host\" is the native backend's");
  EXPECT_EQ(
      validation_error({"--sandbox-backend", "remotedocker", "--sandbox-image", "u"}, ""),
      "--sandbox-backend: remotedocker needs --docker-host tcp://HOST:PORT or ssh://USER@HOST");
  EXPECT_EQ(validation_error({"--sandbox-backend", "remotedocker", "--sandbox-image", "u",
                              "--docker-host", "ssh://ci@build"},
                             ""),
            "(no error)");
  EXPECT_EQ(validation_error({},
                             "sandbox:\n  backend: docker\n  image: python:3.12\n  docker_host: "
                             "tcp://127.0.0.1:2375\n"),
            "(no error)");
}

TEST(WorkerSettings, PoolAndPaths) {
  EXPECT_EQ(validation_error({"--pool-target", "5"}, ""),
            "--pool-target: must not exceed pool.max (4), got 5");
  EXPECT_EQ(validation_error({}, "pool:\n  max: 0\n"),
            "/etc/rf/worker.yaml:2: pool.max: must be at least 1, got 0");
  EXPECT_EQ(validation_error({"--state-dir", "state"}, ""),
            "--state-dir: must be an absolute path, got \"state\"");
  EXPECT_EQ(validation_error({"--sandbox-idle-timeout", "0s"}, ""),
            "--sandbox-idle-timeout: must be positive");
}

// --- flags ---

TEST(WorkerFlags, BadFlagValuesNameTheFlag) {
  EXPECT_EQ(flag_error({"--sandbox-mem", "lots"}),
            "--sandbox-mem: expected a size such as 512m, got \"lots\"");
  EXPECT_EQ(flag_error({"--project-environment", "qa"}),
            "--project-environment: unknown project environment \"qa\" (allowed: production, "
            "staging, development)");
  EXPECT_EQ(flag_error({"--sandbox-mode", "per-run"}),
            "--sandbox-mode: unknown sandbox mode \"per-run\" (allowed: none, per_tool, per_run, "
            "per_worker)");
  EXPECT_EQ(flag_error({"--sandbox-fallback-backends", "native,lxc"}),
            "--sandbox-fallback-backends: unknown backend \"lxc\" (allowed: native, docker, "
            "remotedocker, local)");
  EXPECT_EQ(flag_error({"--sandbox-pids", "-1"}),
            "--sandbox-pids: expected a whole number, got \"-1\"");
}

TEST(WorkerFlags, UnknownFlagIsAParseError) {
  EXPECT_THROW(parse_flags({"--sandbox-cpus", "2"}), CLI::ParseError);
  EXPECT_THROW(parse_flags({"--sandbox-mem"}), CLI::ParseError);
}

TEST(WorkerFlags, FallbackBackendsFlagOverridesConfig) {
  const std::string yaml = "sandbox:\n  fallback_backends: [docker]\n";
  WorkerSettings s = merged({"--sandbox-fallback-backends", "native,local"}, yaml);
  EXPECT_EQ(s.fallback_backends.value,
            (std::vector<BackendKind>{BackendKind::kNative, BackendKind::kLocal}));
  s = merged({"--sandbox-fallback-backends", ""}, yaml);
  EXPECT_TRUE(s.fallback_backends.value.empty());
  EXPECT_EQ(s.fallback_backends.source, "flag --sandbox-fallback-backends");
}

// --- the config file on disk ---

TEST(WorkerConfigFile, MissingConfigFlagFileIsAnError) {
  TempDir home;
  WorkerFlags flags = parse_flags({"--config", home.path() + "/nope.yaml"});
  auto s = resolve_worker_settings(flags, home.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().to_string(),
            "--config " + home.path() + "/nope.yaml: No such file or directory");
}

TEST(WorkerConfigFile, MissingDefaultFileIsFine) {
  TempDir home;
  auto s = resolve_worker_settings(parse_flags({}), home.path());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->config_file.value, "");
  EXPECT_EQ(s->explain()[0], "config file: (none) (default)");
  EXPECT_EQ(s->state_dir.value, home.path() + "/.ringfence/state");
}

TEST(WorkerConfigFile, DefaultFileIsRead) {
  TempDir home;
  const std::string path = home.write(".ringfence/worker.yaml", "sandbox:\n  mem: 2g\n");
  auto s = resolve_worker_settings(parse_flags({}), home.path());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->config_file.value, path);
  EXPECT_EQ(s->config_file.source, "default");
  EXPECT_EQ(s->limits.value.memory_bytes, 2ull << 30);
  EXPECT_EQ(s->limits.source_of("mem"), "config " + path + ":2");
}

TEST(WorkerConfigFile, ConfigFlagBeatsDefaultFile) {
  TempDir home;
  home.write(".ringfence/worker.yaml", "sandbox:\n  mem: 2g\n");
  const std::string other = home.write("other.yaml", "sandbox:\n  cpu: 3\n");
  auto s = resolve_worker_settings(parse_flags({"--config", other}), home.path());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->config_file.source, "flag --config");
  EXPECT_EQ(s->limits.source_of("mem"), "default");
  EXPECT_EQ(s->limits.source_of("cpu"), "config " + other + ":2");
}

TEST(WorkerConfigFile, ErrorsInTheFileNameIt) {
  TempDir home;
  const std::string path = home.write("w.yaml", "sandbox:\n  mem: lots\n");
  auto s = resolve_worker_settings(parse_flags({"--config", path}), home.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().to_string(),
            path + ":2: sandbox.mem: expected a size such as 512m, got \"lots\"");
}

}  // namespace
}  // namespace rf::worker
