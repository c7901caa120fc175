#include "docker_api/api_client.h"

#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>

#include "core/json_input.h"
#include "docker_api/beast_http.h"

namespace rf::docker {
namespace http = boost::beast::http;
namespace {

// What an HTTP status says about the thing asked for.
ErrorCode status_code(unsigned status) {
  return status == 404 ? ErrorCode::kNotFound : ErrorCode::kUnknown;
}

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIdle = 4;
constexpr uint64_t kBodyLimit = 512ull << 20;  // GET archive of a big file
constexpr uint32_t kHeaderLimit = 64 << 10;
constexpr size_t kErrorBodyLimit = 64 << 10;  // what we keep of an error's body
constexpr int kMaxJsonDepth = 256;

#ifndef RF_VERSION
#define RF_VERSION "0.1.0"
#endif

// The end of an exchange; no deadline when the timeout is 0 or less.
class Deadline {
 public:
  explicit Deadline(milliseconds timeout) {
    if (timeout.count() > 0) at_ = Clock::now() + timeout;
  }
  // For Connection calls: at least 1 ms when bounded (0 would mean forever).
  milliseconds left() const {
    if (!at_) return milliseconds{0};
    const auto left = std::chrono::duration_cast<milliseconds>(*at_ - Clock::now());
    return std::max(left, milliseconds{1});
  }

