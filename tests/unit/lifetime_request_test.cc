// A front door's sandbox lifetime (issue 41): the request fields beside the
// spec (sandbox/lifetime_request.h) and the operator policy that bounds them.
#include "sandbox/lifetime_request.h"

#include <gtest/gtest.h>

#include "policy/operator_policy.h"

namespace rf {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

TEST(LifetimeRequest, TheFieldsAreTakenOutOfTheSpecAndChecked) {
  json body = json::parse(
      R"({"timeout": "10m", "idle_timeout": 30, "name": "dev-1", "metadata": {"team": "a"},
          "network": "none"})");
  auto l = take_lifetime(body);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(*l->timeout, 10min);
  EXPECT_EQ(l->idle_timeout, 30s);
  EXPECT_EQ(l->name, "dev-1");
  EXPECT_EQ(l->metadata.at("team"), "a");
  EXPECT_EQ(body, json::parse(R"({"network": "none"})")) << "what is left is the spec";

  for (const auto& [text, where] : std::vector<std::pair<std::string, std::string>>{
           {R"({"timeout": 0})", "timeout"},
           {R"({"timeout": "soon"})", "timeout"},
           {R"({"timeout": true})", "timeout"},
           {R"({"idle_timeout": -5})", "idle_timeout"},
           {R"({"name": ""})", "name"},
           {R"({"name": "-x"})", "name"},
           {R"({"name": "a/b"})", "name"},
           {R"({"metadata": {"k": 1}})", "metadata.k"},
           {R"({"metadata": "k=v"})", "metadata"},
           {R"({"cwd": "rel"})", "cwd"},
           {R"({"cwd": 5})", "cwd"}}) {
    json b = json::parse(text);
    auto bad = take_lifetime(b);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.error().where, where) << text << ": " << bad.error().to_string();
  }
  json many = {{"metadata", json::object()}};
  for (int i = 0; i < 65; ++i) many["metadata"]["k" + std::to_string(i)] = "v";
  EXPECT_FALSE(take_lifetime(many).ok());
  EXPECT_FALSE(check_sandbox_name(std::string(65, 'a'), "name").ok());
  EXPECT_TRUE(check_sandbox_name(std::string(64, 'a'), "name").ok());
}

TEST(LifetimeRequest, ThePolicyGivesTheDefaultAndTheMost) {
  auto project = policy::parse_policy_doc(
      json::parse(R"({"sandbox_timeout": "30m", "sandbox_timeout_max": "2h"})"));
  ASSERT_TRUE(project.ok()) << project.error().to_string();
  const auto p = policy::OperatorPolicy::resolve("acme", &*project, nullptr, policy::HostCapacity{});
  std::chrono::milliseconds t{0};
  ASSERT_TRUE(p.bound_sandbox_timeout(t, false, "timeout").ok());
  EXPECT_EQ(t, 30min);
  t = 3h;
  auto refused = p.bound_sandbox_timeout(t, true, "timeout");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kDenied);
  EXPECT_NE(refused.error().message.find("2h, set by the operator policy of project acme"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(p.explain()["sandbox_timeout"]["source"], "project");

  // Built in: 1h and 24h; a default above the most is lowered to it.
  const auto builtin = policy::OperatorPolicy::resolve("b", nullptr, nullptr, {});
  EXPECT_EQ(builtin.sandbox_timeout(), 1h);
  EXPECT_EQ(builtin.sandbox_timeout_max(), 24h);
  auto low = policy::parse_policy_doc(json::parse(R"({"sandbox_timeout_max": "10m"})"));
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(policy::OperatorPolicy::resolve("c", &*low, nullptr, {}).sandbox_timeout(), 10min);
  EXPECT_FALSE(policy::parse_policy_doc(json::parse(R"({"sandbox_timeout": "0s"})")).ok());
  EXPECT_FALSE(policy::parse_policy_doc(json::parse(R"({"sandbox_timeout": 5})")).ok());
}

}  // namespace
}  // namespace rf
