#include "sandbox/port_request.h"

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <charconv>
#include <limits>

namespace rf {
namespace http = boost::beast::http;

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

bool port_header_passes(std::string_view name) {
  const std::string n = lower(name);
  for (const char* hop : {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
                          "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
                          "host", "authorization", "content-length"}) {
    if (n == hop) return false;
  }
  return n.rfind("x-ringfence-", 0) != 0;
}

std::string port_request_text(std::string_view method, std::string_view target,
                              const HeaderList& headers, std::string_view body, int port) {
  std::string out;
  out.append(method).append(" ").append(target.empty() ? std::string_view("/") : target);
  out.append(" HTTP/1.1\r\nHost: 127.0.0.1:").append(std::to_string(port)).append("\r\n");
  for (const auto& [k, v] : headers) {
    if (!port_header_passes(k) || v.empty()) continue;
    // A header's text never ends the head early.
    if (k.find_first_of("\r\n:") != std::string::npos ||
        v.find_first_of("\r\n") != std::string::npos)
      continue;
    out.append(k).append(": ").append(v).append("\r\n");
  }
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  out.append("Connection: close\r\n\r\n").append(body);
  return out;
}

Result<PortAnswer> parse_port_answer(std::string_view bytes) {
  http::response_parser<http::string_body> parser;
  // Not boost::none: Boost 1.74 refuses every Content-Length body with it.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  parser.header_limit(64 * 1024);
  boost::system::error_code ec;
  size_t at = 0;
  while (at < bytes.size() && !parser.is_done()) {
    const size_t used = parser.put(boost::asio::buffer(bytes.data() + at, bytes.size() - at), ec);
    at += used;
    if (ec == http::error::need_more) {
      ec = {};
      if (used == 0) break;
      continue;
    }
    if (ec) return make_error("the port's answer", ec.message());
  }
  if (!parser.is_done()) {
    // Nothing whole was read (put_eof needs some of a message: found by
    // port_answer_fuzz with no bytes at all).
    if (!parser.got_some() || !parser.is_header_done()) {
      return make_error("the port's answer",
                        bytes.empty() ? "the port closed without answering"
                                      : "not a whole HTTP/1.x response");
    }
    // Read until close: the end of the bytes is the end of the body.
    parser.put_eof(ec);
    if (ec || !parser.is_done()) {
      return make_error("the port's answer", bytes.empty() ? "the port closed without answering"
                                                           : "not a whole HTTP/1.x response");
    }
  }
  auto& res = parser.get();
  PortAnswer out;
  out.status = static_cast<int>(res.result_int());
  for (const auto& f : res) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    if (port_header_passes(name))
      out.headers.emplace_back(std::string(name), std::string(f.value().data(), f.value().size()));
  }
  out.body = std::move(res.body());
  return out;
}

std::string target_after(std::string_view target, size_t segments) {
  size_t at = 0;
  for (size_t i = 0; i < segments && at < target.size(); ++i) {
    if (target[at] != '/') break;
    const size_t next = target.find_first_of("/?", at + 1);
    at = next == std::string_view::npos ? target.size() : next;
  }
  std::string rest(target.substr(at));
  if (rest.empty() || rest[0] != '/') rest.insert(0, "/");
  return rest;
}

Result<int> parse_port(std::string_view text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    return make_error("port", "expected a port from 1 to 65535");
  return port;
}

}  // namespace rf