 private:
  std::optional<Clock::time_point> at_;
};

std::string host_header(const DockerHost& h) {
  if (h.kind == DockerHost::Kind::kTcp) {
    const bool v6 = h.host.find(':') != std::string::npos;
    return (v6 ? "[" + h.host + "]" : h.host) + ":" + std::to_string(h.port);
  }
  return "docker";  // unix sockets and ssh: any name will do, as with the docker CLI
}

// A target goes on the request line as is: no spaces, no control bytes.
bool valid_target(std::string_view target) {
  if (target.empty() || target.front() != '/') return false;
  for (unsigned char c : target) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

bool valid_method(std::string_view method) {
  if (method.empty()) return false;
  for (char c : method) {
    if (c < 'A' || c > 'Z') return false;
  }
  return true;
}

std::string serialise(std::string_view method, const std::string& target, std::string_view body,
                      const RequestOptions& options, const DockerHost& host, bool upgrade) {
  http::request<http::string_body> req;
  req.method_string(boost::beast::string_view(method.data(), method.size()));
  req.target(target);
  req.version(11);
  req.set(http::field::host, host_header(host));
  req.set(http::field::user_agent, std::string("ringfence/") + RF_VERSION);
  if (upgrade) {
    req.set(http::field::connection, "Upgrade");
    req.set(http::field::upgrade, "tcp");
  }
  if (!body.empty() || method == "POST" || method == "PUT") {
    req.set(http::field::content_type, options.content_type);
    req.body() = std::string(body);
    req.prepare_payload();  // Content-Length, 0 for an empty POST
  }
  std::ostringstream out;
  out << req;
  return out.str();
}

// Parses JSON without throwing; discarded (is_discarded()) when it is not
// JSON, or nests deeper than a daemon's answers ever do (a daemon's, or a man
// in the middle's, "[[[[..." must be an error, not a stack overflow).
nlohmann::json parse_json(std::string_view text) {
  return rf::parse_json_or_discarded(text, kMaxJsonDepth);
}

std::string string_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string daemon_message(const std::string& body) {
  const auto j = parse_json(body);
  if (const std::string m = string_field(j, "message"); !m.empty()) return m;
  std::string text = body;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  return text.size() > 500 ? text.substr(0, 500) + "..." : text;
}

// "1.41" vs "1.9": major.minor compared as numbers.
int compare_versions(const std::string& a, const std::string& b) {
  auto parse = [](const std::string& v) {
    int maj = 0, min = 0;
    if (std::sscanf(v.c_str(), "%d.%d", &maj, &min) < 1) return std::make_pair(-1, -1);
    return std::make_pair(maj, min);
  };
  const auto x = parse(a), y = parse(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

// How a read went, for the retry of a stale kept-alive connection.
struct ReadState {
  bool got_any = false;  // a byte of the response arrived
  bool stale = false;    // EOF or reset before any byte: the daemon had closed it
};

bool stale_errno(int e) { return e == EPIPE || e == ECONNRESET || e == ENOTCONN; }

// Feeds bytes from `conn` to `parser` until `done(parser)`. `buf` holds bytes
// already read; on success it holds what was read past the end. `progress`
// runs after each step of the parser (it may consume the body as it grows).
template <class Parser, class Done, class Progress>
Status pump(Connection& conn, Parser& parser, Done done, Progress progress,
            const Deadline& deadline, std::string& buf, ReadState& state, const std::string& what) {
  char chunk[16384];
  for (;;) {
    size_t pos = 0;
    while (pos < buf.size() && !done(parser)) {
      boost::system::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(buf.data() + pos, buf.size() - pos), ec);
      if (ec == http::error::need_more) ec = {};
      if (ec) return make_error(what, "bad HTTP from the daemon: " + ec.message());
      pos += used;
      RF_TRY(progress(parser));
      if (used == 0) break;  // needs more bytes than there are
    }
    buf.erase(0, pos);
    if (done(parser)) return ok_status();
    auto n = conn.read_some(chunk, sizeof chunk, deadline.left());
    if (!n) {
      if (!state.got_any && stale_errno(n.error().sys_errno)) state.stale = true;
      return make_error(what, n.error().to_string());
    }
    if (*n == 0) {
      boost::system::error_code ec;
      // A body that ends with the connection. (Beast takes an EOF before
      // any byte for an empty message: that is no response at all.)
      if (parser.got_some())
        parser.put_eof(ec);
      else
        ec = http::error::partial_message;
      if (!ec) RF_TRY(progress(parser));
      if (!ec && done(parser)) return ok_status();
      if (!state.got_any) state.stale = true;
      return make_error(what, state.got_any ? "the daemon closed the connection mid-response"
                                            : "the daemon closed the connection");
    }
    state.got_any = true;
    buf.append(chunk, *n);
  }
}

using BodyHook = std::function<Status(http::response_parser<http::string_body>&)>;
using TakeFn = std::function<Result<std::unique_ptr<Connection>>(bool fresh, bool* pooled)>;
using GiveFn = std::function<void(std::unique_ptr<Connection>)>;

// One request and its whole response. A kept-alive connection that turns out
// closed (nothing came back) is retried once on a new connection.
Result<HttpResponse> exchange(const DockerHost& host, std::string_view method,
                              const std::string& full, const std::string& what,
                              std::string_view body, const RequestOptions& options,
                              const TakeFn& take, const GiveFn& give, const BodyHook& hook) {
  if (!valid_method(method)) return make_error(what, "bad method");
  if (!valid_target(full)) return make_error(what, "bad target (spaces or control bytes?)");
  const std::string wire = serialise(method, full, body, options, host, false);
  const Deadline deadline(options.timeout);
  for (int attempt = 0;; ++attempt) {
    bool pooled = false;
    auto got = take(attempt > 0, &pooled);
    if (!got) return make_error(what, got.error().to_string());
    std::unique_ptr<Connection> conn = std::move(*got);
    ReadState state;
    http::response_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    if (hook) {
      // A stream, consumed as it comes: no limit. (Not boost::none: Boost 1.74
      // compares a Content-Length with it and reports body_limit.)
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    } else {
      parser.body_limit(kBodyLimit);
    }
    if (method == "HEAD") parser.skip(true);
    std::string buf;
    Status io = conn->write_all(wire);
    if (!io) {
      if (stale_errno(io.error().sys_errno)) state.stale = true;
      io = make_error(what, io.error().to_string());
    } else {
      io = pump(
          *conn, parser, [](auto& p) { return p.is_done(); },
          [&](auto& p) { return hook ? hook(p) : ok_status(); }, deadline, buf, state, what);
    }
    if (!io) {
      if (pooled && state.stale && attempt == 0) continue;
      return io.take_error();
    }
    auto msg = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(msg.result_int());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      auto& slot = out.headers[name];
      slot = slot.empty() ? std::string(f.value()) : slot + ", " + std::string(f.value());
    }
    out.body = std::move(msg.body());
    // Back to the pool only when nothing of it is left unread and the daemon
    // keeps it open; a 101 belongs to whoever asked for the upgrade.
    if (msg.keep_alive() && !msg.need_eof() && out.status != 101 && buf.empty() &&
        !conn->has_buffered()) {
      give(std::move(conn));
    }
    return out;
  }
}

}  // namespace

std::string url_encode(std::string_view text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

ApiClient::~ApiClient() = default;

Result<std::unique_ptr<ApiClient>> ApiClient::connect(const DockerHost& host,
                                                      milliseconds timeout) {
  std::unique_ptr<ApiClient> c(new ApiClient(host));
  const std::string where = "docker " + host.url;
  RequestOptions o;
  o.timeout = timeout;
  auto r = c->request("GET", "/version", {}, o);  // unversioned: any daemon answers it
  if (!r) return make_error(ErrorCode::kUnavailable, where, r.error().to_string());
  if (r->status != 200) {
    return make_error(where,
                      "GET /version: " + std::to_string(r->status) + " " + daemon_message(r->body));
  }
  auto j = parse_json(r->body);
  if (!j.is_object()) return make_error(where, "GET /version: the reply is not a JSON object");
  const std::string server_api = string_field(j, "ApiVersion");
  if (server_api.empty()) return make_error(where, "GET /version: no ApiVersion in the reply");
  c->server_version_ = string_field(j, "Version");
  if (c->server_version_.empty()) c->server_version_ = "?";
  c->version_ = std::move(j);
  const std::string ours(kMaxApiVersion);
  const std::string v = compare_versions(server_api, ours) < 0 ? server_api : ours;
  if (compare_versions(v, std::string(kMinApiVersion)) < 0) {
    std::string min = string_field(c->version_, "MinAPIVersion");
    return make_error(where, "the daemon speaks API " + server_api + " (Docker " +
                                 c->server_version_ + (min.empty() ? "" : ", at least " + min) +
                                 "); ringfence needs " + std::string(kMinApiVersion) + " to " +
                                 ours);
  }
  c->api_version_ = v;
  return c;
}

Result<std::unique_ptr<Connection>> ApiClient::take_connection(bool fresh, bool* pooled,
                                                               milliseconds timeout) {
  if (!fresh) {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      *pooled = true;
      return c;
    }
  }
  *pooled = false;
  return open_connection(host_, timeout);
}

void ApiClient::give_back(std::unique_ptr<Connection> conn) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
}

Result<HttpResponse> ApiClient::request(std::string_view method, std::string_view target,
                                        std::string_view body, const RequestOptions& options) {
  const std::string full = (api_version_.empty() ? "" : "/v" + api_version_) + std::string(target);
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  const Deadline deadline(options.timeout);
  TakeFn take = [&](bool fresh, bool* pooled) {
    return take_connection(fresh, pooled, deadline.left());
  };
  GiveFn give = [this](std::unique_ptr<Connection> c) { give_back(std::move(c)); };
  return exchange(host_, method, full, what, body, options, take, give, nullptr);
}

Result<nlohmann::json> ApiClient::call(std::string_view method, std::string_view target,
                                       const nlohmann::json* body, const RequestOptions& options) {
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  std::string text;
  if (body != nullptr) {
    try {
      text = body->dump();
    } catch (const std::exception& e) {  // invalid UTF-8 in a string
      return make_error(what, std::string("the request body: ") + e.what());
    }
  }
  auto r = request(method, target, text, options);
  if (!r) return r.take_error();
  if (r->status < 200 || r->status > 299) {
    return make_error(status_code(r->status), what,
                      std::to_string(r->status) + " " + daemon_message(r->body));
  }
  if (r->body.empty()) return nlohmann::json();
  auto j = parse_json(r->body);
  if (j.is_discarded()) return make_error(what, "the reply is not JSON");
  return j;
}

Result<std::unique_ptr<Connection>> ApiClient::hijack(std::string_view method,
                                                      std::string_view target,
                                                      std::string_view body,
                                                      const RequestOptions& options) {
  const std::string full = "/v" + api_version_ + std::string(target);
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  if (!valid_method(method)) return make_error(what, "bad method");
  if (!valid_target(full)) return make_error(what, "bad target (spaces or control bytes?)");
  const Deadline deadline(options.timeout);
  auto conn = open_connection(host_, deadline.left());
  if (!conn) return make_error(what, conn.error().to_string());
  if (auto s = (*conn)->write_all(serialise(method, full, body, options, host_, true)); !s) {
    return make_error(what, s.error().to_string());
  }
  // The head only: the parser stops there (it is not eager), and what was
  // read past it is the start of the raw stream.
  http::response_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(kErrorBodyLimit);
  std::string buf;
  ReadState state;
  auto none = [](auto&) { return ok_status(); };
  RF_TRY(pump(
      **conn, parser, [](auto& p) { return p.is_header_done(); }, none, deadline, buf, state,
      what));
  const int status = static_cast<int>(parser.get().result_int());
  if (status == 101 || status == 200) return with_prefix(std::move(*conn), std::move(buf));
  // An error: its body says why ("No such container: x").
  std::string message;
  if (pump(
          **conn, parser, [](auto& p) { return p.is_done(); }, none, deadline, buf, state, what)) {
    message = daemon_message(parser.get().body());
  }
  return make_error(status_code(status), what,
                    std::to_string(status) + " " +
                        (message.empty() ? std::string(parser.get().reason()) : message));
}

Status ApiClient::stream_json_lines(std::string_view method, std::string_view target,
                                    const std::function<void(const nlohmann::json&)>& on_line,
                                    const RequestOptions& options) {
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  // Each complete line of the body, as it arrives; an {"error": ...} ends it.
  auto take_lines = [&](std::string& body, bool all) -> Status {
    size_t start = 0;
    for (;;) {
      size_t nl = body.find('\n', start);
      if (nl == std::string::npos) {
        if (!all || start >= body.size()) break;
        nl = body.size();
      }
      std::string_view line(body.data() + start, nl - start);
      start = std::min(nl + 1, body.size());
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
      if (line.empty()) continue;
      const auto j = parse_json(line);
      if (j.is_discarded()) continue;  // not JSON: nothing for on_line
      if (j.is_object() && j.contains("error")) {
        const auto& e = j["error"];
        std::string text = e.is_string() ? e.get<std::string>() : std::string();
        if (text.empty()) text = string_field(j.value("errorDetail", nlohmann::json()), "message");
        return make_error(what, text.empty() ? "the daemon reported an error" : text);
      }
      on_line(j);
    }
    body.erase(0, start);
    return ok_status();
  };
  BodyHook hook = [&](http::response_parser<http::string_body>& p) -> Status {
    if (!p.is_header_done()) return ok_status();
    auto& msg = p.get();
    const unsigned status = msg.result_int();
    if (status < 200 || status > 299) {  // an error's body: kept for its message, bounded
      if (msg.body().size() > kErrorBodyLimit) msg.body().resize(kErrorBodyLimit);
      return ok_status();
    }
    return take_lines(msg.body(), p.is_done());
  };
  const std::string full = "/v" + api_version_ + std::string(target);
  const Deadline deadline(options.timeout);
  TakeFn take = [&](bool fresh, bool* pooled) {
    return take_connection(fresh, pooled, deadline.left());
  };
  GiveFn give = [this](std::unique_ptr<Connection> c) { give_back(std::move(c)); };
  auto r = exchange(host_, method, full, what, {}, options, take, give, hook);
  if (!r) return r.take_error();
  if (r->status < 200 || r->status > 299) {
    return make_error(status_code(r->status), what,
                      std::to_string(r->status) + " " + daemon_message(r->body));
  }
  return ok_status();
}

}  // namespace rf::docker
