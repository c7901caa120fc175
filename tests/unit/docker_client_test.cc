// The Docker API client's pure parts: host URLs, the attach stream demuxer,
// tar archives, and HTTP against an in-process server on a unix socket.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "docker/api_client.h"
#include "docker/docker_host.h"
#include "docker/stream_demux.h"
#include "docker/tar_archive.h"

namespace rf::docker {
namespace {

TEST(DockerHostUrl, ParsesEveryKind) {
  auto u = parse_docker_host("unix:///var/run/docker.sock");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->kind, DockerHost::Kind::kUnix);
  EXPECT_EQ(u->path, "/var/run/docker.sock");
  EXPECT_TRUE(u->is_local());
  ::unsetenv("DOCKER_TLS_VERIFY");
  auto t = parse_docker_host("tcp://127.0.0.1:2375");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind, DockerHost::Kind::kTcp);
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 2375);
  EXPECT_FALSE(t->tls);
  EXPECT_FALSE(t->is_local());
  auto v6 = parse_docker_host("tcp://[::1]:2376");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  auto tls = parse_docker_host("https://docker.example:2376");
  ASSERT_TRUE(tls.ok());
  EXPECT_TRUE(tls->tls);
  auto s = parse_docker_host("ssh://deploy@build.example:2222");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, DockerHost::Kind::kSsh);
  EXPECT_EQ(s->user, "deploy");
  EXPECT_EQ(s->host, "build.example");
  EXPECT_EQ(s->port, 2222);
  auto s2 = parse_docker_host("ssh://build.example");
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->user, "");
  EXPECT_EQ(s2->port, 0);
}

TEST(DockerHostUrl, BadUrlsNameTheUrlAndTheProblem) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"tcp://10.0.0.1", "needs a port"},
      {"tcp://h:99999", "port out of range"},
      {"tcp://h:x", "bad port"},
      {"unix://relative.sock", "absolute socket path"},
      {"ftp://h:1", "unknown scheme"},
      {"docker.sock", "expected unix:///path"},
      {"ssh://-oProxyCommand=x", "bad host"},
      {"tcp://::1:2375", "needs brackets"},
      {"ssh://@host", "empty user"},
  };
  for (const auto& c : cases) {
    auto r = parse_docker_host(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.error().where, std::string("docker host \"") + c.url + "\"");
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << c.url << ": " << r.error().message;
  }
}

std::string frame(int stream, const std::string& payload) {
  std::string f(8, '\0');
  f[0] = static_cast<char>(stream);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f[4] = static_cast<char>(n >> 24);
  f[5] = static_cast<char>(n >> 16);
  f[6] = static_cast<char>(n >> 8);
  f[7] = static_cast<char>(n);
  return f + payload;
}

TEST(DockerStreamDemux, SplitsStdoutAndStderrWhateverTheChunking) {
  const std::string wire = frame(1, "hello ") + frame(2, "oops") + frame(1, "") +
                           frame(1, std::string(70000, 'x')) + frame(0, "echo");
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::string out, err;
    StreamDemux d([&](int s, std::string_view p) { (s == 1 ? out : err).append(p); });
    size_t at = 0;
    while (at < wire.size()) {
      const size_t n = round == 0 ? 1 : std::min<size_t>(wire.size() - at, 1 + rng() % 9000);
      ASSERT_TRUE(d.feed(std::string_view(wire).substr(at, n)).ok());
      at += n;
    }
    EXPECT_TRUE(d.at_boundary());
    EXPECT_EQ(out, "hello " + std::string(70000, 'x'));
    EXPECT_EQ(err, "oops");
  }
}

TEST(DockerStreamDemux, RejectsABadHeaderNamingTheOffsetAndStaysBroken) {
  StreamDemux d([](int, std::string_view) {});
  ASSERT_TRUE(d.feed(frame(1, "abc")).ok());
  std::string bad = frame(1, "x");
  bad[0] = 7;
  auto s = d.feed(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("at byte 11"), std::string::npos) << s.error().message;
  EXPECT_FALSE(d.feed(frame(1, "y")).ok());
  StreamDemux padding([](int, std::string_view) {});
  std::string f = frame(2, "x");
  f[2] = 1;
  EXPECT_FALSE(padding.feed(f).ok());
}

TEST(DockerTar, RoundTripsFilesDirectoriesAndModes) {
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  auto tar = write_tar(
      {{"dir", "", 0755, true}, {"dir/tool", big, 0555}, {"note.txt", "hi\n", 0444, false, 0, 0}});
  ASSERT_TRUE(tar.ok()) << tar.error().to_string();
  auto back = read_tar(*tar, 1 << 20);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_TRUE((*back)[0].directory);
  EXPECT_EQ((*back)[1].path, "dir/tool");
  EXPECT_EQ((*back)[1].content, big);
  EXPECT_EQ((*back)[1].mode, 0555u);
  EXPECT_EQ((*back)[2].content, "hi\n");
  auto limited = read_tar(*tar, 1000);
  ASSERT_FALSE(limited.ok());
  EXPECT_NE(limited.error().to_string().find("dir/tool"), std::string::npos);
  EXPECT_FALSE(read_tar("not a tar archive at all, not even close", 100).ok());
}

