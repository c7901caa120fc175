// The Docker API client's pure parts: host URLs, the attach stream demuxer,
// tar archives, HTTP against an in-process server on a unix socket, and the
// ssh transport against a fake `ssh` on PATH. No docker, no root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "docker_api/api_client.h"
#include "docker_api/connection.h"
#include "docker_api/docker_host.h"
#include "docker_api/stream_demux.h"
#include "docker_api/tar_archive.h"

namespace rf::docker {
namespace {

using std::chrono::milliseconds;

// Sets an environment variable for one scope, then puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rf-dockertest-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { (void)!std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---- host URLs ----

TEST(DockerHostUrl, ParsesEveryKind) {
  ScopedEnv no_tls("DOCKER_TLS_VERIFY", nullptr);
  auto u = parse_docker_host("unix:///var/run/docker.sock");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->kind, DockerHost::Kind::kUnix);
  EXPECT_EQ(u->path, "/var/run/docker.sock");
  EXPECT_EQ(u->url, "unix:///var/run/docker.sock");
  EXPECT_TRUE(u->is_local());
  auto t = parse_docker_host("tcp://127.0.0.1:2375");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind, DockerHost::Kind::kTcp);
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 2375);
  EXPECT_FALSE(t->tls);
  EXPECT_FALSE(t->is_local());
  auto trailing = parse_docker_host("tcp://docker.example:2375/");
  ASSERT_TRUE(trailing.ok());
  EXPECT_EQ(trailing->host, "docker.example");
  auto v6 = parse_docker_host("tcp://[::1]:2376");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 2376);
  auto tls = parse_docker_host("https://docker.example:2376");
  ASSERT_TRUE(tls.ok());
  EXPECT_EQ(tls->kind, DockerHost::Kind::kTcp);
  EXPECT_TRUE(tls->tls);
  EXPECT_TRUE(tls->tls_verify);
  auto s = parse_docker_host("ssh://deploy@build.example:2222");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, DockerHost::Kind::kSsh);
  EXPECT_EQ(s->user, "deploy");
  EXPECT_EQ(s->host, "build.example");
  EXPECT_EQ(s->port, 2222);
  EXPECT_FALSE(s->is_local());
  auto s2 = parse_docker_host("ssh://build.example");
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->user, "");
  EXPECT_EQ(s2->port, 0);
  auto s6 = parse_docker_host("ssh://root@[fd00::2]:22");
  ASSERT_TRUE(s6.ok());
  EXPECT_EQ(s6->host, "fd00::2");
  EXPECT_EQ(s6->port, 22);
}

TEST(DockerHostUrl, TlsFollowsTheDockerEnvironment) {
  ScopedEnv verify("DOCKER_TLS_VERIFY", "1");
  ScopedEnv certs("DOCKER_CERT_PATH", "/etc/rf-certs");
  auto t = parse_docker_host("tcp://10.1.2.3:2376");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->tls);
  EXPECT_TRUE(t->tls_verify);
  EXPECT_EQ(t->cert_dir, "/etc/rf-certs");
  {
    ScopedEnv no_path("DOCKER_CERT_PATH", nullptr);
    ScopedEnv home("HOME", "/home/op");
    auto d = parse_docker_host("tcp://10.1.2.3:2376");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->cert_dir, "/home/op/.docker");
  }
  ScopedEnv empty("DOCKER_TLS_VERIFY", "");
  auto plain = parse_docker_host("tcp://10.1.2.3:2375");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  // Unix sockets and ssh never do TLS.
  EXPECT_FALSE(parse_docker_host("unix:///x.sock")->tls);
}

TEST(DockerHostUrl, BadUrlsNameTheUrlAndTheProblem) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"tcp://x", "needs a port, such as tcp://x:2375"},
      {"tcp://10.0.0.1", "needs a port"},
      {"https://d.example", "https://d.example:2376"},
      {"tcp://[::1]", "such as tcp://[::1]:2375"},
      {"tcp://h:99999", "port out of range"},
      {"tcp://h:0", "port out of range"},
      {"tcp://h:x", "bad port"},
      {"tcp://h:", "needs a port"},
      {"tcp://:2375", "no host"},
      {"tcp://h:2375/path", "path is not supported"},
      {"tcp://[::1:2375", "unclosed ["},
      {"unix://relative.sock", "absolute socket path"},
      {"unix://", "absolute socket path"},
      {"ftp://h:1", "unknown scheme"},
      {"docker.sock", "expected unix:///path"},
      {"", "expected unix:///path"},
      {"ssh://-oProxyCommand=x", "bad host"},
      {"ssh://-l@host", "bad user"},
      {"ssh://u:secret@host", "password"},
      {"ssh://host:22x", "bad port"},
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
  auto shown = parse_docker_host("tcp://x");
  EXPECT_EQ(shown.error().to_string(),
            "docker host \"tcp://x\": needs a port, such as tcp://x:2375");
}

