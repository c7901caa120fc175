#include "proto/messages.h"

#include <gtest/gtest.h>

#include "proto/frame.h"

namespace rf::proto {
namespace {

TEST(Messages, ExecRoundTrip) {
  ExecRequest e;
  e.argv = {"sh", "-c", "echo hi"};
  e.env = {{"PATH", "/usr/bin"}};
  e.timeout_ms = 5000;
  e.output_limit = 1024;
  e.pty = true;
  auto back = parse_exec(to_json(e));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->argv, e.argv);
  EXPECT_EQ(back->env, e.env);
  EXPECT_EQ(back->timeout_ms, 5000);
  EXPECT_TRUE(back->pty);
}

TEST(Messages, ExecSaysStartedOnlyWhenNotWanted) {
  ExecRequest e;
  e.argv = {"true"};
  // The default is left out, as a runner before the field reads it.
  EXPECT_EQ(to_json(e).find("started"), std::string::npos);
  EXPECT_TRUE(parse_exec(to_json(e))->started);
  e.started = false;
  EXPECT_NE(to_json(e).find("\"started\":false"), std::string::npos) << to_json(e);
  EXPECT_FALSE(parse_exec(to_json(e))->started);
  EXPECT_EQ(parse_exec(R"({"argv":["a"],"started":1})").error().where, "exec.started");
}

TEST(Messages, ErrorsNameTheField) {
  EXPECT_EQ(parse_exec("{}").error().to_string(), "exec.argv: missing");
  EXPECT_EQ(parse_exec(R"({"argv":[]})").error().to_string(), "exec.argv: must name a command");
  EXPECT_EQ(parse_exec(R"({"argv":["a",2]})").error().to_string(),
            "exec.argv[1]: expected a string");
  EXPECT_EQ(parse_exec(R"({"argv":["a"],"env":{"X":1}})").error().to_string(),
            "exec.env.X: expected a string");
  EXPECT_EQ(parse_exec(R"({"argv":["a"],"timeout_ms":-1})").error().where, "exec.timeout_ms");
  EXPECT_EQ(parse_exec(R"({"argv":["a"],"rows":1e9})").error().where, "exec.rows");
  EXPECT_EQ(parse_exec("nope").error().to_string(), "exec: not valid JSON");
  EXPECT_EQ(parse_exit(R"({"exit_code":"0"})").error().to_string(),
            "exit.exit_code: expected an integer");
  EXPECT_EQ(parse_signal(R"({"signal":999})").error().where, "signal.signal");
  EXPECT_EQ(parse_file_request(R"({"path":""})").error().where, "file.path");
}

TEST(Messages, VersionRange) {
  EXPECT_TRUE(check_compatible("0.1.0").ok());
  EXPECT_TRUE(check_compatible("0.1.9").ok());
  EXPECT_TRUE(check_compatible("0.2.0").ok());  // 0.2 adds cred_request/cred_answer
  EXPECT_TRUE(check_compatible("0.3.0").ok());  // 0.3 adds cred_withdrawn
  EXPECT_TRUE(check_compatible("0.4.0").ok());  // 0.4 adds file_mkdir, file_remove, file_move
  EXPECT_TRUE(check_compatible("0.5.0").ok());  // 0.5 adds file_watch and its events
  EXPECT_TRUE(check_compatible("0.6.0").ok());  // 0.6 adds port_input and port_close
  EXPECT_FALSE(check_compatible("0.7.0").ok());
  EXPECT_FALSE(check_compatible("1.1.0").ok());
  EXPECT_FALSE(check_compatible("0.1").ok());
  EXPECT_FALSE(check_compatible("0.1.0-rc1").ok());
  EXPECT_NE(check_compatible("0.7.0").error().message.find(">=0.1,<0.7"), std::string::npos);
}

TEST(Messages, CredRequestAndAnswerRoundTripAndBoundsNameTheField) {
  CredRequest r{7, "GITHUB_TOKEN", "push", "ship it", 12};
  auto back = parse_cred_request(to_json(r));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->request, 7u);
  EXPECT_EQ(back->name, "GITHUB_TOKEN");
  EXPECT_EQ(back->scope, "push");
  EXPECT_EQ(back->reason, "ship it");
  EXPECT_EQ(back->pid, 12);
  auto a = parse_cred_answer(to_json(CredAnswer{7, false, "denied by rule 2"}));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->granted);
  EXPECT_EQ(a->message, "denied by rule 2");
  EXPECT_EQ(parse_cred_request(R"({"name":"X"})").error().to_string(),
            "cred_request.request: missing");
  EXPECT_EQ(parse_cred_request(R"({"request":0,"name":"X"})").error().to_string(),
            "cred_request.request: 0 is never a request");
  EXPECT_EQ(parse_cred_request(R"({"request":1,"name":""})").error().to_string(),
            "cred_request.name: empty");
  EXPECT_EQ(parse_cred_request(R"({"request":1,"name":7})").error().to_string(),
            "cred_request.name: expected a string");
  EXPECT_EQ(parse_cred_request(R"({"request":1,"name":")" + std::string(257, 'x') + R"("})")
                .error()
                .to_string(),
            "cred_request.name: longer than 256 bytes");
  EXPECT_EQ(
      parse_cred_request(R"({"request":1,"name":"X","reason":")" + std::string(4097, 'x') + R"("})")
          .error()
          .to_string(),
      "cred_request.reason: longer than 4096 bytes");
  EXPECT_EQ(parse_cred_request(R"({"request":1,"name":"X","pid":-1})").error().to_string(),
            "cred_request.pid: out of range");
  EXPECT_EQ(parse_cred_answer(R"({"request":1})").error().to_string(),
            "cred_answer.granted: missing");
  EXPECT_EQ(std::string(type_name(MsgType::kCredRequest)), "cred_request");
  EXPECT_TRUE(known_type(50));
  EXPECT_TRUE(known_type(51));
  EXPECT_TRUE(known_type(52));
  EXPECT_FALSE(known_type(53));
}

