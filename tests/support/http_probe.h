// A small HTTP/1.1 client for tests of `ringfence serve`: one TCP connection
// to a loopback port, raw bytes out (so tests can send what no polite client
// would), and responses read back whole: Content-Length or chunked bodies.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace rf::testing {

struct HttpReply {
  int status = 0;                              // 0: no answer (closed, or timed out)
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class HttpProbe {
 public:
  explicit HttpProbe(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  }
  ~HttpProbe() { ::close(fd_); }
  HttpProbe(const HttpProbe&) = delete;
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool send_raw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  HttpReply request(const std::string& method, const std::string& target,
                    const std::string& token = "", const std::string& body = "",
                    const std::map<std::string, std::string>& headers = {},
                    std::chrono::milliseconds within = std::chrono::seconds(30)) {
    std::string out = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
    if (!token.empty()) out += "Authorization: Bearer " + token + "\r\n";
    for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") {
      out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    out += "\r\n" + body;
    if (!send_raw(out)) return {};
    return read_reply(within);
  }

  // Reads one response; status 0 when the connection closed or `within` passed first.
  HttpReply read_reply(std::chrono::milliseconds within = std::chrono::seconds(30)) {
    deadline_ = std::chrono::steady_clock::now() + within;
    HttpReply r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return r;
    }
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return r;
    r.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t next = head.find("\r\n", line_end + 2);
      const std::string line = head.substr(
          line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      line_end = next;
    }
    if (r.header("transfer-encoding") == "chunked") {
      while (true) {
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos) {
          if (!fill()) return r;
        }
        const size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2) {
          if (!fill()) return r;
        }
        r.body += buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) break;
      }
    } else if (!r.header("content-length").empty()) {
      const size_t size = std::stoul(r.header("content-length"));
      while (buf_.size() < size) {
        if (!fill()) return r;
      }
      r.body = buf_.substr(0, size);
      buf_.erase(0, size);
    }
    return r;
  }

  // True when the server closed the connection within `within`.
  bool closed_within(std::chrono::milliseconds within) {
    deadline_ = std::chrono::steady_clock::now() + within;
    while (true) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline_ - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char b[4096];
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n <= 0) return true;
      buf_.append(b, static_cast<size_t>(n));
    }
  }
  // Waits up to `within` for bytes, and takes what has come; false when none
  // came or the connection closed.
  bool read_some(std::chrono::milliseconds within) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(within.count())) <= 0) return false;
    char b[4096];
    const ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  const std::string& buffered() const { return buf_; }
  // What has come and not been read, taken (the buffer is empty after).
  std::string take_buffered() { return std::exchange(buf_, std::string()); }
  // Reads until at least `n` bytes are buffered, within `within`; false if not.
  bool read_at_least(size_t n, std::chrono::milliseconds within) {
    deadline_ = std::chrono::steady_clock::now() + within;
    while (buf_.size() < n) {
      if (!fill()) return false;
    }
    return true;
  }

 private:
  bool fill() {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char b[65536];
    const ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace rf::testing
