// `sandbox list | reap | doctor` through the ringfence binary, as an operator
// runs them: every backend at once, the worker's store joined in by sandbox id,
// and doctor's host checks failing for real (a state dir under a file, a
// read-only and a nearly full file system in a private mount namespace).
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/harness.h"
#include "local/local_backend.h"
#include "store/store.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
}

const nlohmann::json* find_id(const nlohmann::json& all, const std::string& id) {
  for (const auto& s : all) {
    if (s.at("id") == id) return &s;
  }
  return nullptr;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string line_with(const std::string& text, const std::string& needle) {
  for (const auto& l : lines_of(text)) {
    if (l.find(needle) != std::string::npos) return l;
  }
  return "";
}

// Runs in the CLI's child: a private mount namespace with a tmpfs at `dir`.
std::function<void()> with_tmpfs(const std::string& dir, unsigned long flags,
                                 const std::string& size) {
  return [dir, flags, size] {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", dir.c_str(), "tmpfs", flags, ("size=" + size).c_str()) != 0) {
      ::_exit(98);
    }
  };
}

class CliOperatorCommands : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The CLI's local scratch root is $TMPDIR/ringfence-local: give it its own.
    tmp_ = temp_dir("rf-cli-tmp");
    ASSERT_FALSE(tmp_.empty());
    auto local =
        local::make_local_backend(local::LocalOptions{RF_RUNNER_PATH, tmp_ + "/ringfence-local"});
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    local_ = std::move(*local);
  }
  void TearDown() override {
    local_.reset();
    std::error_code ec;
    if (!tmp_.empty()) fs::remove_all(tmp_, ec);
  }

  CliRun cli(const std::vector<std::string>& args) {
    const std::string tmp = tmp_;
    return run_cli(args, "", [tmp] { ::setenv("TMPDIR", tmp.c_str(), 1); });
  }

  std::unique_ptr<Sandbox> make_local() {
    SandboxSpec spec;
    spec.backend = BackendKind::kLocal;
    auto sb = local_->create(spec);
    EXPECT_TRUE(sb.ok()) << sb.error().to_string();
    return sb.ok() ? std::move(*sb) : nullptr;
  }

  // What a worker killed with -9 leaves: a forked child makes a local sandbox
  // and is SIGKILLed. Returns the sandbox's id.
  std::string make_local_orphan() {
    int p[2];
    if (::pipe(p) != 0) return "";
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(p[0]);
      auto sb = make_local();
      const std::string id = sb ? sb->id() : "error";
      (void)!::write(p[1], id.data(), id.size());
      ::pause();
      ::_exit(0);
    }
    ::close(p[1]);
    char buf[128];
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    ::close(p[0]);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }

  std::string tmp_;
  std::unique_ptr<Backend> local_;
};

