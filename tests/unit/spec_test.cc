#include "sandbox/spec.h"

#include <gtest/gtest.h>

#include "host/exec_request.h"

namespace rf {
namespace {

TEST(Spec, DefaultsAreValid) { EXPECT_TRUE(validate_spec(SandboxSpec{}).ok()); }

TEST(Spec, ValidationNamesTheField) {
  SandboxSpec s;
  s.limits.memory_bytes = 1 << 20;
  EXPECT_EQ(validate_spec(s).error().to_string(), "limits.memory: must be at least 8m, got 1m");
  s = {};
  s.limits.pids = 2;
  EXPECT_EQ(validate_spec(s).error().where, "limits.pids");
  s = {};
  s.limits.cpus = 0;
  EXPECT_EQ(validate_spec(s).error().where, "limits.cpus");
  EXPECT_EQ(parse_spec_json(R"({"network": "everything"})").error().to_string(),
            "network: unknown network policy \"everything\" (allowed: none, proxy, host)");
  s = {};
  s.allow = {"api.example.com"};
  EXPECT_EQ(validate_spec(s).error().to_string(),
            "allow: rules apply only with network proxy (network is none)");
  s.network = NetworkPolicy::kProxy;
  EXPECT_TRUE(validate_spec(s).ok());
  s.allow = {"*.com"};
  EXPECT_EQ(validate_spec(s).error().where, "allow");
  s = {};
  s.network = NetworkPolicy::kProxy;
  s.limits.egress_connections = 0;
  EXPECT_EQ(validate_spec(s).error().where, "limits.egress_connections");
  s = {};
  s.image = "ubuntu";
  EXPECT_EQ(validate_spec(s).error().where, "image");
  s = {};
  s.env["1BAD"] = "x";
  EXPECT_EQ(validate_spec(s).error().where, "env");
  s = {};
  s.workspace_dir = "relative/dir";
  EXPECT_EQ(validate_spec(s).error().where, "workspace");
  s = {};
  s.workspace_dir = "/nonexistent/ringfence-test";
  EXPECT_EQ(validate_spec(s).error().to_string(),
            "workspace /nonexistent/ringfence-test: No such file or directory");
  s = {};
  s.id = "Bad_Id";
  EXPECT_EQ(validate_spec(s).error().where, "id");
  s = {};
  s.limits.output_bytes = 10;
  EXPECT_EQ(validate_spec(s).error().where, "limits.output");
}

TEST(Spec, ParsesJson) {
  auto s = parse_spec_json(R"({"image":"host","env":{"A":"1"},
      "limits":{"cpus":1.5,"memory":"256m","pids":64,"disk":"2g","timeout":"5s","output":"1m"}})");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->limits.cpus, 1.5);
  EXPECT_EQ(s->limits.memory_bytes, 256ull << 20);
  EXPECT_EQ(s->limits.pids, 64u);
  EXPECT_EQ(s->limits.disk_bytes, 2ull << 30);
  EXPECT_EQ(s->limits.timeout.count(), 5000);
  EXPECT_EQ(s->limits.output_bytes, 1ull << 20);
  EXPECT_EQ(s->env.at("A"), "1");
  auto again = parse_spec_json(spec_to_json(*s));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->limits.memory_bytes, s->limits.memory_bytes);
}

TEST(Spec, JsonErrorsNameTheField) {
  EXPECT_EQ(parse_spec_json("[1]").error().to_string(), "spec: expected a JSON object");
  EXPECT_EQ(parse_spec_json("{").error().to_string(), "spec: not valid JSON");
  EXPECT_EQ(parse_spec_json(R"({"imgae":"host"})").error().to_string(), "imgae: unknown field");
  EXPECT_EQ(parse_spec_json(R"({"limits":{"memory":"lots"}})").error().where, "limits.memory");
  EXPECT_EQ(parse_spec_json(R"({"limits":{"pids":-3}})").error().to_string(),
            "limits.pids: expected a positive integer");
  EXPECT_EQ(parse_spec_json(R"({"limits":{"swap":"1g"}})").error().to_string(),
            "limits.swap: unknown field");
  EXPECT_EQ(parse_spec_json(R"({"env":{"A":1}})").error().to_string(), "env.A: expected a string");
}

TEST(Spec, BaseEnvironmentIsExactlyTheNamedVariables) {
  auto env = base_environment(false);
  EXPECT_EQ(env.size(), 3u);
  EXPECT_EQ(env.at("HOME"), "/workspace");
  EXPECT_TRUE(env.count("PATH"));
  EXPECT_TRUE(env.count("LANG"));
  EXPECT_EQ(base_environment(true).count("TERM"), 1u);
}

TEST(Spec, GeneratedIdsAreValidHostnames) {
  const auto a = generate_sandbox_id(), b = generate_sandbox_id();
  EXPECT_NE(a, b);
  SandboxSpec s;
  s.id = a;
  EXPECT_TRUE(validate_spec(s).ok());
  EXPECT_EQ(a.size(), 15u);
}

// What a runner is told for probe_at_start: the names of the environment a
// call with no env of its own gets, in the order a call's map has them,
// never a value; nothing without it.
TEST(StartProbeArgs, NamesADefaultCallsEnvironmentNeverItsValues) {
  SandboxSpec s;
  EXPECT_TRUE(host::start_probe_args(s, true).empty());
  s.probe_at_start = true;
  s.env = {{"TOKENISH", "not-in-argv"}};
  EXPECT_EQ(host::start_probe_args(s, false),
            (std::vector<std::string>{"--self-probe-at-start", "HOME,LANG,PATH,TOKENISH"}));
  s.network = NetworkPolicy::kProxy;
  const auto args = host::start_probe_args(s, true);
  ASSERT_EQ(args.size(), 3u);
  EXPECT_NE(args[1].find("HTTPS_PROXY"), std::string::npos) << args[1];
  EXPECT_EQ(args[2], "--self-probe-inside-only");
  for (const auto& a : args) EXPECT_EQ(a.find("not-in-argv"), std::string::npos) << a;
}

}  // namespace
}  // namespace rf
