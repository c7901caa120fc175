#include "proxy/edge_rewrite.h"

#include <string.h>

#include <algorithm>
#include <cstdlib>

#include "core/ascii.h"
#include "core/base64.h"
#include "redact/forms.h"

namespace rf::proxy {
namespace {

using net::EdgeCredential;
using net::EdgeDelivery;
using net::EdgePlace;

constexpr size_t kMaxResponseHead = 64 * 1024;

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && ascii_lower(s.substr(0, prefix.size())) == prefix;
}

// "x-api-key" -> "X-Api-Key"
std::string header_case(std::string_view lname) {
  std::string out(lname);
  bool up = true;
  for (char& c : out) {
    if (up && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    up = c == '-';
  }
  return out;
}

std::string authority_text(const net::Authority& a, uint16_t default_port) {
  std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  return a.port == default_port ? host : host + ":" + std::to_string(a.port);
}

size_t replace_all(std::string& s, std::string_view from, std::string_view to) {
  size_t n = 0;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
    ++n;
  }
  return n;
}

bool header_safe(std::string_view value) {
  return std::none_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

bool has_place(const EdgeCredential& c, EdgePlace::Kind kind, std::string_view header = {}) {
  return std::any_of(c.settings.places.begin(), c.settings.places.end(), [&](const EdgePlace& p) {
    return p.kind == kind && (kind != EdgePlace::Kind::kHeader || p.header == header);
  });
}

// Where a credential's placeholder may be, in words.
std::string allowed_places(const EdgeCredential& c) {
  if (c.delivery() == EdgeDelivery::kGateway) {
    return c.key + " is delivered by gateway: the gateway at " + net::gateway_url(c.key) +
           " sets its header itself; its placeholder goes nowhere";
  }
  std::string places, hosts;
  for (const auto& p : c.settings.places) places += (places.empty() ? "" : ", ") + p.to_string();
  for (const auto& h : c.settings.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
  return c.key + " is swapped only in " + places + " of HTTPS requests to " + hosts;
}

EdgeRefusal misplaced(const EdgeCredential& c, std::string_view place, std::string_view host) {
  return {c.key, "the placeholder of " + c.key + " is in " + std::string(place) +
                     " of a request to " + std::string(host) + ": refused (" + allowed_places(c) +
                     ")"};
}

EdgeRefusal in_plain_http(const EdgeCredential& c, std::string_view host) {
  return {c.key, "the placeholder of " + c.key + " is in a plain-HTTP request to " +
                     std::string(host) + ": refused (" + allowed_places(c) + ")"};
}

// The first credential whose placeholder is in `text` (raw, or inside a
// Basic authorization when `text` is one).
const EdgeCredential* find_placeholder(std::string_view text, std::span<const EdgeCredential> all) {
  std::string decoded;
  if (starts_with_ci(text, "basic ")) {
    std::string_view b64 = text.substr(6);
    while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
    if (auto d = base64_decode(b64)) decoded = std::move(*d);
  }
  for (const auto& c : all) {
    if (text.find(c.placeholder) != std::string_view::npos ||
        (!decoded.empty() && decoded.find(c.placeholder) != std::string::npos)) {
      return &c;
    }
  }
  return nullptr;
}

// A placeholder in the method or in a header's name: no place takes one there.
std::optional<EdgeRefusal> misplaced_in_names(const RequestHead& head,
                                              std::span<const EdgeCredential> all,
                                              std::string_view host) {
  if (const auto* c = find_placeholder(head.method, all)) return misplaced(*c, "the method", host);
  for (const Header& h : head.headers) {
    if (const auto* c = find_placeholder(h.name, all)) return misplaced(*c, "a header name", host);
  }
  return std::nullopt;
}

EdgeRequest bad_request(std::string why) {
  EdgeRequest r;
  r.bad_request = 400;
  r.error = std::move(why);
  return r;
}

EdgeRequest refused(EdgeRefusal refusal) {
  EdgeRequest r;
  r.refused = std::move(refusal);
  return r;
}

// Where the longest tail of data[from:] that is a proper prefix of a pattern
// (a match more bytes may complete) starts; data.size() when there is none.
size_t live_partial(std::string_view data, size_t from,
                    const std::vector<EdgeStream::Pattern>& patterns) {
  const std::string_view tail = data.substr(from);
  size_t hold = 0;
  for (const auto& p : patterns) {
    for (size_t k = std::min(p.from.size() - 1, tail.size()); k > hold; --k) {
      if (tail.substr(tail.size() - k) == std::string_view(p.from).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return data.size() - hold;
}

struct StreamScan {
  size_t held = 0;             // where the undecided bytes start
  std::optional<size_t> stop;  // the stopping pattern found
};

// Appends what is decided of `data`: the bytes before the next match, then the
// match swapped, leftmost first, then longest. A match waits (with all after
// it) while a partial match starting at or before it may still grow into one
// that beats it, an earlier or a longer one; at the stream's end none can.
StreamScan scan_stream(std::string_view data, bool at_end,
                       const std::vector<EdgeStream::Pattern>& patterns, int* swapped,
                       std::string* out) {
  size_t pos = 0;
  size_t live = at_end ? data.size() : live_partial(data, 0, patterns);
  for (;;) {
    if (live < pos) live = live_partial(data, pos, patterns);
    size_t best = std::string_view::npos, which = 0;
    for (size_t i = 0; i < patterns.size(); ++i) {
      const size_t f = data.find(patterns[i].from, pos);
      if (f < best || (f == best && f != std::string_view::npos &&
                       patterns[i].from.size() > patterns[which].from.size())) {
        best = f;
        which = i;
      }
    }
    if (best >= live) {
      out->append(data.substr(pos, live - pos));
      return {live, std::nullopt};
    }
    out->append(data.substr(pos, best - pos));
    const EdgeStream::Pattern& p = patterns[which];
    if (!p.to) return {best, which};
    out->append(*p.to);
    ++*swapped;
    pos = best + p.from.size();
  }
}

}  // namespace

// Asked of every upstream a credential goes to: a response it echoes a value
// in is swapped back as it streams (response_patterns), which compressed
// bytes would hide. A client asking for gzip gets the plain body, which every
// client takes (no Content-Encoding).
constexpr std::string_view kIdentityEncoding = "Accept-Encoding: identity\r\n";

std::optional<GatewayTarget> parse_gateway_target(std::string_view target) {
  for (std::string_view own :
       {std::string_view("http://127.0.0.1:3128"), std::string_view("http://localhost:3128")}) {
    if (starts_with_ci(target, own)) {
      target.remove_prefix(own.size());
      break;
    }
  }
  if (!target.starts_with(net::kGatewayPathPrefix)) return std::nullopt;
  target.remove_prefix(net::kGatewayPathPrefix.size());
  const size_t end = target.find_first_of("/?#");
  GatewayTarget out;
  out.key = std::string(target.substr(0, end));
  if (out.key.empty()) return std::nullopt;
  if (end != std::string_view::npos) out.rest = std::string(target.substr(end));
  out.rest = out.rest.substr(0, out.rest.find('#'));
  return out;
}

EdgeRequest rewrite_gateway_request(const RequestHead& head, const GatewayTarget& target,
                                    const EdgeCredential& gw, std::span<const EdgeCredential> all,
                                    bool keep_alive) {
  if (auto s = check_framing(head); !s) return bad_request(s.error().message);
  const std::string host = authority_text(gw.settings.upstream, 443);
  if (auto r = misplaced_in_names(head, all, host)) return refused(std::move(*r));
  if (const auto* c = find_placeholder(target.rest, all)) {
    return refused(misplaced(*c, "the request target", host));
  }
  for (const Header& h : head.headers) {
    const std::string lname = ascii_lower(h.name);
    if (lname == gw.settings.header) continue;  // replaced below, whatever it held
    if (const auto* c = find_placeholder(h.value, all)) {
      return refused(misplaced(*c, "header " + lname, host));
    }
  }
  const std::string value = gw.gateway_header_value();
  if (!header_safe(value)) {
    return refused(
        {gw.key, "the value of " + gw.key + " holds a control byte: it cannot go into a header"});
  }
  EdgeRequest out;
  std::string path = gw.settings.upstream_path;
  if (target.rest.empty() || target.rest.front() == '?') {
    if (path.empty()) path = "/";
  }
  path += target.rest;
  std::string& o = out.head;
  o.reserve(512);
  o.append(head.method).append(" ").append(path).append(" ").append(head.version).append("\r\n");
  o.append("Host: ").append(host).append("\r\n");
  append_end_to_end_headers(head, o, [&](std::string_view lname) {
    return lname == gw.settings.header || lname == "accept-encoding";
  });
  o.append(header_case(gw.settings.header)).append(": ").append(value).append("\r\n");
  o.append(kIdentityEncoding);
  o.append(keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
  out.substitutions = 1;
  return out;
}

EdgeRequest rewrite_intercepted_request(const RequestHead& head, const net::Authority& target,
                                        std::span<const EdgeCredential> all, bool keep_alive) {
  if (auto s = check_framing(head); !s) return bad_request(s.error().message);
  const std::string host = authority_text(target, 443);
  std::string_view t = head.target;
  if (starts_with_ci(t, "https://")) {
    std::string_view rest = t.substr(8);
    const size_t end = rest.find_first_of("/?#");
    auto a = net::parse_authority(rest.substr(0, end), 443);
    if (!a || a->host != target.host || a->port != target.port) {
      return bad_request("the request names " + std::string(rest.substr(0, end)) +
                         ", not the TLS target " + host);
    }
    t = end == std::string_view::npos ? std::string_view("/") : rest.substr(end);
  }
  if (t.empty() || (t.front() != '/' && t.front() != '?')) {
    return bad_request("the request target is not a path");
  }
  for (const Header& h : head.headers) {
    if (ascii_lower(h.name) != "host") continue;
    auto a = net::parse_authority(h.value, 443);
    if (!a || a->host != target.host || a->port != target.port) {
      return refused({"", "Host " + h.value + " does not match the TLS target " + host +
                              " (the CONNECT and the server name): refused"});
    }
  }
  if (auto r = misplaced_in_names(head, all, host)) return refused(std::move(*r));
  std::vector<const EdgeCredential*> bound;
  for (const auto& c : all) {
    if (c.binds(target)) bound.push_back(&c);
  }
  EdgeRequest out;
  auto swap_in = [&](std::string& text, const EdgeCredential& c, bool encode) {
    const size_t n =
        replace_all(text, c.placeholder, encode ? redact::url_encoded(c.value) : c.value);
    out.substitutions += static_cast<int>(n);
  };
  // The target: swapped in the query for those that say so; never in the path.
  std::string path(t.substr(0, t.find('?')));
  std::string query =
      t.find('?') == std::string_view::npos ? "" : std::string(t.substr(t.find('?')));
  if (const auto* c = find_placeholder(path, all)) {
    return refused(misplaced(*c, "the path", host));
  }
  if (path.empty()) path = "/";  // "?q": an origin-form target starts with '/'
  for (const auto* c : bound) {
    if (has_place(*c, EdgePlace::Kind::kQuery)) swap_in(query, *c, /*encode=*/true);
  }
  if (const auto* c = find_placeholder(query, all)) {
    return refused(misplaced(*c, "the query", host));
  }
  // The headers: in those each credential names, and in Basic authorization.
  RequestHead swapped = head;
  for (Header& h : swapped.headers) {
    const std::string lname = ascii_lower(h.name);
    if (lname == "host") continue;
    for (const auto* c : bound) {
      if (!has_place(*c, EdgePlace::Kind::kHeader, lname)) continue;
      if (h.value.find(c->placeholder) == std::string::npos) continue;
      if (!header_safe(c->value)) {
        return refused({c->key, "the value of " + c->key +
                                    " holds a control byte: it cannot go into a header"});
      }
      swap_in(h.value, *c, false);
    }
    if (lname == "authorization" && starts_with_ci(h.value, "basic ")) {
      std::string_view b64 = std::string_view(h.value).substr(6);
      while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
      if (auto d = base64_decode(b64)) {
        std::string creds = std::move(*d);
        const int before = out.substitutions;
        for (const auto* c : bound) {
          if (has_place(*c, EdgePlace::Kind::kBasic)) swap_in(creds, *c, false);
        }
        if (out.substitutions != before) h.value = "Basic " + base64_encode(creds);
        ::explicit_bzero(creds.data(), creds.size());
      }
    }
  }
  // What is left anywhere in the head is misplaced. (The values swapped in
  // hold no placeholder: a placeholder is random.)
  for (const Header& h : swapped.headers) {
    if (ascii_lower(h.name) == "host") continue;
    if (const auto* c = find_placeholder(h.value, all)) {
      return refused(misplaced(*c, "header " + ascii_lower(h.name), host));
    }
  }
  for (const auto* c : bound) {
    if (has_place(*c, EdgePlace::Kind::kBody))
      out.body_swaps.emplace_back(c->placeholder, c->value);
  }
  std::string& o = out.head;
  o.reserve(512);
  o.append(head.method).append(" ").append(path).append(query).append(" ");
  o.append(head.version).append("\r\n");
  o.append("Host: ").append(host).append("\r\n");
  append_end_to_end_headers(swapped, o,
                            [](std::string_view lname) { return lname == "accept-encoding"; });
  o.append(kIdentityEncoding);
  o.append(keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
  return out;
}

std::optional<EdgeRefusal> check_plain_request(std::string_view head, const net::Authority& target,
                                               std::span<const EdgeCredential> all) {
  const std::string host = authority_text(target, 80);
  for (const auto& c : all) {
    if (head.find(c.placeholder) != std::string_view::npos) {
      return in_plain_http(c, host);
    }
  }
  // Inside Basic authorization, too.
  size_t line = 0;
  while (line < head.size()) {
    size_t end = head.find('\n', line);
    if (end == std::string_view::npos) end = head.size();
    std::string_view l = head.substr(line, end - line);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (starts_with_ci(l, "authorization:")) {
      std::string_view v = l.substr(14);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (const auto* c = find_placeholder(v, all)) {
        return in_plain_http(*c, host);
      }
    }
    line = end + 1;
  }
  return std::nullopt;
}

EdgeStream::EdgeStream(std::vector<Pattern> patterns) : patterns_(std::move(patterns)) {
  std::erase_if(patterns_, [](const Pattern& p) { return p.from.empty(); });
}

std::optional<size_t> EdgeStream::feed(std::string_view chunk, std::string* out) {
  if (stopped_) return std::nullopt;
  if (patterns_.empty()) {
    out->append(chunk);
    return std::nullopt;
  }
  std::string joined;
  std::string_view data = chunk;
  if (!held_.empty()) {
    joined = std::move(held_);
    held_.clear();
    joined.append(chunk);
    data = joined;
  }
  const StreamScan scan = scan_stream(data, /*at_end=*/false, patterns_, &swapped_, out);
  if (scan.stop) {
    stopped_ = true;
    return scan.stop;
  }
  held_ = std::string(data.substr(scan.held));
  return std::nullopt;
}

std::optional<size_t> EdgeStream::finish(std::string* out) {
  // No byte follows: what was held is decided now, its matches swapped.
  std::optional<size_t> stop;
  if (!stopped_ && !held_.empty()) {
    const std::string held = std::move(held_);
    stop = scan_stream(held, /*at_end=*/true, patterns_, &swapped_, out).stop;
    if (stop) stopped_ = true;
  }
  held_.clear();
  return stop;
}

std::vector<EdgeStream::Pattern> request_body_patterns(
    std::span<const EdgeCredential> all,
    const std::vector<std::pair<std::string, std::string>>& swaps) {
  std::vector<EdgeStream::Pattern> out;
  for (const auto& c : all) {
    auto swap = std::find_if(swaps.begin(), swaps.end(),
                             [&](const auto& s) { return s.first == c.placeholder; });
    if (swap != swaps.end()) {
      out.push_back({c.placeholder, swap->second, c.key});
    } else {
      out.push_back({c.placeholder, std::nullopt, c.key});
    }
  }
  return out;
}

std::vector<EdgeStream::Pattern> response_patterns(std::span<const EdgeCredential> bound) {
  std::vector<EdgeStream::Pattern> out;
  for (const auto& c : bound) {
    // Every form a response may echo the value in (raw; base64, as in an
    // echoed Basic header; hex; URL-encoded, as in an echoed query;
    // JSON-escaped) goes back to the placeholder's same form, of the same
    // length, so the response's framing stays true. A value's escaped form
    // is longer than the placeholder's (which has nothing to escape) where
    // the value holds a byte to escape: the placeholder's form is padded with
    // '_' to its length. A form that would grow stops the response.
    if (c.value.size() != c.placeholder.size()) continue;
    for (auto& [from, to] : redact::paired_forms(c.value, c.placeholder)) {
      if (to.size() < from.size()) to.resize(from.size(), '_');
      std::optional<std::string> swap;
      if (to.size() == from.size()) swap = std::move(to);
      out.push_back({std::move(from), std::move(swap), c.key});
    }
  }
  return out;
}

Result<bool> ResponseHeads::feed(std::string_view chunk, std::string* out) {
  if (done_) {
    if (!chunk.empty()) keep_alive_ = false;  // bytes past the response: dropped
    return true;
  }
  if (body_) {
    RF_TRY(take_body(chunk, out));
    return true;
  }
  head_.append(chunk);
  for (;;) {
    size_t end = head_.find("\r\n\r\n");
    size_t sep = 4;
    if (const size_t lf = head_.find("\n\n"); lf != std::string::npos && lf + 2 <= end) {
      end = lf;
      sep = 2;
    }
    // Too large with its blank line here, or even if it starts in the last bytes.
    if (end == std::string::npos ? head_.size() > kMaxResponseHead + 3 : end > kMaxResponseHead) {
      return make_error("response", "a response head larger than 64 KiB");
    }
    if (end == std::string::npos) return false;
    const std::string_view h = std::string_view(head_).substr(0, end);
    const size_t first_nl = h.find('\n');
    std::string_view status_line = h.substr(0, first_nl);
    if (!status_line.empty() && status_line.back() == '\r') status_line.remove_suffix(1);
    const auto digit = [&](size_t i) { return status_line[i] >= '0' && status_line[i] <= '9'; };
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ' ||
        !digit(9) || !digit(10) || !digit(11) ||
        (status_line.size() > 12 && status_line[12] != ' ')) {
      return make_error("response", "not an HTTP/1.x response");
    }
    const int status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
    out->append(status_line).append("\r\n");
    size_t line = first_nl == std::string_view::npos ? h.size() : first_nl + 1;
    while (line < h.size()) {
      size_t nl = h.find('\n', line);
      if (nl == std::string_view::npos) nl = h.size();
      std::string_view l = h.substr(line, nl - line);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      const std::string name = ascii_lower(l.substr(0, l.find(':')));
      if (name != "connection" && name != "keep-alive" && name != "proxy-connection") {
        out->append(l).append("\r\n");
      }
      line = nl + 1;
    }
    out->append("Connection: close\r\n\r\n");
    std::string rest = head_.substr(end + sep);
    if (status >= 100 && status < 200 && status != 101) {
      head_ = std::move(rest);
      continue;
    }
    start_body(h, status);
    head_.clear();
    body_ = true;
    status_ = status;
    RF_TRY(take_body(rest, out));
    return true;
  }
}

void ResponseHeads::start_body(std::string_view head, int status) {
  // HTTP/1.0 closes unless it says keep-alive; 1.1 keeps unless it says close.
  keep_alive_ = head.substr(0, 8) != "HTTP/1.0";
  std::optional<uint64_t> length;
  bool chunked = false, coded = false;
  size_t line = head.find('\n');
  while (line != std::string_view::npos && line + 1 < head.size()) {
    size_t nl = head.find('\n', line + 1);
    std::string_view l =
        head.substr(line + 1, (nl == std::string_view::npos ? head.size() : nl) - line - 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const size_t colon = l.find(':');
    line = nl;
    if (colon == std::string_view::npos) continue;
    const std::string name = ascii_lower(l.substr(0, colon));
    const std::string value = ascii_lower(trim_ows(l.substr(colon + 1)));
    if (name == "content-length") {
      const bool digits =
          !value.empty() && value.size() <= 18 &&
          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || (length && *length != std::stoull(value))) {
        keep_alive_ = false;  // unreadable framing: until the upstream closes
        coded = true;
        continue;
      }
      length = std::stoull(value);
    } else if (name == "transfer-encoding") {
      coded = true;
      const size_t last = value.rfind(',');
      chunked = trim_ows(last == std::string::npos ? value : value.substr(last + 1)) == "chunked";
    } else if (name == "connection") {
      if (value.find("close") != std::string::npos) keep_alive_ = false;
      if (value.find("keep-alive") != std::string::npos && head.substr(0, 8) == "HTTP/1.0") {
        keep_alive_ = true;
      }
    }
  }
  if (head_request_ || status == 204 || status == 304) {
    framing_ = Framing::kNone;
  } else if (status == 101) {
    framing_ = Framing::kUntilClose;
    keep_alive_ = false;
  } else if (chunked) {
    framing_ = Framing::kChunked;
  } else if (coded) {
    framing_ = Framing::kUntilClose;
    keep_alive_ = false;
  } else if (length) {
    framing_ = Framing::kLength;
    left_ = *length;
  } else {
    framing_ = Framing::kUntilClose;
    keep_alive_ = false;
  }
  done_ = framing_ == Framing::kNone || (framing_ == Framing::kLength && left_ == 0);
}

Status ResponseHeads::take_body(std::string_view chunk, std::string* out) {
  constexpr size_t kMaxLine = 4096;
  size_t used = 0;
  switch (framing_) {
    case Framing::kNone:
      break;
    case Framing::kUntilClose:
      used = chunk.size();
      break;
    case Framing::kLength:
      used = static_cast<size_t>(std::min<uint64_t>(left_, chunk.size()));
      left_ -= used;
      done_ = left_ == 0;
      break;
    case Framing::kChunked:
      while (used < chunk.size() && !done_) {
        if (chunk_ == Chunk::kData) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, chunk.size() - used));
          used += n;
          left_ -= n;
          if (left_ == 0) chunk_ = Chunk::kDataEnd;
          continue;
        }
        const char c = chunk[used++];
        if (c != '\n') {
          if (line_.size() == kMaxLine) return make_error("response", "a chunk line over 4 KiB");
          line_ += c;
          continue;
        }
        std::string_view l = line_;
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        if (chunk_ == Chunk::kDataEnd) {
          if (!l.empty()) return make_error("response", "chunk data not followed by CRLF");
          chunk_ = Chunk::kSize;
        } else if (chunk_ == Chunk::kSize) {
          const std::string_view size = trim_ows(l.substr(0, l.find(';')));
          uint64_t n = 0;
          if (size.empty() || size.size() > 15) return make_error("response", "a bad chunk size");
          for (char d : size) {
            const int v = d >= '0' && d <= '9'   ? d - '0'
                          : d >= 'a' && d <= 'f' ? d - 'a' + 10
                          : d >= 'A' && d <= 'F' ? d - 'A' + 10
                                                 : -1;
            if (v < 0) return make_error("response", "a bad chunk size");
            n = n * 16 + static_cast<uint64_t>(v);
          }
          left_ = n;
          chunk_ = n == 0 ? Chunk::kTrailer : Chunk::kData;
        } else if (l.empty()) {  // the blank line after the trailers
          done_ = true;
        }
        line_.clear();
      }
      break;
  }
  out->append(chunk.substr(0, used));
  if (used < chunk.size()) keep_alive_ = false;  // bytes past the response: dropped
  return ok_status();
}

}  // namespace rf::proxy