TEST_F(CliOperatorCommands, ListJoinsTheStoreByIdAcrossBackends) {
  // The native backend's default cgroup parent: the one the CLI looks in.
  auto native = native::make_native_backend(native::NativeOptions{RF_RUNNER_PATH});
  ASSERT_TRUE(native.ok()) << native.error().to_string();
  auto nsb = (*native)->create(SandboxSpec{});
  ASSERT_TRUE(nsb.ok()) << nsb.error().to_string();
  auto lsb = make_local();
  ASSERT_TRUE(lsb);
  const std::string state = tmp_ + "/state";  // TearDown removes it, even after a failure
  {
    auto st = store::Store::open(worker::store_path(state));
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    store::SandboxRow row;
    row.id = (*nsb)->id();
    row.backend = "native";
    row.project_id = "acme";
    row.run_id = "r1";
    row.mode = "per_run";
    row.worker_id = "w1";
    row.host_pid = (*nsb)->init_pid();
    ASSERT_TRUE((*st)->record_sandbox(row).ok());
  }

  CliRun r = cli({"sandbox", "list", "--state-dir", state, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto all = nlohmann::json::parse(r.out);
  const nlohmann::json* n = find_id(all, (*nsb)->id());
  ASSERT_NE(n, nullptr) << r.out;
  std::vector<std::string> keys;
  for (const auto& [k, _] : n->items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"age_seconds", "backend", "id", "mode", "orphaned",
                                            "owner_pid", "peak_memory_bytes", "pid", "project",
                                            "run", "worker"}));
  EXPECT_EQ(n->at("backend"), "native");
  EXPECT_EQ(n->at("project"), "acme");
  EXPECT_EQ(n->at("run"), "r1");
  EXPECT_EQ(n->at("mode"), "per_run");
  EXPECT_EQ(n->at("worker"), "w1");
  EXPECT_EQ(n->at("pid"), (*nsb)->init_pid());
  EXPECT_EQ(n->at("owner_pid"), ::getpid());
  EXPECT_EQ(n->at("orphaned"), false);
  EXPECT_LE(n->at("age_seconds").get<int64_t>(), 60);
  ASSERT_TRUE(n->at("peak_memory_bytes").is_number_unsigned()) << *n;
  EXPECT_GT(n->at("peak_memory_bytes").get<uint64_t>(), 0u);

  // A state dir named lists its store's sandboxes only (issue 40); --all
  // every sandbox of the host, those of no store with nulls.
  EXPECT_EQ(find_id(all, lsb->id()), nullptr) << r.out;
  r = cli({"sandbox", "list", "--state-dir", state, "--all", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto every = nlohmann::json::parse(r.out);
  ASSERT_NE(find_id(every, (*nsb)->id()), nullptr) << r.out;
  const nlohmann::json* l = find_id(every, lsb->id());
  ASSERT_NE(l, nullptr) << r.out;
  EXPECT_EQ(l->at("backend"), "local");
  EXPECT_EQ(l->at("pid"), lsb->init_pid());
  EXPECT_EQ(l->at("owner_pid"), ::getpid());
  for (const char* k : {"project", "run", "mode", "worker", "peak_memory_bytes"}) {
    EXPECT_TRUE(l->at(k).is_null()) << k << ": not in the store, and no memory figure";
  }

  // --backend narrows to one backend.
  r = cli({"sandbox", "list", "--backend", "local", "--state-dir", state, "--all", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto locals = nlohmann::json::parse(r.out);
  ASSERT_EQ(locals.size(), 1u) << r.out;
  EXPECT_EQ(locals[0].at("id"), lsb->id());

  // The table: one aligned row per sandbox, "-" where nothing is known.
  r = cli({"sandbox", "list", "--state-dir", state, "--all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string header = lines_of(r.out).at(0);
  EXPECT_EQ(header.substr(0, 2), "ID");
  const std::string nrow = line_with(r.out, (*nsb)->id());
  const std::string lrow = line_with(r.out, lsb->id());
  ASSERT_FALSE(nrow.empty()) << r.out;
  ASSERT_FALSE(lrow.empty()) << r.out;
  std::istringstream cells(nrow);
  std::vector<std::string> c{std::istream_iterator<std::string>(cells), {}};
  ASSERT_GE(c.size(), 10u) << nrow;
  EXPECT_EQ(std::vector<std::string>(c.begin(), c.begin() + 6),
            (std::vector<std::string>{(*nsb)->id(), "native", "acme", "r1", "per_run", "w1"}));
  EXPECT_EQ(c[7], std::to_string((*nsb)->init_pid()));
  EXPECT_EQ(c[8], std::to_string(::getpid()));
  for (const char* col :
       {"BACKEND", "PROJECT", "RUN", "MODE", "WORKER", "AGE", "PID", "OWNER", "MEMORY"}) {
    ASSERT_NE(header.find(col), std::string::npos) << col;
  }
  EXPECT_EQ(nrow.find("acme"), header.find("PROJECT")) << r.out;
  EXPECT_EQ(lrow.substr(header.find("PROJECT"), 2), "- ") << r.out;
  EXPECT_EQ(lrow.substr(header.find("MEMORY")), "-") << r.out;
  EXPECT_EQ(
      lrow.substr(header.find("PID"), lrow.find(' ', header.find("PID")) - header.find("PID")),
      std::to_string(lsb->init_pid()))
      << r.out;

  // No store file: the columns stay empty, and no store is created.
  const std::string none = state + "/none";
  r = cli({"sandbox", "list", "--state-dir", none, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(find_id(nlohmann::json::parse(r.out), (*nsb)->id()), nullptr) << r.out;
  r = cli({"sandbox", "list", "--state-dir", none, "--all", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto bare_all = nlohmann::json::parse(r.out);
  const nlohmann::json* bare = find_id(bare_all, (*nsb)->id());
  ASSERT_NE(bare, nullptr);
  EXPECT_TRUE(bare->at("project").is_null());
  EXPECT_FALSE(fs::exists(none));

  EXPECT_TRUE((*nsb)->destroy().ok());
  EXPECT_TRUE(lsb->destroy().ok());
}

TEST_F(CliOperatorCommands, ReapCoversEveryBackendAndBackendNarrows) {
  const std::string id = make_local_orphan();
  ASSERT_TRUE(id.starts_with("rf-")) << id;
  const std::string dir = tmp_ + "/ringfence-local/" + id;
  ASSERT_TRUE(fs::is_directory(dir));

  CliRun r = cli({"sandbox", "reap", "--older-than", "1h", "--backend", "local", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("would reap " + id + " (local; orphaned, age ")) << r.out;
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.out;
  EXPECT_TRUE(fs::is_directory(dir));

  // Every backend, and only said: a real reap of every backend would also
  // take this host's native sandboxes and a system dockerd's containers
  // that are orphaned or an hour old: other tests' (running beside this
  // one), a developer's, a worker's.
  r = cli({"sandbox", "reap", "--older-than", "1h", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(line_with(r.out, id).starts_with("would reap " + id + " (local; orphaned, age "))
      << r.out;
  EXPECT_TRUE(fs::is_directory(dir));

  r = cli({"sandbox", "reap", "--older-than", "1h", "--backend", "local"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(line_with(r.out, id).starts_with("reaped " + id + " (local; orphaned, age "))
      << r.out;
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir + ".owner"));

  r = cli({"sandbox", "reap", "--older-than", "1h", "--backend", "local"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "nothing to reap\n");

  r = cli({"sandbox", "reap", "--older-than", "1h", "--backend", "k8s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "ringfence: sandbox reap: --backend: unknown backend \"k8s\" (allowed: native, "
            "docker, remotedocker, local)\n");
  // Asked for by name, a docker daemon that is not there is a failure, named.
  r = cli({"sandbox", "reap", "--older-than", "1h", "--backend", "docker", "--docker-host",
           "unix:///nonexistent/docker.sock"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("sandbox reap: docker: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/docker.sock"), std::string::npos) << r.err;
}

const std::string kOtherDir =
    "; or point the worker elsewhere (--state-dir, or state_dir in the worker config)";

TEST_F(CliOperatorCommands, DoctorFailsWhenTheStateDirIsUnderAFile) {
  const std::string file = tmp_ + "/a-file";
  { std::ofstream(file) << "x"; }
  const std::string state = file + "/state";
  CliRun r = cli({"sandbox", "doctor", "--state-dir", state});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("\u2717 state dir writable: create " + state +
                       ": Not a directory (ENOTDIR)\n" + "    fix: a component of " + state +
                       " is not a directory: move that file away" + kOtherDir + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\u2713 seccomp"), std::string::npos)
      << r.out;  // the backend itself is fine
  EXPECT_TRUE(r.out.ends_with("native backend: UNHEALTHY\n")) << r.out;
}

TEST_F(CliOperatorCommands, DoctorFailsOnAReadOnlyStateDir) {
  const std::string mnt = tmp_ + "/ro";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  const std::string state = mnt + "/state";
  const std::string tmp = tmp_;
  CliRun r = run_cli({"sandbox", "doctor", "--backend", "local", "--state-dir", state}, "", [=] {
    ::setenv("TMPDIR", tmp.c_str(), 1);
    with_tmpfs(mnt, MS_RDONLY, "4g")();
  });
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("\u2717 state dir writable: create " + state +
                       ": Read-only file system (EROFS)\n" + "    fix: the file system of " +
                       state + " is read-only: remount it read-write" + kOtherDir + "\n"),
            std::string::npos)
      << r.out;
  // Free space is not what is wrong here.
  EXPECT_NE(
      r.out.find("\u2713 free disk (state dir): 4.0 GiB free of 4.0 GiB (100%) in " + mnt + "\n"),
      std::string::npos)
      << r.out;
  EXPECT_TRUE(r.out.ends_with("local backend: UNHEALTHY\n")) << r.out;
}

TEST_F(CliOperatorCommands, DoctorFailsWhenTheDiskIsNearlyFull) {
  const std::string mnt = tmp_ + "/small";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  const std::string state = mnt + "/state";
  const std::string tmp = tmp_;
  CliRun r = run_cli({"sandbox", "doctor", "--backend", "local", "--state-dir", state}, "", [=] {
    ::setenv("TMPDIR", tmp.c_str(), 1);
    with_tmpfs(mnt, 0, "16m")();
  });
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(
      r.out.find("\u2713 state dir writable: " + state + " (created, synced and removed a file)\n"),
      std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find(
          "\u2717 free disk (state dir): 16.0 MiB free of 16.0 MiB (100%) in " + state + "\n" +
          "    fix: free at least 1.0 GiB and 5% on the file system of " + state +
          ": `ringfence sandbox reap --older-than 10m` removes orphaned sandboxes' scratch dirs; "
          "then look for large files (du -xsh " +
          state + "/*)\n"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\u2713 free disk (scratch root): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\u2713 tool runner: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\u2713 scratch root: " + tmp_ + "/ringfence-local"), std::string::npos)
      << r.out;
  EXPECT_TRUE(r.out.ends_with("local backend: UNHEALTHY\n")) << r.out;
}

}  // namespace
}  // namespace rf::testing
