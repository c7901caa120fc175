#include "sandbox/port_request.h"

#include <algorithm>
#include <boost/beast/http/parser.hpp>
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

std::pair<std::string, HeaderList> content_type_and_rest(HeaderList&& headers) {
  std::pair<std::string, HeaderList> out{"application/octet-stream", {}};
  for (auto& [k, v] : headers) {
    if (lower(k) == "content-type") {
      out.first = std::move(v);
    } else {
      out.second.emplace_back(std::move(k), std::move(v));
    }
  }
  return out;
}

bool is_websocket_upgrade(const HeaderList& headers) {
  bool upgrade_token = false;
  bool websocket = false;
  for (const auto& [k, v] : headers) {
    const std::string name = lower(k);
    const std::string value = lower(v);
    if (name == "connection") {
      // A list of tokens: "keep-alive, Upgrade".
      size_t at = 0;
      while (at <= value.size()) {
        size_t end = value.find(',', at);
        if (end == std::string::npos) end = value.size();
        std::string token = value.substr(at, end - at);
        while (!token.empty() && token.front() == ' ') token.erase(0, 1);
        while (!token.empty() && token.back() == ' ') token.pop_back();
        if (token == "upgrade") upgrade_token = true;
        at = end + 1;
      }
    } else if (name == "upgrade") {
      websocket = value == "websocket";
    }
  }
  return upgrade_token && websocket;
}

std::string port_upgrade_request_text(std::string_view target, const HeaderList& headers,
                                      int port) {
  std::string out = port_request_text("GET", target, headers, "", port);
  // Its last line is "Connection: close"; a handshake keeps the connection.
  const std::string_view close = "Connection: close\r\n\r\n";
  out.resize(out.size() - close.size());
  out.append("Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  return out;
}

namespace detail {
// A Beast body whose bytes go to a function as they are parsed, never kept.
struct SinkBody {
  using value_type = std::function<void(std::string_view)>;
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(http::header<isRequest, Fields>& /*head*/, value_type& sink) : sink_(sink) {}
    void init(const boost::optional<std::uint64_t>& /*length*/, boost::system::error_code& ec) {
      ec = {};
    }
    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
      size_t n = 0;
      for (auto it = boost::asio::buffer_sequence_begin(buffers);
           it != boost::asio::buffer_sequence_end(buffers); ++it) {
        const boost::asio::const_buffer b = *it;
        if (sink_ && b.size() > 0)
          sink_(std::string_view(static_cast<const char*>(b.data()), b.size()));
        n += b.size();
      }
      ec = {};
      return n;
    }
    void finish(boost::system::error_code& ec) { ec = {}; }

   private:
    value_type& sink_;
  };
};
}  // namespace detail

struct PortAnswerStream::Impl {
  http::response_parser<detail::SinkBody> parser;
  HeadFn on_head;
  bool head_told = false;
  bool failed = false;
  bool any = false;
  bool all_headers = false;
  std::string rest;  // bytes the parser left for more to come (a partial head or chunk size)
};

PortAnswerStream::PortAnswerStream(HeadFn on_head, BodyFn on_body, bool head_request,
                                   bool all_headers)
    : impl_(std::make_unique<Impl>()) {
  impl_->on_head = std::move(on_head);
  impl_->all_headers = all_headers;
  auto& p = impl_->parser;
  // Not boost::none: Boost 1.74 refuses every Content-Length body with it.
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  p.header_limit(64 * 1024);
  // Not eager: put() returns once the head is whole, so it is told before
  // any of the body goes on.
  p.eager(false);
  p.skip(head_request);
  p.get().body() = std::move(on_body);
}

PortAnswerStream::~PortAnswerStream() = default;

bool PortAnswerStream::head_done() const { return impl_->head_told; }

bool PortAnswerStream::done() const { return impl_->parser.is_done(); }

Status PortAnswerStream::feed(std::string_view bytes) {
  Impl& m = *impl_;
  if (m.failed) return make_error("the port's answer", "not a whole HTTP/1.x response");
  if (!bytes.empty()) m.any = true;
  auto& p = m.parser;
  // What the parser left last time comes first (usually nothing).
  if (!m.rest.empty()) {
    m.rest.append(bytes);
    bytes = m.rest;
  }
  while (!bytes.empty() && !p.is_done()) {
    boost::system::error_code ec;
    const size_t used = p.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (!m.head_told && p.is_header_done()) {
      m.head_told = true;
      HeaderList headers;
      for (const auto& f : p.get()) {
        const std::string_view name(f.name_string().data(), f.name_string().size());
        if (m.all_headers || port_header_passes(name))
          headers.emplace_back(std::string(name), std::string(f.value().data(), f.value().size()));
      }
      if (m.on_head) m.on_head(static_cast<int>(p.get().result_int()), std::move(headers));
    }
    if (ec && ec != http::error::need_more) {
      m.failed = true;
      return make_error("the port's answer", ec.message());
    }
    if (used == 0) break;  // it needs more than there is
  }
  if (p.is_done()) bytes = {};
  m.rest = std::string(bytes);  // may alias m.rest: copied before assigned
  return ok_status();
}

