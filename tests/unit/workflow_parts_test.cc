// The parts workflows are built of (issue 12), without root: the JSON
// Schema subset, SigV4 against AWS's own example, agent adapters (argv never
// takes a value from the environment), the git push plan (the token only in
// git's environment), URLs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agents/adapter.h"
#include "artifact/git_push.h"
#include "artifact/sigv4.h"
#include "http_client/http_client.h"
#include "in_process/json_schema.h"
#include "in_process/json_step.h"

namespace rf {
namespace {

using nlohmann::json;

TEST(JsonSchema, ChecksWhatAWorkflowNeeds) {
  const json schema = json::parse(R"({
    "type": "object",
    "required": ["name", "items"],
    "properties": {
      "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
      "items": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/item"}, "uniqueItems": true},
      "mode": {"enum": ["a", "b"]}
    },
    "additionalProperties": false,
    "$defs": {"item": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10}}
  })");
  EXPECT_TRUE(
      in_process::validate_json(schema, json::parse(R"({"name": "ab", "items": [1, 2]})")).empty());
  const auto bad = in_process::validate_json(
      schema, json::parse(R"({"name": "A", "items": [1, 1, 10, -1, 2.5], "mode": "c", "x": 1})"));
  const std::vector<std::string> expected = {
      "/items: items 0 and 1 are equal",
      "/items/2: not below 10",
      "/items/3: below the minimum 0",
      "/items/4: expected a integer, got number 2.5",
      "/mode: \"c\" is not one of [\"a\",\"b\"]",
      "/name: shorter than 2 characters",
      "/name: does not match the pattern \"^[a-z]+$\"",
      "/x: the property \"x\" is not allowed",
  };
  EXPECT_EQ(bad, expected);
  EXPECT_EQ(in_process::validate_json(schema, json::parse("[]")),
            std::vector<std::string>{"/: expected a object, got array []"});
  // A keyword it does not know is refused, never silently ignored.
  auto refused = in_process::check_schema(json::parse(R"({"properties": {"a": {"format2": 1}}})"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(
      refused.error().to_string(),
      "/properties/a/format2: keyword \"format2\" is not supported (see the json step's docs)");
  EXPECT_FALSE(in_process::check_schema(json::parse(R"({"$ref": "http://elsewhere/x"})")).ok());
  const json anyof = json::parse(R"({"oneOf": [{"type": "integer"}, {"minimum": 5}]})");
  EXPECT_TRUE(in_process::validate_json(anyof, 3).empty());
  EXPECT_EQ(in_process::validate_json(anyof, 7),
            std::vector<std::string>{"/: matches 2 of oneOf, not exactly one"});
}

TEST(JsonStep, PatchesPicksAndChecks) {
  in_process::JsonStepSpec s;
  s.input_text = R"({"a": {"b": [1, 2]}})";
  s.patch = json::parse(R"([{"op": "add", "path": "/a/b/-", "value": 3}])");
  s.pointer = "/a/b";
  s.schema = json::parse(R"({"type": "array", "maxItems": 3})");
  auto v = in_process::run_json_step(s);
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(*v, json::parse("[1, 2, 3]"));
  s.pointer = "/nope";
  EXPECT_EQ(in_process::run_json_step(s).error().to_string(),
            "pointer /nope: no such value in the input");
  s.input_text = "{not json";
  EXPECT_EQ(in_process::run_json_step(s).error().where, "input");
}

// AWS's published example (S3, "GET Object"): the signature must match.
TEST(SigV4, MatchesTheAwsDocumentationExample) {
  artifact::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.headers = {{"Range", "bytes=0-9"}};
  r.payload_sha256 = artifact::sha256_hex("");
  const auto s =
      artifact::sign_v4(r, {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""},
                        "us-east-1", "s3", "20130524T000000Z");
  EXPECT_EQ(s.signed_headers, "host;range;x-amz-content-sha256;x-amz-date");
  std::string auth;
  for (const auto& [k, v] : s.headers) {
    if (k == "Authorization") auth = v;
  }
  EXPECT_EQ(auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(artifact::uri_encode_path("a b/c+d~é"), "a%20b/c%2Bd~%C3%A9");
}

TEST(AgentAdapter, ParsesAndPlansWithoutPuttingEnvironmentValuesInArgv) {
  auto a = agents::parse_adapter(R"(name: t
argv: [t, --prompt, "{{prompt}}", --home, "{{home}}"]
env: {HOME: "{{home}}", URL: "{{endpoint}}", KEY_COPY: "{{env.API_KEY}}", MODEL: "{{env.M|small}}"}
keys: [API_KEY]
endpoint: {env: BASE, default: "https://api.example.com"}
files: [{path: .t/config, content: "key_env = API_KEY\nurl = {{endpoint}}\n"}]
result: {from: stdout, format: json, answer: /result, error: /failed}
)",
                                 "t.yaml");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  agents::PlanInput in;
  in.prompt = "do {{env.API_KEY}}";  // a prompt that names a placeholder stays text
  in.env = {{"API_KEY", "sk-secret"}, {"BASE", "http://model.test:9"}};
  auto p = agents::plan_agent(*a, in);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->argv, (std::vector<std::string>{"t", "--prompt", "do {{env.API_KEY}}", "--home",
                                               "/tmp/rf-agent/home"}));
  EXPECT_EQ(p->env.at("URL"), "http://model.test:9");
  EXPECT_EQ(p->env.at("KEY_COPY"), "sk-secret");
  EXPECT_EQ(p->env.at("MODEL"), "small");
  EXPECT_EQ(p->files[0].path, "/tmp/rf-agent/home/.t/config");
  EXPECT_EQ(p->files[0].content, "key_env = API_KEY\nurl = http://model.test:9\n");
  // The key it needs is missing: named.
  in.env.erase("API_KEY");
  EXPECT_EQ(agents::plan_agent(*a, in).error().to_string(),
            "agent t: needs API_KEY from identity (add it to an identity profile, e.g. "
            "API_KEY=secret:NAME)");
  // Its answer, and its failure flag.
  auto ans = agents::read_answer(*a, "notice\n{\"result\": \"ok\", \"failed\": false}\n");
  ASSERT_TRUE(ans.ok());
  EXPECT_EQ(ans->answer, "ok");
  EXPECT_FALSE(ans->is_error);
  EXPECT_TRUE(agents::read_answer(*a, "{\"result\": \"x\", \"failed\": true}")->is_error);
  // Bad adapters: errors name the file, the line and the key.
  EXPECT_EQ(agents::parse_adapter("name: x\nargv: [x]\nargv: [y]\nresult: {}\n", "b.yaml")
                .error()
                .to_string(),
            "b.yaml:3: argv: duplicate key (first at line 2)");
  EXPECT_EQ(agents::parse_adapter("name: x\nargv: [x]\nresult: {format: xml}\n", "b.yaml")
                .error()
                .to_string(),
            "b.yaml:3: result.format: expected json, jsonl or text");
  EXPECT_EQ(agents::parse_adapter("name: x\nargv: [\"{{secret}}\"]\nresult: {}\n", "b.yaml")
                .error()
                .to_string(),
            "b.yaml:2: argv: unknown placeholder {{secret}} (prompt, home, tmp, workdir, "
            "endpoint, env.NAME)");
  EXPECT_EQ(agents::parse_adapter("name: x\nargv: [x]\nresult: {}\nmemory_floor: 256m\n", "b.yaml")
                .error()
                .to_string(),
            "b.yaml:4: memory_floor: at least 1g: agents peak at hundreds of MB (Claude Code ~310 "
            "MB, opencode ~660 MB)");
}

TEST(AgentAdapter, TheShippedAdaptersParse) {
  for (const char* name : {"claude-code", "codex"}) {
    auto a = agents::load_adapter(name, std::string(RF_SOURCE_DIR) + "/agents");
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    EXPECT_GE(a->memory_floor, 1ull << 30);
  }
  EXPECT_NE(agents::load_adapter("gemini", std::string(RF_SOURCE_DIR) + "/agents")
                .error()
                .to_string()
                .find("(agents: "),
            std::string::npos);
}

TEST(GitPush, TheTokenIsOnlyInGitsEnvironment) {
  const std::string token = "ghp_0123456789abcdef";
  auto p = artifact::plan_git_push({"https://git.example.com/acme/site.git", "main", "msg"}, token);
  ASSERT_TRUE(p.ok());
  for (const auto& a : p->argv) EXPECT_EQ(a.find(token), std::string::npos);
  EXPECT_EQ(p->env.at("GIT_CONFIG_KEY_0"),
            "http.https://git.example.com/acme/site.git.extraHeader");
  EXPECT_EQ(p->env.at("GIT_CONFIG_VALUE_0").rfind("Authorization: Basic ", 0), 0u);
  EXPECT_EQ(p->env.at("GIT_CONFIG_VALUE_1"),
            "/dev/null");  // core.hooksPath: the agent's hooks never run
  EXPECT_EQ(p->env.at("GIT_CONFIG_GLOBAL"), "/dev/null");
  EXPECT_FALSE(
      artifact::plan_git_push({"https://u:p@git.example.com/x.git", "main", ""}, token).ok());
  EXPECT_FALSE(artifact::plan_git_push({"ssh://git.example.com/x.git", "main", ""}, token).ok());
  EXPECT_FALSE(artifact::plan_git_push({"https://git.example.com/x.git", "-f", ""}, token).ok());
  EXPECT_FALSE(artifact::plan_git_push({"https://git.example.com/x.git", "a..b", ""}, token).ok());
  EXPECT_EQ(artifact::pushed_commit("x\nrf-commit 0123456789abcdef0123456789abcdef01234567\n"),
            "0123456789abcdef0123456789abcdef01234567");
  EXPECT_FALSE(artifact::pushed_commit("rf-commit nothex").has_value());
}

TEST(HttpUrl, ParsesAndRefuses) {
  auto u = http::parse_url("https://api.example.com/v1/x?y=1");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "api.example.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/v1/x?y=1");
  EXPECT_EQ(u->authority(), "api.example.com");
  EXPECT_EQ(http::parse_url("http://[::1]:8080").value().authority(), "[::1]:8080");
  EXPECT_EQ(http::parse_url("http://0x7f.1:80/").value().host, "127.0.0.1");
  for (const char* bad :
       {"ftp://x/", "http://u:p@x/", "http://x/#f", "http://x y/", "http://:80/"}) {
    EXPECT_FALSE(http::parse_url(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rf