TEST(Messages, CredWithdrawnRoundTripsAndNamesABadRequest) {
  auto w = parse_cred_withdrawn(to_json(CredWithdrawn{9}));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_EQ(w->request, 9u);
  EXPECT_EQ(parse_cred_withdrawn("{}").error().to_string(), "cred_withdrawn.request: missing");
  EXPECT_EQ(parse_cred_withdrawn(R"({"request":0})").error().to_string(),
            "cred_withdrawn.request: 0 is never a request");
  EXPECT_EQ(parse_cred_withdrawn(R"({"request":-1})").error().to_string(),
            "cred_withdrawn.request: out of range");
  EXPECT_EQ(std::string(type_name(MsgType::kCredWithdrawn)), "cred_withdrawn");
}

TEST(EnvNames, JoinedAndReadBackOrANamedError) {
  EXPECT_EQ(join_env_names({"PATH", "HOME", "_X1"}), "PATH,HOME,_X1");
  EXPECT_EQ(*parse_env_names("PATH,HOME,_X1"), (std::vector<std::string>{"PATH", "HOME", "_X1"}));
  EXPECT_TRUE(parse_env_names("")->empty());
  EXPECT_EQ(parse_env_names("PATH,,HOME").error().to_string(),
            "--self-probe-at-start: bad variable name \"\" (NAME,NAME,...)");
  EXPECT_EQ(parse_env_names("A,B-C").error().to_string(),
            "--self-probe-at-start: bad variable name \"B-C\" (NAME,NAME,...)");
  EXPECT_EQ(parse_env_names("A,").error().to_string(), "--self-probe-at-start: ends in ','");
  EXPECT_FALSE(valid_env_name("9LIVES"));
  EXPECT_TRUE(valid_env_name("lower_ok"));
}

}  // namespace
}  // namespace rf::proto
