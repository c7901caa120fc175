#include "http_client/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/unique_fd.h"
#include "docker_api/beast_http.h"
#include "docker_api/connection.h"
#include "docker_api/relay_connection.h"
#include "docker_api/socket_connection.h"
#include "docker_api/tls_relay.h"

namespace rf::http {
namespace beast_http = boost::beast::http;
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

#ifndef RF_VERSION
#define RF_VERSION "0.1.0"
#endif

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

milliseconds left_of(Clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()),
                  milliseconds{1});
}

struct Address {
  sockaddr_storage sa{};
  socklen_t len = 0;
  net::IpAddress ip;
};

// The addresses of `host`: an IP literal, DNS, or what the resolve override
// maps it to.
Result<std::vector<Address>> resolve(const Url& url, const Options& o) {
  std::vector<std::string> names{url.host};
  if (auto it = o.resolve.find(url.host); it != o.resolve.end()) {
    names.clear();
    for (const auto& ip : it->second) names.push_back(ip.to_string());
  }
  const std::string port = std::to_string(url.port);
  std::vector<Address> out;
  for (const auto& name : names) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(name.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
      return make_error("resolve " + url.host,
                        rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : ::gai_strerror(rc));
    }
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      Address addr;
      std::memcpy(&addr.sa, a->ai_addr, a->ai_addrlen);
      addr.len = a->ai_addrlen;
      if (a->ai_family == AF_INET) {
        addr.ip = net::IpAddress::from_in(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
      } else if (a->ai_family == AF_INET6) {
        addr.ip = net::IpAddress::from_in6(reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
      } else {
        continue;
      }
      out.push_back(addr);
    }
  }
  if (out.empty()) return make_error("resolve " + url.host, "no address");
  return out;
}

Result<UniqueFd> connect_checked(const Url& url, const Options& o, Clock::time_point deadline,
                                 Failure* failure) {
  if (o.policy != nullptr) {
    const net::Verdict v = o.policy->check_name({url.host, url.port});
    if (!v.allowed) {
      *failure = Failure::kRefused;
      return make_error("egress policy", v.reason);
    }
  }
  auto addrs = resolve(url, o);
  if (!addrs) {
    *failure = Failure::kUnreachable;
    return addrs.take_error();
  }
  Error last = make_error("connect " + url.authority(), "no address");
  for (const Address& a : *addrs) {
    if (o.policy != nullptr) {
      const net::Verdict v = o.policy->check_address(url.host, a.ip, url.port);
      if (!v.allowed) {
        *failure = Failure::kRefused;
        last = make_error("egress policy", v.reason);
        continue;
      }
    }
    UniqueFd fd(::socket(a.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return sys_error("socket");
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0 &&
        errno != EINPROGRESS) {
      *failure = Failure::kUnreachable;
      last = sys_error("connect " + url.authority() + " (" + a.ip.to_string() + ")");
      continue;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left_of(deadline).count()));
    int err = 0;
    socklen_t len = sizeof err;
    if (ready == 1) ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (ready != 1 || err != 0) {
      *failure = ready == 0 ? Failure::kTimeout : Failure::kUnreachable;
      last = ready == 0
                 ? make_error("connect " + url.authority(), "timed out")
                 : sys_error("connect " + url.authority() + " (" + a.ip.to_string() + ")", err);
      continue;
    }
    const int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *failure = Failure::kNone;
    return fd;
  }
  return last;
}

Result<std::unique_ptr<docker::Connection>> open(const Url& url, const Options& o,
                                                 Clock::time_point deadline, Failure* failure) {
  auto fd = connect_checked(url, o, deadline, failure);
  if (!fd) return fd.take_error();
  if (!url.tls) {
    return std::unique_ptr<docker::Connection>(
        std::make_unique<docker::FdConnection>(std::move(*fd)));
  }
  auto relay = docker::find_tls_relay();
  if (!relay) return relay.take_error();
  std::vector<std::string> args = {*relay, "--timeout-ms",
                                   std::to_string(left_of(deadline).count()), "--fd", "3"};
  if (!o.ca_file.empty()) {
    args.push_back("--ca-file");
    args.push_back(o.ca_file);
  }
  if (!o.tls_verify) args.push_back("--no-verify");
  args.push_back(url.origin());
  args.push_back(url.host);
  args.push_back(std::to_string(url.port));
  return docker::spawn_relay(args, "TLS " + url.origin(), fd->get());
}

}  // namespace

std::string Url::authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  const std::string h = v6 ? "[" + host + "]" : host;
  if ((tls && port == 443) || (!tls && port == 80)) return h;
  return h + ":" + std::to_string(port);
}

std::string Url::origin() const { return std::string(tls ? "https://" : "http://") + authority(); }

