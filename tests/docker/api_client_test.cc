// The Docker API client against the real test dockerd (tests/support/docker_daemon.h):
// version negotiation, the daemon's errors, an attach stream round trip, the
// archive API; over the unix socket, and over TCP and SSH when the test daemon
// offers them.
#include "docker_api/api_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "docker_api/docker_host.h"
#include "docker_api/stream_demux.h"
#include "docker_api/tar_archive.h"
#include "support/docker_daemon.h"

namespace rf::docker {
namespace {

using rf::testing::test_daemon;
using std::chrono::milliseconds;
using std::chrono::seconds;

// RINGFENCE_SSH_OPTIONS for the test sshd, for one test.
class SshOptions {
 public:
  SshOptions() {
    if (const char* old = std::getenv("RINGFENCE_SSH_OPTIONS")) old_ = old;
    ::setenv("RINGFENCE_SSH_OPTIONS", test_daemon().ssh_options().c_str(), 1);
  }
  ~SshOptions() {
    if (old_) {
      ::setenv("RINGFENCE_SSH_OPTIONS", old_->c_str(), 1);
    } else {
      ::unsetenv("RINGFENCE_SSH_OPTIONS");
    }
  }

 private:
  std::optional<std::string> old_;
};

std::unique_ptr<ApiClient> connect(const std::string& url) {
  auto host = parse_docker_host(url);
  EXPECT_TRUE(host.ok()) << host.error().to_string();
  if (!host) return nullptr;
  auto c = ApiClient::connect(*host, seconds(20));
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return c.ok() ? std::move(*c) : nullptr;
}

// A container that is force-removed however the test ends.
class Container {
 public:
  Container(ApiClient& api, const nlohmann::json& body) : api_(api) {
    auto made = api_.call("POST", "/containers/create", &body);
    EXPECT_TRUE(made.ok()) << made.error().to_string();
    if (made.ok()) id_ = (*made).value("Id", "");
  }
  ~Container() {
    if (id_.empty()) return;
    auto gone = api_.request("DELETE", "/containers/" + id_ + "?force=1");
    EXPECT_TRUE(gone.ok()) << gone.error().to_string();
    if (gone.ok()) {
      EXPECT_TRUE(gone->status == 204 || gone->status == 404) << gone->body;
    }
  }
  const std::string& id() const { return id_; }