TEST(DockerHostUrl, DefaultIsTheLocalSocketOrDockerHost) {
  {
    ScopedEnv unset("DOCKER_HOST", nullptr);
    auto d = default_docker_host();
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->path, "/var/run/docker.sock");
  }
  {
    ScopedEnv set("DOCKER_HOST", "ssh://ops@remote");
    auto d = default_docker_host();
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->kind, DockerHost::Kind::kSsh);
    EXPECT_EQ(d->host, "remote");
  }
  {
    ScopedEnv bad("DOCKER_HOST", "tcp://nowhere");
    auto d = default_docker_host();
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.error().to_string().find("$DOCKER_HOST"), std::string::npos);
    EXPECT_NE(d.error().to_string().find("needs a port"), std::string::npos);
  }
}

// ---- the attach stream ----

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
                           frame(1, std::string(70000, 'x')) + frame(0, "echo") +
                           frame(2, std::string(300, '\xff')) + frame(1, "end");
  std::mt19937 rng(7);
  for (int round = 0; round < 60; ++round) {
    std::string out, err;
    StreamDemux d([&](int s, std::string_view p) {
      ASSERT_TRUE(s == 1 || s == 2) << s;  // stream 0 never reaches the sink
      (s == 1 ? out : err).append(p);
    });
    size_t at = 0;
    while (at < wire.size()) {
      size_t n = round == 0 ? 1 : std::min<size_t>(wire.size() - at, 1 + rng() % 9000);
      if (round == 1) n = std::min<size_t>(wire.size() - at, 7);  // never a whole header
      if (round == 2 && rng() % 3 == 0) n = 0;                    // empty pieces too
      ASSERT_TRUE(d.feed(std::string_view(wire).substr(at, n)).ok());
      at += n;
    }
    EXPECT_TRUE(d.at_boundary());
    EXPECT_EQ(out, "hello " + std::string(70000, 'x') + "end");
    EXPECT_EQ(err, "oops" + std::string(300, '\xff'));
  }
}

TEST(DockerStreamDemux, KnowsWhenItIsBetweenFrames) {
  std::string got;
  StreamDemux d([&](int, std::string_view p) { got.append(p); });
  EXPECT_TRUE(d.at_boundary());
  const std::string f = frame(1, "abc");
  ASSERT_TRUE(d.feed(f.substr(0, 3)).ok());
  EXPECT_FALSE(d.at_boundary());  // half a header
  ASSERT_TRUE(d.feed(f.substr(3, 6)).ok());
  EXPECT_FALSE(d.at_boundary());  // a header and one byte of three
  EXPECT_EQ(got, "a");
  ASSERT_TRUE(d.feed(f.substr(9)).ok());
  EXPECT_TRUE(d.at_boundary());
  EXPECT_EQ(got, "abc");
}

TEST(DockerStreamDemux, RejectsABadHeaderNamingTheOffsetAndStaysBroken) {
  int calls = 0;
  StreamDemux d([&](int, std::string_view) { ++calls; });
  ASSERT_TRUE(d.feed(frame(1, "abc")).ok());
  std::string bad = frame(1, "x");
  bad[0] = 7;
  auto s = d.feed(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().where, "docker stream");
  EXPECT_NE(s.error().message.find("at byte 11"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("stream 7"), std::string::npos) << s.error().message;
  EXPECT_FALSE(d.feed(frame(1, "y")).ok());
  EXPECT_FALSE(d.feed("").ok());
  EXPECT_EQ(calls, 1);
  for (int pad = 1; pad <= 3; ++pad) {
    StreamDemux padding([](int, std::string_view) {});
    std::string f = frame(2, "x");
    f[pad] = 1;
    auto p = padding.feed(f);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("at byte 0"), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("padding"), std::string::npos) << p.error().message;
  }
  // A TTY container's raw text is not a multiplexed stream.
  StreamDemux raw([](int, std::string_view) {});
  EXPECT_FALSE(raw.feed("hello world\n").ok());
}

// ---- tar ----

TEST(DockerTar, RoundTripsFilesDirectoriesAndModes) {
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  auto tar = write_tar({{"dir", "", 0755, true},
                        {"dir/tool", big, 04555},
                        {"note.txt", "hi\n", 0444, false, 1000, 1001},
                        {"empty", "", 0600},
                        {"dir/sub", "", 0700, true}});
  ASSERT_TRUE(tar.ok()) << tar.error().to_string();
  EXPECT_EQ(tar->size() % 512, 0u);
  auto back = read_tar(*tar, 1 << 20);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_EQ(back->size(), 5u);
  const auto& e = *back;
  EXPECT_EQ(e[0].path, "dir");
  EXPECT_TRUE(e[0].directory);
  EXPECT_EQ(e[0].mode, 0755u);
  EXPECT_EQ(e[1].path, "dir/tool");
  EXPECT_FALSE(e[1].directory);
  EXPECT_EQ(e[1].content, big);
  EXPECT_EQ(e[1].mode, 04555u);
  EXPECT_EQ(e[2].content, "hi\n");
  EXPECT_EQ(e[2].mode, 0444u);
  EXPECT_EQ(e[2].uid, 1000u);
  EXPECT_EQ(e[2].gid, 1001u);
  EXPECT_EQ(e[3].path, "empty");
  EXPECT_EQ(e[3].content, "");
  EXPECT_EQ(e[3].mode, 0600u);
  EXPECT_TRUE(e[4].directory);
  EXPECT_EQ(e[4].mode, 0700u);
  auto none = write_tar({});
  ASSERT_TRUE(none.ok());
  auto nothing = read_tar(*none, 10);
  ASSERT_TRUE(nothing.ok()) << nothing.error().to_string();
  EXPECT_TRUE(nothing->empty());
}