// A tiny HTTP server on a unix socket: replies with canned responses, one
// per request, and counts its connections.
class CannedServer {
 public:
  explicit CannedServer(std::vector<std::string> replies) : replies_(std::move(replies)) {
    char tmpl[] = "/tmp/rf-http-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/s.sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string url() const { return "unix://" + path_; }
  int accepts() const { return accepts_; }
  std::string last_request() const { return last_; }

 private:
  void serve() {
    size_t next = 0;
    while (next < replies_.size()) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++accepts_;
      std::string buf;
      char tmp[4096];
      while (next < replies_.size()) {
        // One request: up to the blank line (these tests send no bodies).
        while (buf.find("\r\n\r\n") == std::string::npos) {
          const ssize_t n = ::read(c, tmp, sizeof tmp);
          if (n <= 0) break;
          buf.append(tmp, static_cast<size_t>(n));
        }
        const auto end = buf.find("\r\n\r\n");
        if (end == std::string::npos) break;
        last_ = buf.substr(0, end);
        buf.erase(0, end + 4);
        const std::string& reply = replies_[next++];
        (void)!::write(c, reply.data(), reply.size());
        if (reply.find("Connection: close") != std::string::npos) break;
      }
      ::close(c);
    }
  }
  std::vector<std::string> replies_;
  std::string dir_, path_;
  int fd_ = -1;
  std::thread thread_;
  std::atomic<int> accepts_{0};
  std::string last_;
};

const std::string kVersion =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 47\r\n\r\n"
    R"({"Version":"99.0","ApiVersion":"1.45","Os":"x"})";

TEST(DockerApiClient, NegotiatesReusesConnectionsAndReadsChunkedBodies) {
  CannedServer server({kVersion, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
                       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "5\r\n[1,2,\r\n2\r\n3]\r\n0\r\n\r\n"});
  auto host = parse_docker_host(server.url());
  ASSERT_TRUE(host.ok());
  auto c = ApiClient::connect(*host);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ((*c)->api_version(), "1.41");  // the server's is newer: ours
  EXPECT_EQ((*c)->server_version(), "99.0");
  auto a = (*c)->call("GET", "/info");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_NE(server.last_request().find("GET /v1.41/info HTTP/1.1"), std::string::npos);
  auto b = (*c)->call("GET", "/containers/json");
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(b->dump(), "[1,2,3]");
  EXPECT_EQ(server.accepts(), 1);  // one kept-alive connection for all three
}

TEST(DockerApiClient, AnErrorCarriesTheDaemonsMessage) {
  CannedServer server({kVersion,
                       "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                       "Content-Length: 45\r\n\r\n"
                       R"({"message":"No such image: rf-test/none:1"}  )"});
  auto c = ApiClient::connect(*parse_docker_host(server.url()));
  ASSERT_TRUE(c.ok());
  auto r = (*c)->call("GET", "/images/rf-test%2Fnone%3A1/json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "docker GET /images/rf-test%2Fnone%3A1/json");
  EXPECT_EQ(r.error().message, "404 No such image: rf-test/none:1");
}

TEST(DockerApiClient, HijackKeepsTheBytesThatFollowTheHead) {
  // The version reply closes its connection: a hijack always opens its own.
  std::string version_close = kVersion;
  version_close.insert(version_close.find("\r\n\r\n"), "\r\nConnection: close");
  CannedServer server(
      {version_close,
       "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
       "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\nRAW-BYTES"});
  auto c = ApiClient::connect(*parse_docker_host(server.url()));
  ASSERT_TRUE(c.ok());
  auto conn = (*c)->hijack("POST", "/containers/x/attach?stream=1");
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  EXPECT_NE(server.last_request().find("Upgrade: tcp"), std::string::npos);
  std::string got;
  char buf[64];
  while (got.size() < 9) {
    auto n = (*conn)->read_some(buf, sizeof buf, std::chrono::seconds(5));
    ASSERT_TRUE(n.ok());
    if (*n == 0) break;
    got.append(buf, *n);
  }
  EXPECT_EQ(got, "RAW-BYTES");
}

TEST(DockerApiClient, UrlEncodeKeepsOnlyUnreserved) {
  EXPECT_EQ(url_encode("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(url_encode(R"({"label":["x"]})"), "%7B%22label%22%3A%5B%22x%22%5D%7D");
  EXPECT_EQ(url_encode("rf-test/busybox:1"), "rf-test%2Fbusybox%3A1");
}

}  // namespace
}  // namespace rf::docker
