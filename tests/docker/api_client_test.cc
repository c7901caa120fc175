// The Docker API client against the real test dockerd: version negotiation,
// errors, an attach stream round trip, the archive API, TCP.
#include "docker/api_client.h"

#include <gtest/gtest.h>

#include "docker/docker_host.h"
#include "docker/stream_demux.h"
#include "docker/tar_archive.h"
#include "support/docker_daemon.h"

namespace rf::docker {
namespace {

using rf::testing::test_daemon;

std::unique_ptr<ApiClient> connect(const std::string& url) {
  auto host = parse_docker_host(url);
  EXPECT_TRUE(host.ok()) << host.error().to_string();
  auto c = ApiClient::connect(*host);
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(DockerApi, NegotiatesAVersionAndPings) {
  RF_REQUIRE_DOCKER();
  auto c = connect(test_daemon().unix_host());
  ASSERT_TRUE(c);
  EXPECT_LE(c->api_version(), std::string("1.41"));
  EXPECT_TRUE(c->version_info().contains("Version"));
  auto ping = c->request("GET", "/_ping");
  ASSERT_TRUE(ping.ok());
  EXPECT_EQ(ping->status, 200);
  EXPECT_EQ(ping->body, "OK");
}

TEST(DockerApi, AMissingImageIsAnErrorWithTheDaemonsWords) {
  RF_REQUIRE_DOCKER();
  auto c = connect(test_daemon().unix_host());
  ASSERT_TRUE(c);
  auto r = c->call("GET", "/images/rf-test-missing:0/json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("404 ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("No such image: rf-test-missing:0"), std::string::npos)
      << r.error().message;
}

// cat in a container: what goes in on the attach stream comes back on stdout.
void attach_round_trip(ApiClient& c) {
  const nlohmann::json body = {{"Image", test_daemon().image()},
                               {"Entrypoint", {"cat"}},
                               {"OpenStdin", true},
                               {"StdinOnce", true},
                               {"AttachStdin", true},
                               {"AttachStdout", true},
                               {"AttachStderr", true},
                               {"HostConfig", {{"NetworkMode", "none"}, {"AutoRemove", true}}}};
  auto made = c.call("POST", "/containers/create", &body);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  const std::string id = (*made)["Id"];
  auto conn = c.hijack("POST", "/containers/" + id + "/attach?stream=1&stdin=1&stdout=1&stderr=1");
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  ASSERT_TRUE(c.call("POST", "/containers/" + id + "/start").ok());
  // The archive API on a running container: a file in, the same file out.
  auto tar = write_tar({{"note.txt", "archived\n", 0644}});
  ASSERT_TRUE(tar.ok());
  RequestOptions o;
  o.content_type = "application/x-tar";
  auto put = c.request("PUT", "/containers/" + id + "/archive?path=%2Ftmp", *tar, o);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->status, 200) << put->body;
  auto got = c.request("GET", "/containers/" + id + "/archive?path=%2Ftmp%2Fnote.txt");
  ASSERT_TRUE(got.ok());
  auto entries = read_tar(got->body, 1 << 20);
  ASSERT_TRUE(entries.ok()) << entries.error().to_string();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].content, "archived\n");

  ASSERT_TRUE((*conn)->write_all("hello\n").ok());
  ASSERT_TRUE((*conn)->shutdown_write().ok());
  std::string out;
  StreamDemux demux([&](int stream, std::string_view p) {
    if (stream == 1) out.append(p);
  });
  char buf[4096];
  for (;;) {
    auto n = (*conn)->read_some(buf, sizeof buf, std::chrono::seconds(20));
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    if (*n == 0) break;
    ASSERT_TRUE(demux.feed(std::string_view(buf, *n)).ok());
  }
  EXPECT_EQ(out, "hello\n");
  (void)c.request("DELETE", "/containers/" + id + "?force=1");
}

TEST(DockerApi, AttachStreamAndArchiveOverTheUnixSocket) {
  RF_REQUIRE_DOCKER();
  auto c = connect(test_daemon().unix_host());
  ASSERT_TRUE(c);
  attach_round_trip(*c);
}

TEST(DockerApi, AttachStreamAndArchiveOverTcp) {
  RF_REQUIRE_DOCKER();
  if (test_daemon().tcp_host().empty()) GTEST_SKIP() << "the test daemon has no TCP listener";
  auto c = connect(test_daemon().tcp_host());
  ASSERT_TRUE(c);
  attach_round_trip(*c);
}

TEST(DockerApi, AnUnreachableDaemonIsAClearError) {
  auto c = ApiClient::connect(*parse_docker_host("unix:///nonexistent/docker.sock"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().to_string().find("/nonexistent/docker.sock"), std::string::npos)
      << c.error().to_string();
}

}  // namespace
}  // namespace rf::docker