Result<Url> parse_url(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error("URL \"" + std::string(text.substr(0, 200)) + "\"", why);
  };
  Url u;
  u.text = std::string(text);
  for (unsigned char c : text) {
    if (c <= 0x20 || c >= 0x7f) return bad("spaces, control bytes and non-ASCII are not allowed");
  }
  std::string_view rest;
  if (text.substr(0, 7) == "http://") {
    rest = text.substr(7);
  } else if (text.substr(0, 8) == "https://") {
    rest = text.substr(8);
    u.tls = true;
  } else {
    return bad("expected http:// or https://");
  }
  if (rest.find('#') != std::string_view::npos) return bad("a fragment (#) is not sent");
  const size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (!u.target.empty() && u.target[0] == '?') u.target = "/" + u.target;
  if (authority.find('@') != std::string_view::npos) {
    return bad("credentials in the URL are not allowed (use a header from identity)");
  }
  auto a = net::parse_authority(authority, u.tls ? 443 : 80);
  if (!a) return bad(a.error().message);
  u.host = a->host;
  u.port = a->port;
  return u;
}

std::string Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return "";
}

Result<Response> fetch(const Request& req, const Options& o, Failure* failure_out) {
  Failure ignored;
  Failure& failure = failure_out != nullptr ? *failure_out : ignored;
  failure = Failure::kNone;
  auto url = parse_url(req.url);
  if (!url) {
    failure = Failure::kRefused;
    return url.take_error();
  }
  const std::string what = req.method + " " + url->origin() + url->target.substr(0, 120);
  const auto deadline = Clock::now() + o.timeout;
  auto conn = open(*url, o, deadline, &failure);
  if (!conn) return make_error(what, conn.error().to_string());
  std::string wire;
  {
    beast_http::request<beast_http::string_body> r;
    r.method_string(req.method);
    r.target(url->target);
    r.version(11);
    r.set(beast_http::field::host, url->authority());
    r.set(beast_http::field::user_agent, std::string("ringfence/") + RF_VERSION);
    r.set(beast_http::field::connection, "close");
    for (const auto& [k, v] : req.headers) {
      for (char c : k + v) {
        if (c == '\r' || c == '\n') {
          failure = Failure::kRefused;
          return make_error(what, "header " + k + " holds a line break");
        }
      }
      r.set(k, v);
    }
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
      r.body() = req.body;
      r.prepare_payload();
    }
    std::ostringstream out;
    out << r;
    wire = out.str();
  }
  if (auto w = (*conn)->write_all(wire); !w) {
    failure = Failure::kUnreachable;
    return make_error(what, w.error().to_string());
  }
  beast_http::response_parser<beast_http::string_body> parser;
  if (o.on_body) {
    // A stream: the caller bounds what it keeps. Not boost::none: Boost 1.74
    // compares a Content-Length against the optional, and none is less than
    // any length, so every answer with a body would be "body limit exceeded".
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  } else {
    parser.body_limit(o.body_limit);
  }
  parser.header_limit(64 << 10);
  if (req.method == "HEAD") parser.skip(true);
  char chunk[16384];
  std::string pending;
  bool got_any = false;
  while (!parser.is_done()) {
    auto n = (*conn)->read_some(chunk, sizeof chunk, left_of(deadline));
    if (!n) {
      failure = n.error().sys_errno == ETIMEDOUT ? Failure::kTimeout : Failure::kUnreachable;
      return make_error(what, n.error().to_string());
    }
    boost::system::error_code ec;
    if (*n == 0) {
      if (!got_any) {
        failure = Failure::kUnreachable;
        return make_error(what, "the server closed the connection without answering");
      }
      parser.put_eof(ec);
      if (ec || !parser.is_done()) {
        failure = Failure::kBadAnswer;
        return make_error(what, "the server closed the connection mid-answer");
      }
      break;
    }
    got_any = true;
    pending.append(chunk, *n);
    size_t pos = 0;
    while (pos < pending.size() && !parser.is_done()) {
      const size_t used =
          parser.put(boost::asio::buffer(pending.data() + pos, pending.size() - pos), ec);
      if (ec == beast_http::error::need_more) ec = {};
      if (ec) {
        failure = Failure::kBadAnswer;
        return make_error(what, "not an HTTP answer: " + ec.message());
      }
      pos += used;
      if (used == 0) break;
    }
    pending.erase(0, pos);
    // A stream's pieces go to on_body; an answer that is not a success (an
    // error body) is kept whole, within body_limit, for the caller to read.
    if (o.on_body && parser.is_header_done() && !parser.get().body().empty()) {
      if (parser.get().result_int() / 100 == 2) {
        std::string piece = std::move(parser.get().body());
        parser.get().body().clear();
        if (!o.on_body(piece)) break;
      } else if (parser.get().body().size() > o.body_limit) {
        failure = Failure::kBadAnswer;
        return make_error(what,
                          "an error answer longer than " + std::to_string(o.body_limit) + " bytes");
      }
    }
  }
  Response resp;
  resp.status = parser.get().result_int();
  for (const auto& f : parser.get()) {
    resp.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  resp.body = std::move(parser.get().body());
  return resp;
}

}  // namespace rf::http