TEST(DockerTar, ReadIsBoundedAndErrorsNameTheEntry) {
  auto tar = write_tar(
      {{"a.txt", std::string(600, 'a'), 0644}, {"dir/tool", std::string(5000, 'b'), 0755}});
  ASSERT_TRUE(tar.ok());
  auto limited = read_tar(*tar, 1000);
  ASSERT_FALSE(limited.ok());
  EXPECT_NE(limited.error().to_string().find("\"dir/tool\""), std::string::npos)
      << limited.error().to_string();
  EXPECT_NE(limited.error().to_string().find("1000 bytes"), std::string::npos);
  EXPECT_TRUE(read_tar(*tar, 5600).ok());   // exactly enough
  EXPECT_FALSE(read_tar(*tar, 5599).ok());  // one short
  EXPECT_FALSE(read_tar("not a tar archive at all, not even close", 100).ok());
  // A damaged second header: the error places it after the first entry.
  std::string damaged = *tar;
  const size_t second = 512 + 1024;  // header + 600 bytes padded to 1024
  ASSERT_GT(damaged.size(), second + 512);
  for (size_t i = second; i < second + 512; ++i) damaged[i] = 'Z';
  auto bad = read_tar(damaged, 1 << 20);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().to_string().find("after \"a.txt\""), std::string::npos)
      << bad.error().to_string();
  // Truncated in the middle of a file's data.
  auto cut = read_tar(tar->substr(0, 512 + 1024 + 512 + 100), 1 << 20);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().to_string().find("dir/tool"), std::string::npos) << cut.error().to_string();
  EXPECT_FALSE(write_tar({{"", "x", 0644}}).ok());
}

// ---- HTTP against an in-process server ----

// A tiny HTTP server on a unix socket: one canned reply per request, one
// connection at a time, counting connections and recording requests. A reply
// may start with a directive:
//   !close!  send the rest, then close the connection (no Connection: close)
//   !hang!   send nothing; wait for the client to go away
//   !echo!   send the rest, then echo every byte back until EOF
class CannedServer {
 public:
  explicit CannedServer(std::vector<std::string> replies) : replies_(std::move(replies)) {
    path_ = dir_.path() + "/s.sock";
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
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "unix://" + path_; }
  DockerHost host() const { return *parse_docker_host(url()); }
  int accepts() const { return accepts_; }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::string last_request() const {
    std::lock_guard lock(mu_);
    return requests_.empty() ? std::string() : requests_.back();
  }

 private:
  static size_t content_length(const std::string& head) {
    std::string lower = head;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto at = lower.find("\r\ncontent-length:");
    return at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 17, nullptr, 10);
  }
  static bool starts(std::string& s, const char* prefix) {
    if (s.rfind(prefix, 0) != 0) return false;
    s.erase(0, std::strlen(prefix));
    return true;
  }
  static void send_all(int c, const std::string& data) {
    size_t at = 0;
    while (at < data.size()) {
      const ssize_t n = ::send(c, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return;
      at += static_cast<size_t>(n);
    }
  }
  void serve() {
    size_t next = 0;
    while (next < replies_.size()) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++accepts_;
      std::string buf;
      char tmp[4096];
      bool open = true;
      while (open && next < replies_.size()) {
        // One request: the head, then Content-Length bytes of body.
        size_t end;
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
          const ssize_t n = ::read(c, tmp, sizeof tmp);
          if (n <= 0) break;
          buf.append(tmp, static_cast<size_t>(n));
        }
        if (end == std::string::npos) break;
        const size_t want = end + 4 + content_length(buf.substr(0, end + 2));
        while (buf.size() < want) {
          const ssize_t n = ::read(c, tmp, sizeof tmp);
          if (n <= 0) break;
          buf.append(tmp, static_cast<size_t>(n));
        }
        {
          std::lock_guard lock(mu_);
          requests_.push_back(buf.substr(0, std::min(want, buf.size())));
        }
        buf.erase(0, std::min(want, buf.size()));
        std::string reply = replies_[next++];
        if (starts(reply, "!hang!")) {
          while (::read(c, tmp, sizeof tmp) > 0) {
          }
          break;
        }
        const bool close_after = starts(reply, "!close!");
        const bool echo = starts(reply, "!echo!");
        send_all(c, reply);
        if (echo) {
          ssize_t n;
          while ((n = ::read(c, tmp, sizeof tmp)) > 0) send_all(c, std::string(tmp, n));
          break;
        }
        if (close_after || reply.find("Connection: close") != std::string::npos) open = false;
      }
      ::close(c);
    }
  }

  TempDir dir_;
  std::vector<std::string> replies_;
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
  std::atomic<int> accepts_{0};
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
};

