#include "proxy/request_head.h"

#include <algorithm>
#include <cstdio>

#include "core/ascii.h"

namespace rf::proxy {

namespace {

Error bad(std::string message) { return make_error("request", std::move(message)); }

// A short, printable rendering of untrusted bytes for an error message.
std::string quote(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (s.size() > kMax) out += "...";
  return out + "\"";
}

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

// Hop-by-hop headers: they describe the client's connection to the proxy,
// never the proxy's to the origin.
bool is_hop_by_hop(std::string_view lname) {
  static constexpr std::string_view kHop[] = {
      "connection",         "keep-alive", "proxy-connection", "proxy-authorization",
      "proxy-authenticate", "te",         "trailer",          "upgrade"};
  return std::find(std::begin(kHop), std::end(kHop), lname) != std::end(kHop);
}

// Headers the client may not have dropped by naming them in Connection: they
// frame the message the origin reads.
bool is_framing(std::string_view lname) {
  return lname == "host" || lname == "content-length" || lname == "transfer-encoding";
}

}  // namespace

Result<size_t> find_head_end(std::string_view buf, const HeadLimits& limits) {
  const size_t first_nl = buf.find('\n');
  if ((first_nl == std::string_view::npos && buf.size() >= limits.max_request_line) ||
      (first_nl != std::string_view::npos && first_nl + 1 > limits.max_request_line)) {
    return bad("request line longer than " + std::to_string(limits.max_request_line) + " bytes");
  }
  for (size_t i = first_nl; i != std::string_view::npos && i < limits.max_head_bytes;
       i = buf.find('\n', i + 1)) {
    size_t end = 0;
    if (i + 1 < buf.size() && buf[i + 1] == '\n') {
      end = i + 2;
    } else if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
      end = i + 3;
    }
    if (end == 0) continue;
    if (end > limits.max_head_bytes) break;
    return end;
  }
  if (buf.size() >= limits.max_head_bytes) {
    return bad("request head larger than " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  return size_t{0};
}

Result<RequestHead> parse_request_head(std::string_view head, const HeadLimits& limits) {
  if (head.size() > limits.max_head_bytes) {
    return bad("request head larger than " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  RequestHead out;
  bool first = true;
  bool ended = false;
  while (!head.empty()) {
    if (ended) return bad("bytes after the end of the request head");
    const size_t nl = head.find('\n');
    if (nl == std::string_view::npos) return bad("request head does not end with a blank line");
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return bad("a bare CR in the request head");
    if (first) {
      first = false;
      if (line.size() + 2 > limits.max_request_line) {
        return bad("request line longer than " + std::to_string(limits.max_request_line) +
                   " bytes");
      }
      const size_t sp1 = line.find(' ');
      const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
      if (sp2 == std::string_view::npos) {
        return bad("request line is not METHOD TARGET HTTP/1.1: " + quote(line));
      }
      const std::string_view method = line.substr(0, sp1);
      const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
      const std::string_view version = line.substr(sp2 + 1);
      if (!is_token(method)) return bad("bad method " + quote(method));
      if (target.empty()) return bad("empty request target");
      for (char c : target) {
        if (c <= 0x20 || c >= 0x7f) return bad("bad byte in request target " + quote(target));
      }
      if (version != "HTTP/1.1" && version != "HTTP/1.0") {
        return bad("unsupported HTTP version " + quote(version) + " (HTTP/1.0 and HTTP/1.1 are)");
      }
      out.method = method;
      out.target = target;
      out.version = version;
      continue;
    }
    if (line.empty()) {
      ended = true;
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      return bad("obsolete line folding in header " + quote(line));
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bad("header line without a colon: " + quote(line));
    const std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return bad("bad header name " + quote(name));
    const std::string_view value = trim_ows(line.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return bad("control byte in header " + quote(name));
      }
    }
    if (out.headers.size() == limits.max_headers) {
      return bad("more than " + std::to_string(limits.max_headers) + " headers");
    }
    out.headers.push_back({std::string(name), std::string(value)});
  }
  if (first) return bad("empty request head");
  if (!ended) return bad("request head does not end with a blank line");
  return out;
}

Status check_framing(const RequestHead& head) {
  int hosts = 0;
  bool has_te = false;
  std::string content_length;
  for (const Header& h : head.headers) {
    const std::string lname = ascii_lower(h.name);
    if (lname == "host") ++hosts;
    if (lname == "transfer-encoding") has_te = true;
    if (lname == "content-length") {
      if (h.value.empty() || !std::all_of(h.value.begin(), h.value.end(),
                                          [](char c) { return c >= '0' && c <= '9'; })) {
        return bad("bad Content-Length " + quote(h.value));
      }
      if (!content_length.empty() && content_length != h.value) {
        return bad("conflicting Content-Length headers");
      }
      content_length = h.value;
    }
  }
  if (hosts > 1) return bad("more than one Host header");
  if (has_te && !content_length.empty()) {
    return bad("both Content-Length and Transfer-Encoding");
  }
  return ok_status();
}

void append_end_to_end_headers(const RequestHead& head, std::string& out,
                               const std::function<bool(std::string_view)>& drop) {
  std::vector<std::string> named;  // tokens of Connection headers
  for (const Header& h : head.headers) {
    if (ascii_lower(h.name) != "connection") continue;
    std::string_view v = h.value;
    while (!v.empty()) {
      const size_t comma = v.find(',');
      named.push_back(ascii_lower(trim_ows(v.substr(0, comma))));
      v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
    }
  }
  for (const Header& h : head.headers) {
    const std::string lname = ascii_lower(h.name);
    if (lname == "host" || is_hop_by_hop(lname)) continue;
    if (!is_framing(lname) && std::find(named.begin(), named.end(), lname) != named.end()) continue;
    if (drop && drop(lname)) continue;
    out.append(h.name).append(": ").append(h.value).append("\r\n");
  }
}

Result<ProxyRequest> interpret_request(const RequestHead& head) {
  ProxyRequest req;
  if (head.method == "CONNECT") {
    auto a = net::parse_authority(head.target, std::nullopt);
    if (!a) return bad("CONNECT " + quote(head.target) + ": " + a.error().to_string());
    req.kind = RequestKind::connect;
    req.target = std::move(*a);
    return req;
  }

  const std::string_view target = head.target;
  const size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos) {
    return bad(
        "a proxy request needs an absolute URI (http://host/path) or CONNECT host:port, got " +
        quote(target));
  }
  const std::string scheme = ascii_lower(target.substr(0, scheme_end));
  if (scheme == "https") {
    return bad("an https:// URI goes through CONNECT host:443, not as a plain request");
  }
  if (scheme != "http") return bad("scheme " + quote(scheme) + " is not supported (http is)");
  const std::string_view rest = target.substr(scheme_end + 3);
  const size_t auth_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, auth_end);
  std::string_view path = auth_end == std::string_view::npos ? "" : rest.substr(auth_end);
  path = path.substr(0, path.find('#'));
  auto a = net::parse_authority(authority, 80);
  if (!a) return bad("URI " + quote(target) + ": " + a.error().to_string());

  RF_TRY(check_framing(head));
  std::string& out = req.origin_head;
  out.reserve(256);
  out.append(head.method).append(" ");
  if (path.empty() || path.front() == '?') out.append("/");
  out.append(path).append(" ").append(head.version).append("\r\n");
  out.append("Host: ").append(authority).append("\r\n");
  append_end_to_end_headers(head, out, {});
  out.append("Connection: close\r\n\r\n");
  req.kind = RequestKind::http;
  req.target = std::move(*a);
  return req;
}

Result<ProxyRequest> parse_proxy_request(std::string_view head, const HeadLimits& limits) {
  auto h = parse_request_head(head, limits);
  if (!h) return h.take_error();
  return interpret_request(*h);
}

}  // namespace rf::proxy
