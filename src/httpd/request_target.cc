#include "httpd/request_target.h"

#include <cctype>
#include <string>

namespace rf::httpd {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

Target split_target(std::string_view target) {
  Target t;
  const auto q = target.find('?');
  std::string_view path = target.substr(0, q);
  if (q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
      const auto amp = rest.find('&');
      std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      if (pair.empty()) continue;
      const auto eq = pair.find('=');
      auto k = percent_decode(pair.substr(0, eq));
      auto v =
          percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
      if (!k || !v) {
        t.ok = false;
        return t;
      }
      t.query[*k] = *v;
    }
  }
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const auto slash = path.find('/');
    auto seg = percent_decode(path.substr(0, slash));
    if (!seg) {
      t.ok = false;
      return t;
    }
    t.segments.push_back(*seg);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  return t;
}

bool is_loopback_origin(std::string_view origin) {
  std::string_view rest;
  if (origin.starts_with("http://")) {
    rest = origin.substr(7);
  } else if (origin.starts_with("https://")) {
    rest = origin.substr(8);
  } else {
    return false;
  }
  // host [":" port], and nothing after: no path, userinfo, query or fragment.
  std::string_view host = rest, port;
  if (rest.starts_with("[")) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return false;
    host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
    }
    if (host != "::1") return false;
  } else {
    const auto colon = rest.find(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    bool loopback = host == "localhost";
    if (!loopback && host.starts_with("127.")) {
      // A dotted quad in 127.0.0.0/8: four decimal parts of 0-255.
      int parts = 0;
      loopback = true;
      size_t i = 0;
      while (i <= host.size() && loopback) {
        const auto dot = host.find('.', i);
        const std::string_view part =
            host.substr(i, dot == std::string_view::npos ? host.npos : dot - i);
        loopback = !part.empty() && part.size() <= 3 &&
                   part.find_first_not_of("0123456789") == std::string_view::npos &&
                   std::stoi(std::string(part)) <= 255;
        ++parts;
        if (dot == std::string_view::npos) break;
        i = dot + 1;
      }
      loopback = loopback && parts == 4;
    }
    if (!loopback) return false;
  }
  if (origin.size() > 0 &&
      (rest.find('/') != std::string_view::npos || rest.find('@') != std::string_view::npos)) {
    return false;
  }
  if (!port.empty() || rest.ends_with(":")) {
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    if (std::stoi(std::string(port)) > 65535) return false;
  }
  return true;
}

std::string query_escaped(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace rf::httpd