std::string json_reply(const std::string& body, const std::string& status = "200 OK",
                       const std::string& extra = "") {
  return "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string kVersion =
    json_reply(R"({"Version":"99.0","ApiVersion":"1.45","MinAPIVersion":"1.24","Os":"x"})");
const std::string kVersionClose =
    json_reply(R"({"Version":"99.0","ApiVersion":"1.45"})", "200 OK", "Connection: close\r\n");

TEST(DockerApiClient, NegotiatesReusesConnectionsAndReadsChunkedBodies) {
  CannedServer server({kVersion, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
                       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "5\r\n[1,2,\r\n2\r\n3]\r\n0\r\n\r\n"});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ((*c)->api_version(), "1.41");  // the server's is newer: ours
  EXPECT_EQ((*c)->server_version(), "99.0");
  EXPECT_EQ((*c)->version_info().value("Os", ""), "x");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].rfind("GET /version HTTP/1.1\r\n", 0), 0u) << reqs[0];  // unversioned
  EXPECT_NE(reqs[0].find("Host: docker\r\n"), std::string::npos) << reqs[0];
  EXPECT_NE(reqs[0].find("User-Agent: ringfence/"), std::string::npos) << reqs[0];
  auto a = (*c)->call("GET", "/info");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_TRUE(a->is_object());
  EXPECT_EQ(server.last_request().rfind("GET /v1.41/info HTTP/1.1\r\n", 0), 0u);
  auto b = (*c)->call("GET", "/containers/json");
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(b->dump(), "[1,2,3]");
  EXPECT_EQ(server.accepts(), 1);  // one kept-alive connection for all three
}

TEST(DockerApiClient, AnOlderDaemonsVersionIsUsedAndATooOldOneRefused) {
  {
    CannedServer server({json_reply(R"({"Version":"19.03.1","ApiVersion":"1.40"})")});
    auto c = ApiClient::connect(server.host());
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    EXPECT_EQ((*c)->api_version(), "1.40");
  }
  {
    CannedServer server(
        {json_reply(R"({"Version":"18.09.0","ApiVersion":"1.39","MinAPIVersion":"1.12"})")});
    auto c = ApiClient::connect(server.host());
    ASSERT_FALSE(c.ok());
    const std::string m = c.error().to_string();
    EXPECT_NE(m.find("1.39"), std::string::npos) << m;
    EXPECT_NE(m.find("1.40"), std::string::npos) << m;
    EXPECT_NE(m.find(server.url()), std::string::npos) << m;
  }
  {
    CannedServer server({json_reply(R"({"Version": 3, "ApiVersion": ["x"]})")});
    auto c = ApiClient::connect(server.host());
    ASSERT_FALSE(c.ok());  // odd types are an error, not an exception
    EXPECT_NE(c.error().to_string().find("ApiVersion"), std::string::npos);
  }
}

