// The host image's mount plan, as data: no root needed.
#include <gtest/gtest.h>

#include "native/child_setup.h"
#include "native/host_image.h"

namespace rf::native {
namespace {

MountPlan host_plan(const SandboxSpec& spec = {}) {
  HostImageOptions o;
  o.runner_path = "/opt/rf/ringfence-tool-runner";
  o.sandbox_id = "rf-000000000001";
  return build_host_image_plan(spec, o);
}

TEST(MountPlan, UsrIsBoundReadOnly) {
  const auto plan = host_plan();
  const MountOp* usr = nullptr;
  for (const auto& op : plan.ops) {
    if (op.kind == MountOp::Kind::kBind && op.target == "/usr") usr = &op;
  }
  ASSERT_NE(usr, nullptr);
  EXPECT_TRUE(usr->readonly);
  EXPECT_FALSE(usr->allow_dev);
  EXPECT_EQ(usr->source, "/.oldroot/usr");
}

TEST(MountPlan, NoSecretFromEtcIsEverMounted) {
  const auto plan = host_plan();
  for (const auto& op : plan.ops) {
    for (const char* secret : {"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh",
                               "/etc/ssl/private", "/etc/machine-id", "/root"}) {
      EXPECT_NE(op.target.rfind(secret, 0), 0u) << op.describe();
      EXPECT_EQ(op.source.find(secret), std::string::npos) << op.describe();
    }
    // /etc is assembled piece by piece; the host's /etc as a whole is never bound.
    EXPECT_FALSE(op.kind == MountOp::Kind::kBind && op.target == "/etc");
  }
  const MountOp* passwd = plan.find("/etc/passwd");
  ASSERT_NE(passwd, nullptr);
  EXPECT_EQ(passwd->kind, MountOp::Kind::kWriteFile);
  EXPECT_NE(passwd->content.find("sandbox:x:1000:1000"), std::string::npos);
}

TEST(MountPlan, ProcIsMaskedAndReadOnly) {
  const auto plan = host_plan();
  for (const char* masked : {"/proc/kcore", "/proc/keys", "/proc/timer_list"}) {
    const MountOp* op = plan.find(masked);
    ASSERT_NE(op, nullptr) << masked;
    EXPECT_EQ(op->source, "/.oldroot/dev/null");
  }
  for (const char* ro : {"/proc/sys", "/proc/sysrq-trigger"}) {
    const MountOp* op = plan.find(ro);
    ASSERT_NE(op, nullptr) << ro;
    EXPECT_TRUE(op->readonly);
  }
}

TEST(MountPlan, DevHasOnlyHarmlessNodes) {
  const auto plan = host_plan();
  std::vector<std::string> dev_binds;
  for (const auto& op : plan.ops) {
    if (op.kind == MountOp::Kind::kBind && op.allow_dev && op.target.rfind("/dev/", 0) == 0) {
      dev_binds.push_back(op.target);
    }
    if (op.allow_dev) {
      const bool proc_mask = op.target.rfind("/proc", 0) == 0;
      EXPECT_EQ(op.source, "/.oldroot" + (proc_mask ? std::string("/dev/null") : op.target))
          << op.target;
    }
  }
  EXPECT_EQ(dev_binds, (std::vector<std::string>{"/dev/null", "/dev/zero", "/dev/full",
                                                 "/dev/random", "/dev/urandom", "/dev/tty"}));
  EXPECT_NE(plan.find("/dev/pts"), nullptr);
  const MountOp* ptmx = plan.find("/dev/ptmx");
  ASSERT_NE(ptmx, nullptr);
  EXPECT_EQ(ptmx->source, "pts/ptmx");
  EXPECT_EQ(plan.ops.back().kind, MountOp::Kind::kBind);  // the runner comes last
}

TEST(MountPlan, WritableDirsAreSizeLimitedTmpfs) {
  SandboxSpec spec;
  spec.limits.disk_bytes = 64ull << 20;
  const auto plan = host_plan(spec);
  int tmpfs_seen = 0;
  for (const auto& op : plan.ops) {
    if (op.kind != MountOp::Kind::kTmpfs) continue;
    if (op.target == "/tmp" || op.target == "/workspace") {
      ++tmpfs_seen;
      EXPECT_NE(op.data.find("size=67108864"), std::string::npos) << op.data;
    }
  }
  EXPECT_EQ(tmpfs_seen, 2);
}

TEST(MountPlan, WorkspaceDirIsAttachedFromTheHostPreparedTree) {
  SandboxSpec spec;
  spec.workspace_dir = "/srv/project";
  const auto plan = host_plan(spec);
  int attached = 0, tmpfs = 0;
  for (const auto& op : plan.ops) {
    if (op.target != "/workspace") continue;
    attached += op.kind == MountOp::Kind::kAttachTree;
    tmpfs += op.kind == MountOp::Kind::kTmpfs;
    EXPECT_EQ(op.source.find("/srv/project"), std::string::npos);  // never a plain bind of the path
  }
  EXPECT_EQ(attached, 1);
  EXPECT_EQ(tmpfs, 0);
}

TEST(MountPlan, MirrorsTheHostLayoutOfAFakeRoot) {
  char tmpl[] = "/tmp/rf-plan-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  ASSERT_EQ(mkdir((root + "/usr").c_str(), 0755), 0);
  ASSERT_EQ(symlink("usr/bin", (root + "/bin").c_str()), 0);
  ASSERT_EQ(mkdir((root + "/lib64").c_str(), 0755), 0);
  HostImageOptions o;
  o.host_root = root;
  o.runner_path = "/r";
  o.sandbox_id = "rf-x";
  const auto plan = build_host_image_plan(SandboxSpec{}, o);
  const MountOp* bin = plan.find("/bin");
  ASSERT_NE(bin, nullptr);
  EXPECT_EQ(bin->kind, MountOp::Kind::kSymlink);
  EXPECT_EQ(bin->source, "usr/bin");
  EXPECT_EQ(plan.find("/sbin"), nullptr);  // absent on this fake host
  EXPECT_NE(plan.find("/lib64"), nullptr);
  std::system(("rm -rf " + root).c_str());
}

TEST(MountPlan, StepNamesCoverEveryOp) {
  const auto plan = host_plan();
  const auto names = child_step_names(plan);
  EXPECT_EQ(names.front(), "join cgroup");
  EXPECT_EQ(names[1], "close inherited fds");
  EXPECT_EQ(names[2], "wait for parent");
  // Limits only after the fds are down to the sandbox's own (issue 10).
  const auto at = [&](const char* n) { return std::find(names.begin(), names.end(), n); };
  EXPECT_LT(at("set up fds"), at("set rlimits"));
  EXPECT_EQ(names.back(), "exec tool runner");
  EXPECT_LT(names.size(), static_cast<size_t>(kMaxSteps));
  EXPECT_NE(std::find(names.begin(), names.end(), "mount /proc"), names.end());
}

}  // namespace
}  // namespace rf::native