Status PortAnswerStream::finish() {
  Impl& m = *impl_;
  auto& p = m.parser;
  if (p.is_done()) return ok_status();
  // Nothing whole was read (put_eof needs some of a message: found by
  // port_answer_fuzz with no bytes at all).
  if (m.failed || !p.got_some() || !p.is_header_done()) {
    return make_error("the port's answer", m.any ? "not a whole HTTP/1.x response"
                                                 : "the port closed without answering");
  }
  // Read until close: the end of the bytes is the end of the body.
  boost::system::error_code ec;
  p.put_eof(ec);
  if (ec || !p.is_done()) return make_error("the port's answer", "not a whole HTTP/1.x response");
  return ok_status();
}

Result<PortAnswer> parse_port_answer(std::string_view bytes) {
  PortAnswer out;
  PortAnswerStream stream(
      [&](int status, HeaderList&& headers) {
        out.status = status;
        out.headers = std::move(headers);
      },
      [&](std::string_view body) { out.body.append(body); });
  RF_TRY(stream.feed(bytes));
  RF_TRY(stream.finish());
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

std::optional<PortHost> parse_port_host(std::string_view host, std::string_view domain) {
  if (domain.empty()) return std::nullopt;
  // Without the listener's ":N" (a bracketed IPv6 literal is never this form).
  if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host.size() <= domain.size() + 1) return std::nullopt;
  const std::string_view suffix = host.substr(host.size() - domain.size());
  if (lower(suffix) != lower(domain) || host[host.size() - domain.size() - 1] != '.') {
    return std::nullopt;
  }
  const std::string_view label = host.substr(0, host.size() - domain.size() - 1);
  const size_t dash = label.find('-');
  if (dash == std::string_view::npos || dash + 1 >= label.size()) return std::nullopt;
  auto port = parse_port(label.substr(0, dash));
  if (!port) return std::nullopt;
  const std::string_view id = label.substr(dash + 1);
  for (char ch : id) {
    // One DNS label: letters, digits, '-' and '_' (ids are of those).
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_')) {
      return std::nullopt;
    }
  }
  return PortHost{std::string(id), *port};
}

std::vector<ListeningPort> parse_listening_ports(std::string_view text, bool v6) {
  std::vector<ListeningPort> out;
  auto hex = [](std::string_view h, uint64_t* v) {
    if (h.empty() || h.size() > 16) return false;
    const auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), *v, 16);
    return ec == std::errc() && end == h.data() + h.size();
  };
  size_t at = text.find('\n');  // the first line is the columns' names
  while (at != std::string_view::npos && at < text.size()) {
    const size_t nl = text.find('\n', at + 1);
    std::string_view line =
        text.substr(at + 1, nl == std::string_view::npos ? text.npos : nl - at - 1);
    at = nl;
    // "  0: 0100007F:1F40 00000000:0000 0A ...": local address, remote, state.
    std::vector<std::string_view> fields;
    size_t i = 0;
    while (i < line.size() && fields.size() < 4) {
      while (i < line.size() && line[i] == ' ') ++i;
      const size_t j = line.find(' ', i);
      if (i < line.size())
        fields.push_back(line.substr(i, j == std::string_view::npos ? line.npos : j - i));
      i = j == std::string_view::npos ? line.size() : j;
    }
    if (fields.size() < 4 || fields[3] != "0A") continue;  // 0A: LISTEN
    const size_t colon = fields[1].rfind(':');
    if (colon == std::string_view::npos) continue;
    uint64_t port = 0;
    if (!hex(fields[1].substr(colon + 1), &port) || port < 1 || port > 65535) continue;
    const std::string_view addr = fields[1].substr(0, colon);
    std::string address;
    if (!v6 && addr.size() == 8) {
      uint64_t a = 0;
      if (!hex(addr, &a)) continue;
      // Host order (little-endian here) as the kernel prints it.
      address = std::to_string(a & 0xff) + "." + std::to_string((a >> 8) & 0xff) + "." +
                std::to_string((a >> 16) & 0xff) + "." + std::to_string((a >> 24) & 0xff);
    } else if (v6 && addr.size() == 32) {
      address = addr == "00000000000000000000000000000000"   ? "::"
                : addr == "00000000000000000000000001000000" ? "::1"
                                                             : "[" + std::string(addr) + "]";
    } else {
      continue;
    }
    const int p = static_cast<int>(port);
    if (std::none_of(out.begin(), out.end(), [&](const ListeningPort& l) { return l.port == p; })) {
      out.push_back({p, std::move(address)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ListeningPort& a, const ListeningPort& b) { return a.port < b.port; });
  return out;
}

}  // namespace rf
