// The container a SandboxSpec becomes (docker/container_spec.h): every bound
// asserted on the create body, without a daemon.
#include <gtest/gtest.h>

#include "docker/container_spec.h"

namespace rf::docker {
namespace {

ContainerPlan plan() {
  ContainerPlan p;
  p.image = "sha256:abc";
  p.runner_volume = "ringfence-runner-0123456789abcdef";
  p.uid = 1073746920;
  p.owner_host = "host1";
  p.owner_pid = 42;
  p.owner_start = 777;
  p.created_unix = 1700000000;
  return p;
}

SandboxSpec spec() {
  SandboxSpec s;
  s.id = "rf-0123456789ab";
  s.backend = BackendKind::kDocker;
  s.image = "rf-test/busybox:1";
  s.limits.memory_bytes = 256ull << 20;
  s.limits.cpus = 1.5;
  s.limits.pids = 64;
  s.limits.disk_bytes = 32ull << 20;
  s.limits.nofile = 512;
  return s;
}

TEST(DockerSpec, EveryBoundIsOn) {
  const auto body = container_create_body(spec(), plan());
  const auto& hc = body["HostConfig"];
  EXPECT_EQ(hc["NetworkMode"], "none");
  EXPECT_EQ(hc["ReadonlyRootfs"], true);
  EXPECT_EQ(hc["CapDrop"], nlohmann::json::array({"ALL"}));
  EXPECT_EQ(hc["SecurityOpt"], nlohmann::json::array({"no-new-privileges:true"}));
  EXPECT_EQ(hc["Privileged"], false);
  EXPECT_EQ(hc["Memory"], 256ull << 20);
  EXPECT_EQ(hc["MemorySwap"], 256ull << 20);
  EXPECT_EQ(hc["NanoCpus"], 1'500'000'000);
  EXPECT_EQ(hc["PidsLimit"], 64);
  // Each with the inode cap native gives it (issue 40): 32 MiB / 4 KiB.
  EXPECT_EQ(hc["Tmpfs"]["/tmp"], "rw,nosuid,nodev,mode=1777,size=33554432,nr_inodes=8192");
  EXPECT_EQ(hc["Tmpfs"]["/workspace"],
            "rw,nosuid,nodev,exec,mode=0755,uid=1073746920,gid=1073746920,size=33554432,"
            "nr_inodes=8192");
  EXPECT_EQ(hc["Tmpfs"]["/dev/shm"],
            "rw,nosuid,nodev,noexec,mode=1777,size=33554432,nr_inodes=8192");
  EXPECT_EQ(hc["Ulimits"][0]["Name"], "nofile");
  EXPECT_EQ(hc["Ulimits"][0]["Hard"], 512);
  EXPECT_EQ(hc["Ulimits"][1]["Name"], "core");
  EXPECT_EQ(hc["Ulimits"][1]["Hard"], 0);
  EXPECT_EQ(hc["Ulimits"][2]["Name"], "fsize");
  EXPECT_EQ(hc["Ulimits"][2]["Hard"], 32ull << 20);
  EXPECT_EQ(hc["Tmpfs"]["/sys"], "ro,nosuid,nodev,noexec,size=4k,mode=0555");
  EXPECT_EQ(hc["LogConfig"]["Type"], "none");
  EXPECT_EQ(hc["AutoRemove"], true);
  EXPECT_EQ(body["User"], "1073746920:1073746920");
  EXPECT_EQ(body["Env"], nlohmann::json::array());
  EXPECT_EQ(body["StdinOnce"], true);
  EXPECT_EQ(body["Tty"], false);
  EXPECT_EQ(body["Image"], "sha256:abc");
}

TEST(DockerSpec, TheRunnerIsPid1FromAReadOnlyVolumeWithOurSeccompFilters) {
  const auto body = container_create_body(spec(), plan());
  EXPECT_EQ(body["Entrypoint"],
            nlohmann::json::array({"/.ringfence/tool-runner", "--stdio", "--seccomp",
                                   "/.ringfence/seccomp.bpf", "--cred-socket", "@ringfence-cred"}));
  const auto& m = body["HostConfig"]["Mounts"];
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["Type"], "volume");
  EXPECT_EQ(m[0]["Source"], "ringfence-runner-0123456789abcdef");
  EXPECT_EQ(m[0]["Target"], "/.ringfence");
  EXPECT_EQ(m[0]["ReadOnly"], true);
}

TEST(DockerSpec, AnImagesOwnRunnerIsUsedWhenPlanned) {
  ContainerPlan p = plan();
  p.runner_path = kImageRunner;
  const auto ep = container_create_body(spec(), p)["Entrypoint"];
  EXPECT_EQ(ep[0], kImageRunner);
  // It may predate JIT: never asked to serve the credential socket.
  EXPECT_EQ(ep.dump().find("--cred-socket"), std::string::npos) << ep;
  EXPECT_FALSE(serves_credentials(spec(), p));
}

// probe_at_start: our runner starts the self-probe with the container, told
// a default call's variable names (never values); it reads everything
// itself (a remote daemon's PID 1 is out of the host's reach). An image's
// own runner may predate the flag: its report sends the probe as a call.
TEST(DockerSpec, OurRunnerStartsTheSelfProbeWhenAReportIsWanted) {
  SandboxSpec s = spec();
  s.probe_at_start = true;
  s.env = {{"SECRETISH", "value-never-in-argv"}};
  const auto ep = container_create_body(s, plan())["Entrypoint"];
  ASSERT_GE(ep.size(), 2u);
  EXPECT_EQ(ep[ep.size() - 2], "--self-probe-at-start");
  EXPECT_EQ(ep[ep.size() - 1], "HOME,LANG,PATH,SECRETISH");
  EXPECT_EQ(ep.dump().find("value-never-in-argv"), std::string::npos) << ep;
  EXPECT_EQ(ep.dump().find("--self-probe-inside-only"), std::string::npos) << ep;
  EXPECT_TRUE(starts_probe(s, plan()));
  ContainerPlan own = plan();
  own.runner_path = kImageRunner;
  EXPECT_EQ(container_create_body(s, own)["Entrypoint"].dump().find("--self-probe"),
            std::string::npos);
  EXPECT_FALSE(starts_probe(s, own));
  EXPECT_FALSE(starts_probe(spec(), plan()));
}

TEST(DockerSpec, NetworkProxyBindsTheProxySocketAndStartsTheBridge) {
  SandboxSpec s = spec();
  s.network = NetworkPolicy::kProxy;
  ContainerPlan p = plan();
  p.proxy_socket = "/run/ringfence/egress/rf-0123456789ab.sock";
  const auto body = container_create_body(s, p);
  EXPECT_EQ(body["HostConfig"]["NetworkMode"], "none");
  const auto& m = body["HostConfig"]["Mounts"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1]["Source"], p.proxy_socket);
  EXPECT_EQ(m[1]["Target"], kProxySocketInContainer);
  const auto& ep = body["Entrypoint"];
  EXPECT_EQ(ep[ep.size() - 4], "--egress-bridge");
  EXPECT_EQ(ep[ep.size() - 3], std::string(kEgressListen) + "=" + kProxySocketInContainer);
  EXPECT_EQ(ep[ep.size() - 2], "--cred-socket");
}

TEST(DockerSpec, NetworkHostIsTheHostsNetwork) {
  SandboxSpec s = spec();
  s.network = NetworkPolicy::kHost;
  const auto body = container_create_body(s, plan());
  EXPECT_EQ(body["HostConfig"]["NetworkMode"], "host");
  // An abstract socket there would be the host's: no JIT.
  EXPECT_EQ(body["Entrypoint"].dump().find("--cred-socket"), std::string::npos);
  EXPECT_FALSE(serves_credentials(s, plan()));
}

TEST(DockerSpec, LabelsNameTheSandboxItsOwnerAndWhoItServes) {
  SandboxSpec s = spec();
  s.labels = {{"project", "acme"}, {"run", "r1"}, {"mode", "per_run"}};
  const auto labels = container_create_body(s, plan())["Labels"];
  EXPECT_EQ(labels["ringfence.sandbox"], "rf-0123456789ab");
  EXPECT_EQ(labels["ringfence.project"], "acme");
  EXPECT_EQ(labels["ringfence.run"], "r1");
  EXPECT_EQ(labels["ringfence.mode"], "per_run");
  EXPECT_EQ(labels["ringfence.created"], "1700000000");
  EXPECT_EQ(labels["ringfence.worker"], "host1:42");
  EXPECT_EQ(labels["ringfence.owner.pid"], "42");
  EXPECT_EQ(labels["ringfence.owner.start"], "777");
}

TEST(DockerSpec, SpecLabelsAreValidated) {
  SandboxSpec s = spec();
  s.labels = {{"Bad Key", "x"}};
  auto v = validate_spec(s);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().where, "labels");
  s.labels = {{"run", std::string("a\nb")}};
  v = validate_spec(s);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().where, "labels.run");
}

}  // namespace
}  // namespace rf::docker