TEST(DockerApiClient, PostsBodiesWithLengthAndType) {
  CannedServer server({kVersion, json_reply(R"({"Id":"abc","Warnings":[]})", "201 Created"),
                       "HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n",
                       json_reply("{}")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  const nlohmann::json body = {{"Image", "rf-test:busybox"}, {"Cmd", {"cat"}}};
  auto made = (*c)->call("POST", "/containers/create?name=" + url_encode("rf x"), &body);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  EXPECT_EQ((*made)["Id"], "abc");
  auto req = server.last_request();
  EXPECT_EQ(req.rfind("POST /v1.41/containers/create?name=rf%20x HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("Content-Type: application/json\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\n\r\n" + body.dump()), std::string::npos) << req;
  // An empty POST still says Content-Length: 0; a 204 has no body and leaves
  // the connection reusable.
  auto started = (*c)->call("POST", "/containers/abc/start");
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  EXPECT_TRUE(started->is_null());
  EXPECT_NE(server.last_request().find("Content-Length: 0\r\n"), std::string::npos);
  auto again = (*c)->request("DELETE", "/containers/abc");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 204);
  auto last = (*c)->call("GET", "/info");
  ASSERT_TRUE(last.ok()) << last.error().to_string();
  EXPECT_EQ(server.accepts(), 1);
}

TEST(DockerApiClient, AHeadResponseHasNoBody) {
  CannedServer server({kVersion,
                       "HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\n"
                       "Content-Length: 12345\r\nX-Docker-Container-Path-Stat: e30=\r\n\r\n",
                       json_reply("[]")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  auto head = (*c)->request("HEAD", "/containers/x/archive?path=%2Ftmp");
  ASSERT_TRUE(head.ok()) << head.error().to_string();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(head->headers["x-docker-container-path-stat"], "e30=");
  EXPECT_EQ(head->headers["content-length"], "12345");
  auto next = (*c)->call("GET", "/containers/json");
  ASSERT_TRUE(next.ok()) << next.error().to_string();
  EXPECT_EQ(server.accepts(), 1);
}

TEST(DockerApiClient, ConnectionCloseIsNotReused) {
  CannedServer server({kVersionClose, json_reply("[1]", "200 OK", "Connection: close\r\n"),
                       "!close!HTTP/1.1 200 OK\r\n\r\n[2]"});  // no length: ends with EOF
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto a = (*c)->call("GET", "/a");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->dump(), "[1]");
  auto b = (*c)->call("GET", "/b");
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(b->dump(), "[2]");
  EXPECT_EQ(server.accepts(), 3);
}

TEST(DockerApiClient, AStaleKeptAliveConnectionIsRetriedOnceOnANewOne) {
  // The daemon answers /version as keep-alive but then closes the idle connection.
  CannedServer server({"!close!" + kVersion, json_reply(R"({"ok":1})")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  std::this_thread::sleep_for(milliseconds(50));  // the close reaches us
  auto r = (*c)->call("GET", "/info");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["ok"], 1);
  EXPECT_EQ(server.accepts(), 2);
  EXPECT_EQ(server.requests().size(), 2u);  // the lost request was sent once, for real
}

TEST(DockerApiClient, AFreshConnectionThatFailsIsNotRetried) {
  CannedServer server({kVersionClose, "!close!", json_reply("{}")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  auto r = (*c)->call("POST", "/containers/x/kill");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("closed the connection"), std::string::npos)
      << r.error().to_string();
  EXPECT_EQ(r.error().where, "docker POST /containers/x/kill");
  EXPECT_EQ(server.accepts(), 2);
}

TEST(DockerApiClient, AnErrorCarriesTheDaemonsMessage) {
  CannedServer server(
      {kVersion,
       json_reply(R"({"message":"No such image: rf-test/none:1"})"
                  "\n",
                  "404 Not Found"),
       "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 13\r\n\r\n"
       "plain words\r\n",
       json_reply("{\"Id\": [1, 2"),
       json_reply("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  auto r = (*c)->call("GET", "/images/rf-test%2Fnone%3A1/json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "docker GET /images/rf-test%2Fnone%3A1/json");
  EXPECT_EQ(r.error().message, "404 No such image: rf-test/none:1");
  auto plain = (*c)->call("GET", "/info");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error().message, "500 plain words");
  auto broken = (*c)->call("GET", "/containers/x/json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("not JSON"), std::string::npos);
  auto deep = (*c)->call("GET", "/deep");
  ASSERT_FALSE(deep.ok());  // too deep to parse: an error, not a stack overflow
  EXPECT_EQ(server.accepts(), 1);
}

TEST(DockerApiClient, BadHttpAndTimeoutsAreErrors) {
  CannedServer server({kVersion, "HTTP/1.1 2x0 What\r\n\r\n", "!hang!", json_reply("{}")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  auto bad = (*c)->request("GET", "/bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bad HTTP"), std::string::npos) << bad.error().to_string();
  RequestOptions quick;
  quick.timeout = milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  auto slow = (*c)->request("GET", "/slow", {}, quick);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().sys_errno, 0);  // wrapped: the text says it
  EXPECT_NE(slow.error().to_string().find("timed out"), std::string::npos)
      << slow.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  auto fine = (*c)->call("GET", "/fine");
  ASSERT_TRUE(fine.ok()) << fine.error().to_string();
  auto injected = (*c)->request("GET", "/x HTTP/1.1\r\nX-Evil: 1");
  ASSERT_FALSE(injected.ok());
  EXPECT_NE(injected.error().message.find("bad target"), std::string::npos);
}

TEST(DockerApiClient, HijackKeepsTheBytesThatFollowTheHead) {
  // The version reply closes its connection: a hijack always opens its own.
  CannedServer server(
      {kVersionClose,
       "!echo!HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
       "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\nRAW-BYTES"});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  auto conn = (*c)->hijack("POST", "/containers/x/attach?stream=1&stdin=1");
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  const std::string req = server.last_request();
  EXPECT_EQ(req.rfind("POST /v1.41/containers/x/attach?stream=1&stdin=1 HTTP/1.1\r\n", 0), 0u);
  EXPECT_NE(req.find("Upgrade: tcp\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("Connection: Upgrade\r\n"), std::string::npos) << req;
  EXPECT_TRUE((*conn)->has_buffered());  // the bytes read with the head
  ASSERT_TRUE((*conn)->write_all("ping").ok());
  ASSERT_TRUE((*conn)->shutdown_write().ok());
  std::string got;
  char buf[4];  // small reads: the prefix comes out in pieces
  for (;;) {
    auto n = (*conn)->read_some(buf, sizeof buf, std::chrono::seconds(5));
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    if (*n == 0) break;
    got.append(buf, *n);
  }
  EXPECT_EQ(got, "RAW-BYTESping");  // first what followed the head, then the echo
  EXPECT_FALSE((*conn)->has_buffered());
  EXPECT_EQ(server.accepts(), 2);
}

TEST(DockerApiClient, AFailedHijackSaysWhy) {
  CannedServer server(
      {kVersionClose, json_reply(R"({"message":"No such container: nope"})", "404 Not Found")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  auto conn = (*c)->hijack("POST", "/containers/nope/attach?stream=1");
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.error().message, "404 No such container: nope");
}

TEST(DockerApiClient, StreamsJsonLinesAsTheyComeAndStopsAtAnError) {
  auto chunk = [](const std::string& s) {
    std::ostringstream o;
    o << std::hex << s.size() << "\r\n" << s << "\r\n";
    return o.str();
  };
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  CannedServer server(
      {kVersion,
       head + chunk("{\"status\":\"Pulling\"}\r\n{\"sta") +
           chunk("tus\":\"Downloading\",\"n\":2}") + chunk("\n\n[1]\n") +
           chunk("{\"status\":\"Done\"}") + "0\r\n\r\n",
       head + chunk("{\"status\":\"a\"}\n{\"errorDetail\":{\"message\":\"denied\"},") +
           chunk("\"error\":\"pull access denied\"}\n{\"status\":\"never\"}\n") + "0\r\n\r\n",
       json_reply(R"({"message":"repository does not exist"})", "404 Not Found"),
       json_reply("{}")});
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  std::vector<std::string> seen;
  auto s = (*c)->stream_json_lines("POST", "/images/create?fromImage=x",
                                   [&](const nlohmann::json& j) { seen.push_back(j.dump()); });
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], R"({"status":"Pulling"})");
  EXPECT_EQ(seen[1], R"({"n":2,"status":"Downloading"})");
  EXPECT_EQ(seen[2], "[1]");
  EXPECT_EQ(seen[3], R"({"status":"Done"})");  // the last line had no newline
  seen.clear();
  auto e = (*c)->stream_json_lines("POST", "/images/create?fromImage=y",
                                   [&](const nlohmann::json& j) { seen.push_back(j.dump()); });
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "pull access denied");
  EXPECT_EQ(seen.size(), 1u);
  auto missing = (*c)->stream_json_lines("POST", "/images/create?fromImage=z",
                                         [&](const nlohmann::json&) { ADD_FAILURE(); });
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "404 repository does not exist");
  // The error stream was not read to its end: that connection went, a new one serves this.
  auto after = (*c)->call("GET", "/info");
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  EXPECT_EQ(server.accepts(), 2);
}

TEST(DockerApiClient, IsSafeFromSeveralThreads) {
  std::vector<std::string> replies = {kVersion};
  for (int i = 0; i < 40; ++i)
    replies.push_back("!close!" + json_reply("[" + std::to_string(i) + "]"));
  CannedServer server(replies);
  auto c = ApiClient::connect(server.host());
  ASSERT_TRUE(c.ok());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if ((*c)->call("GET", "/x").ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
}

TEST(DockerApiClient, AnUnreachableDaemonIsAClearError) {
  TempDir dir;
  auto c = ApiClient::connect(*parse_docker_host("unix://" + dir.path() + "/none.sock"));
  ASSERT_FALSE(c.ok());
  const std::string m = c.error().to_string();
  EXPECT_NE(m.find(dir.path() + "/none.sock"), std::string::npos) << m;
  EXPECT_NE(m.find("No such file"), std::string::npos) << m;
  auto tcp = ApiClient::connect(*parse_docker_host("tcp://127.0.0.1:1"), milliseconds(2000));
  ASSERT_FALSE(tcp.ok());
  EXPECT_NE(tcp.error().to_string().find("127.0.0.1:1"), std::string::npos)
      << tcp.error().to_string();
}

TEST(DockerApiClient, UrlEncodeKeepsOnlyUnreserved) {
  EXPECT_EQ(url_encode("a-b_c.d~eAZ09"), "a-b_c.d~eAZ09");
  EXPECT_EQ(url_encode(R"({"label":["x"]})"), "%7B%22label%22%3A%5B%22x%22%5D%7D");
  EXPECT_EQ(url_encode("rf-test/busybox:1"), "rf-test%2Fbusybox%3A1");
  EXPECT_EQ(url_encode("a b+c&d=e%"), "a%20b%2Bc%26d%3De%25");
  EXPECT_EQ(url_encode("\xc3\xa9\x01"), "%C3%A9%01");
  EXPECT_EQ(url_encode(""), "");
}

// ---- ssh, against a fake `ssh` on PATH ----

class FakeSsh {
 public:
  explicit FakeSsh(const std::string& script) {
    const std::string path = dir_.path() + "/ssh";
    std::ofstream(path) << "#!/bin/sh\n"
                        << "echo \"$@\" > '" << dir_.path() << "/args'\n"
                        << "echo $$ > '" << dir_.path() << "/pid'\n"
                        << script;
    ::chmod(path.c_str(), 0755);
    const char* old = std::getenv("PATH");
    path_env_.emplace("PATH", (dir_.path() + ":" + (old ? old : "/usr/bin:/bin")).c_str());
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_.path() + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }

 private:
  TempDir dir_;
  std::optional<ScopedEnv> path_env_;
};

// Answers every request head on stdin with a version reply, like dial-stdio
// in front of a daemon, after a warning on stderr like ssh's.
const char* kDialStdio =
    R"SH(echo "Warning: Permanently added '[h]:2222' to the list of known hosts." >&2
body='{"Version":"20.10.24","ApiVersion":"1.41"}'
cr=$(printf '\r')
while :; do
  got=no
  while IFS= read -r line; do
    got=yes
    [ "$line" = "$cr" ] && break
  done
  [ $got = yes ] || exit 0
  printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#body} "$body"
done
)SH";

bool reaped(const std::string& pid_text) {
  const pid_t pid = static_cast<pid_t>(std::atoi(pid_text.c_str()));
  if (pid <= 0) return false;
  for (int i = 0; i < 100; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;  // gone, zombie included
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

TEST(DockerSsh, RunsDialStdioWithTheRightArguments) {
  FakeSsh ssh(kDialStdio);
  ScopedEnv opts("RINGFENCE_SSH_OPTIONS", "-F /dev/null  -o StrictHostKeyChecking=no");
  std::string pid;
  {
    auto c = ApiClient::connect(*parse_docker_host("ssh://deploy@build.example:2222"),
                                milliseconds(7000));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    EXPECT_EQ((*c)->api_version(), "1.41");
    EXPECT_EQ((*c)->server_version(), "20.10.24");
    auto again = (*c)->call("GET", "/_ping");  // the same ssh, kept alive
    ASSERT_TRUE(again.ok()) << again.error().to_string();
    pid = ssh.read("pid");
    EXPECT_EQ(ssh.read("args"),
              "-o BatchMode=yes -o ConnectTimeout=7 -p 2222 -l deploy -F /dev/null -o "
              "StrictHostKeyChecking=no -- build.example docker system dial-stdio");
  }
  EXPECT_TRUE(reaped(pid)) << "ssh " << pid << " was left behind";
}

TEST(DockerSsh, TheLastWordOfAFailingSshIsTheError) {
  FakeSsh ssh(R"SH(echo "debug1: something" >&2
echo "root@h: Permission denied (publickey)." >&2
exit 255
)SH");
  auto c = ApiClient::connect(*parse_docker_host("ssh://root@h"));
  ASSERT_FALSE(c.ok());
  const std::string m = c.error().to_string();
  EXPECT_NE(m.find("Permission denied (publickey)."), std::string::npos) << m;
  EXPECT_EQ(m.find("debug1"), std::string::npos) << m;
  EXPECT_NE(m.find("ssh h"), std::string::npos) << m;
  EXPECT_TRUE(reaped(ssh.read("pid")));
  EXPECT_NE(ssh.read("args").find("-- h docker system dial-stdio"), std::string::npos);
}

TEST(DockerSsh, ANormalEndAfterAWarningIsNotAnError) {
  // A body that ends with the stream, after ssh warned on stderr: EOF, not an error.
  FakeSsh ssh(R"SH(echo "Warning: Permanently added 'h' to the list of known hosts." >&2
while IFS= read -r line; do [ "$line" = "$(printf '\r')" ] && break; done
printf 'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"Version":"1","ApiVersion":"1.41"}'
)SH");
  auto c = ApiClient::connect(*parse_docker_host("ssh://h"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ((*c)->server_version(), "1");
}

TEST(DockerSsh, NoSshBinaryIsAClearError) {
  TempDir empty;
  ScopedEnv path("PATH", empty.path().c_str());
  auto conn = open_connection(*parse_docker_host("ssh://h"), milliseconds(1000));
  ASSERT_FALSE(conn.ok());
  EXPECT_NE(conn.error().to_string().find("run ssh"), std::string::npos)
      << conn.error().to_string();
}

// ---- TLS, against an in-process server with certificates made here ----

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;

KeyPtr new_key() { return KeyPtr(EVP_EC_gen("P-256"), EVP_PKEY_free); }

// A certificate for `cn`, signed by `issuer` (self-signed when null), with
// subjectAltName `san` when not empty.
CertPtr new_cert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca,
                 const std::string& san) {
  static long serial = 1;
  CertPtr c(X509_new(), X509_free);
  X509_set_version(c.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), 3600);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer ? issuer : c.get(), c.get(), nullptr, nullptr, 0);
  auto add = [&](int nid, const std::string& value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    ASSERT_NE(ext, nullptr) << value;
    X509_add_ext(c.get(), ext, -1);
    X509_EXTENSION_free(ext);
  };
  add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) add(NID_key_usage, "critical,keyCertSign,cRLSign");
  if (!san.empty()) add(NID_subject_alt_name, san);
  X509_sign(c.get(), issuer_key ? issuer_key : key, EVP_sha256());
  return c;
}

void write_pem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  if (cert) PEM_write_X509(f, cert);
  if (key) PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

// A CA, a server certificate for 127.0.0.1 only, a client certificate; and
// cert dirs as the docker CLI has them (ca.pem, cert.pem, key.pem).
struct TlsFiles {
  TempDir dir;
  std::string client_dir, stranger_dir, server_cert, server_key, ca;
  TlsFiles() {
    auto ca_key = new_key();
    auto ca_cert = new_cert("rf test CA", ca_key.get(), nullptr, nullptr, true, "");
    auto srv_key = new_key();
    auto srv = new_cert("docker", srv_key.get(), ca_cert.get(), ca_key.get(), false,
                        "IP:127.0.0.1,DNS:docker.test");
    auto cli_key = new_key();
    auto cli = new_cert("client", cli_key.get(), ca_cert.get(), ca_key.get(), false, "");
    auto other_key = new_key();
    auto other_ca = new_cert("another CA", other_key.get(), nullptr, nullptr, true, "");
    client_dir = dir.path() + "/client";
    stranger_dir = dir.path() + "/stranger";
    ::mkdir(client_dir.c_str(), 0700);
    ::mkdir(stranger_dir.c_str(), 0700);
    ca = client_dir + "/ca.pem";
    write_pem(ca, ca_cert.get(), nullptr);
    write_pem(client_dir + "/cert.pem", cli.get(), nullptr);
    write_pem(client_dir + "/key.pem", nullptr, cli_key.get());
    write_pem(stranger_dir + "/ca.pem", other_ca.get(), nullptr);
    server_cert = dir.path() + "/server.pem";
    server_key = dir.path() + "/server-key.pem";
    write_pem(server_cert, srv.get(), nullptr);
    write_pem(server_key, nullptr, srv_key.get());
  }
};

// A TLS daemon on 127.0.0.1 that wants a client certificate: /version
// answers, an Upgrade request gets 101 then an echo until EOF.
class TlsServer {
 public:
  explicit TlsServer(const TlsFiles& files) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate_file(ctx_, files.server_cert.c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(ctx_, files.server_key.c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_load_verify_locations(ctx_, files.ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Like dockerd (Go): our half-close (TCP EOF, no close_notify) ends stdin quietly.
    SSL_CTX_set_options(ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(::listen(fd_, 8), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~TlsServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    for (auto& t : conns_) t.join();  // the clients have gone: each saw EOF
    ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  DockerHost host(const std::string& name, const std::string& cert_dir) const {
    DockerHost h;
    h.kind = DockerHost::Kind::kTcp;
    h.url = "https://" + name + ":" + std::to_string(port_);
    h.host = name;
    h.port = port_;
    h.tls = true;
    h.cert_dir = cert_dir;
    return h;
  }
  int handshakes() const { return handshakes_; }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      conns_.emplace_back([this, c] {  // one thread per connection: some stay kept alive
        SSL* ssl = SSL_new(ctx_);
        SSL_set_fd(ssl, c);
        if (SSL_accept(ssl) == 1) {
          ++handshakes_;
          serve_one(ssl);
        }
        SSL_free(ssl);
        ::close(c);
      });
    }
  }
  void serve_one(SSL* ssl) {
    std::string buf;
    char tmp[4096];
    for (;;) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        const int n = SSL_read(ssl, tmp, sizeof tmp);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      const std::string head = buf.substr(0, end);
      buf.erase(0, end + 4);
      if (head.find("Upgrade: tcp") == std::string::npos) {
        const std::string body = R"({"Version":"20.10.24","ApiVersion":"1.41"})";
        const std::string reply =
            "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        SSL_write(ssl, reply.data(), static_cast<int>(reply.size()));
        continue;
      }
      const std::string up = "HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n";
      SSL_write(ssl, up.data(), static_cast<int>(up.size()));
      if (!buf.empty()) SSL_write(ssl, buf.data(), static_cast<int>(buf.size()));
      for (;;) {
        const int n = SSL_read(ssl, tmp, sizeof tmp);
        if (n <= 0) return;  // EOF: our shutdown_write
        SSL_write(ssl, tmp, n);
      }
    }
  }

  SSL_CTX* ctx_ = nullptr;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::vector<std::thread> conns_;
  std::atomic<int> handshakes_{0};
};

// TLS runs in ringfence-docker-tls, found next to the running binary in an
// install; the test binaries live elsewhere.
class DockerTlsRelay : public ::testing::Environment {
 public:
  void SetUp() override { ::setenv("RINGFENCE_DOCKER_TLS", RF_DOCKER_TLS_PATH, 1); }
};
const auto* const kTlsRelay = ::testing::AddGlobalTestEnvironment(new DockerTlsRelay);

TEST(DockerTls, VerifiesTheDaemonAndShowsOurCertificate) {
  TlsFiles files;
  TlsServer server(files);
  auto c = ApiClient::connect(server.host("127.0.0.1", files.client_dir), milliseconds(5000));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ((*c)->server_version(), "20.10.24");
  // An attach stream: one thread writes while another reads, then a half-close.
  auto conn = (*c)->hijack("POST", "/containers/x/attach?stream=1&stdin=1");
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  std::string expected;
  for (int i = 0; i < 500; ++i) expected += "line " + std::to_string(i) + "\n";
  std::thread writer([&] {
    for (int i = 0; i < 500; ++i) {
      ASSERT_TRUE((*conn)->write_all("line " + std::to_string(i) + "\n").ok());
    }
    ASSERT_TRUE((*conn)->shutdown_write().ok());
  });
  std::string got;
  char buf[1000];
  for (;;) {
    auto n = (*conn)->read_some(buf, sizeof buf, std::chrono::seconds(10));
    ASSERT_TRUE(n.ok()) << n.error().to_string() << " after " << got.size() << " of "
                        << expected.size();
    if (*n == 0) break;
    got.append(buf, *n);
  }
  writer.join();
  EXPECT_EQ(got, expected);
  // A read with nothing to come times out.
  auto again = (*c)->hijack("POST", "/containers/x/attach?stream=1&stdin=1");
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  auto quiet = (*again)->read_some(buf, sizeof buf, milliseconds(100));
  ASSERT_FALSE(quiet.ok());
  EXPECT_EQ(quiet.error().sys_errno, ETIMEDOUT);
}

TEST(DockerTls, ANameTheCertificateDoesNotCoverIsRefused) {
  TlsFiles files;
  TlsServer server(files);
  auto c = ApiClient::connect(server.host("localhost", files.client_dir), milliseconds(5000));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().to_string().find("hostname mismatch"), std::string::npos)
      << c.error().to_string();
}

TEST(DockerTls, ADaemonOfAnotherCaIsRefused) {
  TlsFiles files;
  TlsServer server(files);
  auto c = ApiClient::connect(server.host("127.0.0.1", files.stranger_dir), milliseconds(5000));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().to_string().find("certificate"), std::string::npos) << c.error().to_string();
  EXPECT_EQ(server.handshakes(), 0);
  TempDir empty;
  auto none = ApiClient::connect(server.host("127.0.0.1", empty.path()), milliseconds(5000));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().to_string().find(empty.path() + "/ca.pem"), std::string::npos)
      << none.error().to_string();
}

}  // namespace
}  // namespace rf::docker