 private:
  ApiClient& api_;
  std::string id_;
};

nlohmann::json cat_container(bool stdin_once) {
  return {{"Image", test_daemon().image()},
          {"Cmd", {"cat"}},
          {"OpenStdin", true},
          {"StdinOnce", stdin_once},
          {"AttachStdin", true},
          {"AttachStdout", true},
          {"AttachStderr", true},
          {"Labels", {{"ringfence.test", "api_client_test"}}},
          {"HostConfig", {{"NetworkMode", "none"}}}};
}

// Reads the attach stream into `out` (stdout) until `enough(out)` or EOF.
// False on a transport or framing error (reported).
bool read_stream(Connection& conn, std::string& out, const std::function<bool()>& enough) {
  StreamDemux demux([&](int stream, std::string_view p) {
    if (stream == 1) out.append(p);
  });
  char buf[4096];
  while (!enough()) {
    auto n = conn.read_some(buf, sizeof buf, seconds(20));
    if (!n.ok()) {
      ADD_FAILURE() << n.error().to_string() << " (after " << out.size() << " bytes)";
      return false;
    }
    if (*n == 0) break;
    if (auto s = demux.feed(std::string_view(buf, *n)); !s) {
      ADD_FAILURE() << s.error().to_string();
      return false;
    }
  }
  return true;
}

TEST(DockerApi, NegotiatesAVersionAndPings) {
  RF_REQUIRE_DOCKER();
  auto c = connect(test_daemon().unix_host());
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->api_version() == "1.41" || c->api_version() == "1.40") << c->api_version();
  EXPECT_TRUE(c->version_info().contains("Version"));
  EXPECT_TRUE(c->version_info().contains("ApiVersion"));
  EXPECT_FALSE(c->server_version().empty());
  auto ping = c->request("GET", "/_ping");
  ASSERT_TRUE(ping.ok()) << ping.error().to_string();
  EXPECT_EQ(ping->status, 200);
  EXPECT_EQ(ping->body, "OK");
  EXPECT_FALSE(ping->headers["api-version"].empty());
  auto head = c->request("HEAD", "/_ping");  // no body, and the connection lives on
  ASSERT_TRUE(head.ok()) << head.error().to_string();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  auto info = c->call("GET", "/info");
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_TRUE(info->contains("Containers"));
}

TEST(DockerApi, AMissingImageIsAnErrorWithTheDaemonsWords) {
  RF_REQUIRE_DOCKER();
  auto c = connect(test_daemon().unix_host());
  ASSERT_TRUE(c);
  auto r = c->call("GET", "/images/rf-test-missing:0/json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "docker GET /images/rf-test-missing:0/json");
  EXPECT_EQ(r.error().message.rfind("404 ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("No such image: rf-test-missing:0"), std::string::npos)
      << r.error().message;
  auto attach = c->hijack("POST", "/containers/rf-test-no-such-container/attach?stream=1");
  ASSERT_FALSE(attach.ok());
  EXPECT_NE(attach.error().message.find("No such container"), std::string::npos)
      << attach.error().to_string();
}

// cat in a container: what goes in on the attach stream comes back on
// stdout, written from one thread while another reads (as the backend does);
// then the archive API on the same container.
void attach_round_trip(ApiClient& c) {
  Container box(c, cat_container(/*stdin_once=*/false));
  ASSERT_FALSE(box.id().empty());
  const std::string& id = box.id();
  auto conn = c.hijack("POST", "/containers/" + id + "/attach?stream=1&stdin=1&stdout=1&stderr=1");
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  auto started = c.call("POST", "/containers/" + id + "/start");
  ASSERT_TRUE(started.ok()) << started.error().to_string();

  ASSERT_TRUE((*conn)->write_all("hello\n").ok());
  std::string out;
  ASSERT_TRUE(read_stream(**conn, out, [&] { return out.size() >= 6; }));
  EXPECT_EQ(out, "hello\n");

  std::string expected;
  for (int i = 0; i < 200; ++i) expected += "line " + std::to_string(i) + "\n";
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) {
      auto s = (*conn)->write_all("line " + std::to_string(i) + "\n");
      if (!s) {
        ADD_FAILURE() << s.error().to_string();
        return;
      }
    }
  });
  out.clear();
  const bool read_ok = read_stream(**conn, out, [&] { return out.size() >= expected.size(); });
  writer.join();
  ASSERT_TRUE(read_ok);
  EXPECT_EQ(out, expected);

  // The archive API: a directory and two files in, the same out.
  auto tar = write_tar({{"rf-dir", "", 0750, true},
                        {"rf-dir/tool", std::string(100000, 't'), 0755},
                        {"rf-dir/note.txt", "archived\n", 0640}});
  ASSERT_TRUE(tar.ok()) << tar.error().to_string();
  RequestOptions o;
  o.content_type = "application/x-tar";
  auto put = c.request("PUT", "/containers/" + id + "/archive?path=" + url_encode("/tmp"), *tar, o);
  ASSERT_TRUE(put.ok()) << put.error().to_string();
  EXPECT_EQ(put->status, 200) << put->body;
  auto got = c.request("GET", "/containers/" + id + "/archive?path=" + url_encode("/tmp/rf-dir"));
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->status, 200) << got->body;
  EXPECT_FALSE(got->headers["x-docker-container-path-stat"].empty());
  auto entries = read_tar(got->body, 1 << 20);
  ASSERT_TRUE(entries.ok()) << entries.error().to_string();
  ASSERT_EQ(entries->size(), 3u);
  std::map<std::string, TarEntry> by_path;
  for (auto& e : *entries) by_path[e.path] = e;
  ASSERT_TRUE(by_path.count("rf-dir"));
  EXPECT_TRUE(by_path["rf-dir"].directory);
  EXPECT_EQ(by_path["rf-dir"].mode, 0750u);
  EXPECT_EQ(by_path["rf-dir/tool"].content, std::string(100000, 't'));
  EXPECT_EQ(by_path["rf-dir/tool"].mode, 0755u);
  EXPECT_EQ(by_path["rf-dir/note.txt"].content, "archived\n");
  EXPECT_EQ(by_path["rf-dir/note.txt"].mode, 0640u);
  auto missing = c.call("GET", "/containers/" + id + "/archive?path=" + url_encode("/nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message.rfind("404 ", 0), 0u) << missing.error().message;

  // Force-removing the container ends the stream: EOF, not an error.
  auto gone = c.request("DELETE", "/containers/" + id + "?force=1");
  ASSERT_TRUE(gone.ok()) << gone.error().to_string();
  EXPECT_EQ(gone->status, 204) << gone->body;
  out.clear();
  EXPECT_TRUE(read_stream(**conn, out, [] { return false; }));
}

// StdinOnce: our half-close is the end of cat's stdin, so cat exits and the
// stream ends after the echo.
void half_close(ApiClient& c) {
  Container box(c, cat_container(/*stdin_once=*/true));
  ASSERT_FALSE(box.id().empty());
  auto conn =
      c.hijack("POST", "/containers/" + box.id() + "/attach?stream=1&stdin=1&stdout=1&stderr=1");
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  ASSERT_TRUE(c.call("POST", "/containers/" + box.id() + "/start").ok());
  ASSERT_TRUE((*conn)->write_all("bye\n").ok());
  ASSERT_TRUE((*conn)->shutdown_write().ok());
  std::string out;
  ASSERT_TRUE(read_stream(**conn, out, [] { return false; }));  // to EOF
  EXPECT_EQ(out, "bye\n");
  RequestOptions o;
  o.timeout = seconds(20);
  auto waited = c.call("POST", "/containers/" + box.id() + "/wait", nullptr, o);
  ASSERT_TRUE(waited.ok()) << waited.error().to_string();
  EXPECT_EQ((*waited).value("StatusCode", -1), 0);
}

TEST(DockerApi, AttachStreamAndArchiveOverTheUnixSocket) {
  RF_REQUIRE_DOCKER();
  auto c = connect(test_daemon().unix_host());
  ASSERT_TRUE(c);
  attach_round_trip(*c);
  half_close(*c);
}

TEST(DockerApi, AttachStreamAndArchiveOverTcp) {
  RF_REQUIRE_DOCKER();
  if (test_daemon().tcp_host().empty()) RF_SKIP() << "the test daemon has no TCP listener";
  auto c = connect(test_daemon().tcp_host());
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->version_info().contains("Version"));
  attach_round_trip(*c);
  half_close(*c);
}

TEST(DockerApi, AttachStreamAndArchiveOverSsh) {
  RF_REQUIRE_DOCKER();
  if (test_daemon().ssh_host().empty()) {
    RF_SKIP() << "the test daemon has no ssh access"
              << (test_daemon().get("SSH_SKIP_REASON").empty()
                      ? std::string()
                      : ": " + test_daemon().get("SSH_SKIP_REASON"));
  }
  SshOptions ssh;
  auto c = connect(test_daemon().ssh_host());
  ASSERT_TRUE(c);
  attach_round_trip(*c);
  half_close(*c);
}

TEST(DockerApi, SshThatCannotLogInSaysWhy) {
  RF_REQUIRE_DOCKER();
  if (test_daemon().ssh_host().empty()) RF_SKIP() << "the test daemon has no ssh access";
  SshOptions ssh;
  auto host = parse_docker_host(test_daemon().ssh_host());
  ASSERT_TRUE(host.ok());
  host->user = "rf-no-such-user";
  auto c = ApiClient::connect(*host, seconds(20));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().to_string().find("Permission denied"), std::string::npos)
      << c.error().to_string();
}

TEST(DockerApi, AnUnreachableDaemonIsAClearError) {
  auto c = ApiClient::connect(*parse_docker_host("unix:///nonexistent/docker.sock"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().to_string().find("/nonexistent/docker.sock"), std::string::npos)
      << c.error().to_string();
}

}  // namespace
}  // namespace rf::docker
