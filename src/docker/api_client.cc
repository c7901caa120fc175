#include "docker/api_client.h"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <sstream>

namespace rf::docker {
namespace http = boost::beast::http;
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIdle = 4;
constexpr uint64_t kBodyLimit = 512ull << 20;

#ifndef RF_VERSION
#define RF_VERSION "0.1.0"
#endif

std::string host_header(const DockerHost& h) {
  if (h.kind == DockerHost::Kind::kTcp) {
    const bool v6 = h.host.find(':') != std::string::npos;
    return (v6 ? "[" + h.host + "]" : h.host) + ":" + std::to_string(h.port);
  }
  return "docker";  // unix sockets and ssh: any name will do, as with the docker CLI
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
    req.prepare_payload();
  }
  std::ostringstream out;
  out << req;
  return out.str();
}

milliseconds left_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds{1});
}

// Reads from `conn` into `parser` until `done(parser)`; what was read past
// the end stays in `rest`. `got_any` says whether any byte arrived.
template <class Parser, class Done>
Status read_until(Connection& conn, Parser& parser, Done done, Clock::time_point deadline,
                  std::string* rest, bool* got_any, const std::string& what) {
  std::string buf = std::move(*rest);
  rest->clear();
  char chunk[16384];
  for (;;) {
    while (!buf.empty() && !done(parser)) {
      boost::system::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(buf.data(), buf.size()), ec);
      if (ec == http::error::need_more) {
        if (used == 0) break;
        ec = {};
      }
      if (ec) return make_error(what, "bad HTTP from the daemon: " + ec.message());
      buf.erase(0, used);
      if (used == 0) break;
    }
    if (done(parser)) {
      *rest = std::move(buf);
      return ok_status();
    }
    auto n = conn.read_some(chunk, sizeof chunk, left_until(deadline));
    if (!n) return make_error(what, n.error().to_string());
    if (*n == 0) {
      boost::system::error_code ec;
      parser.put_eof(ec);
      if (!ec && done(parser)) return ok_status();
      return make_error(what, *got_any ? "the daemon closed the connection mid-response"
                                       : "the daemon closed the connection");
    }
    *got_any = true;
    buf.append(chunk, *n);
  }
}

std::string daemon_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  std::string text = body;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.size() > 500 ? text.substr(0, 500) + "..." : text;
}

// "1.41" < "1.9"? Compares major.minor numerically.
int compare_versions(const std::string& a, const std::string& b) {
  auto parse = [](const std::string& v) {
    int maj = 0, min = 0;
    std::sscanf(v.c_str(), "%d.%d", &maj, &min);
    return std::make_pair(maj, min);
  };
  const auto x = parse(a), y = parse(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace

std::string url_encode(std::string_view text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
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
  c->api_version_ = "";  // unversioned paths until negotiated
  RequestOptions o;
  o.timeout = timeout;
  auto r = c->request("GET", "/version", {}, o);
  if (!r) return make_error("docker " + host.url, r.error().to_string());
  if (r->status != 200) {
    return make_error("docker " + host.url,
                      "GET /version: " + std::to_string(r->status) + " " + daemon_message(r->body));
  }
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object()) return make_error("docker " + host.url, "GET /version: not JSON");
  c->version_ = j;
  c->server_version_ = j.value("Version", std::string("?"));
  const std::string server_api = j.value("ApiVersion", std::string(kMinApiVersion));
  std::string v = compare_versions(server_api, std::string(kMaxApiVersion)) < 0
                      ? server_api
                      : std::string(kMaxApiVersion);
  if (compare_versions(v, std::string(kMinApiVersion)) < 0) {
    return make_error("docker " + host.url, "the daemon speaks API " + server_api + " (Docker " +
                                                c->server_version_ + "); ringfence needs " +
                                                std::string(kMinApiVersion) + " or newer");
  }
  c->api_version_ = v;
  return c;
}

Result<std::unique_ptr<Connection>> ApiClient::take_connection(milliseconds timeout) {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
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
  const std::string wire = serialise(method, full, body, options, host_, false);
  const auto deadline = Clock::now() + options.timeout;
  for (int attempt = 0;; ++attempt) {
    bool pooled = false;
    std::unique_ptr<Connection> conn;
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
        pooled = true;
      }
    }
    if (!conn) {
      auto fresh = open_connection(host_, left_until(deadline));
      if (!fresh) return make_error(what, fresh.error().to_string());
      conn = std::move(*fresh);
    }
    bool got_any = false;
    auto sent = conn->write_all(wire);
    http::response_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    parser.header_limit(1 << 20);
    if (method == "HEAD") parser.skip(true);
    std::string rest;
    Status read = sent ? read_until(
                             *conn, parser, [](auto& p) { return p.is_done(); }, deadline, &rest,
                             &got_any, what)
                       : Status(sent.take_error());
    if (!read) {
      // A kept-alive connection the daemon had closed: once more on a new one.
      if (pooled && !got_any && attempt == 0) continue;
      return read.take_error();
    }
    auto msg = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(msg.result_int());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.headers[name] = std::string(f.value());
    }
    out.body = std::move(msg.body());
    if (msg.keep_alive() && rest.empty() && !conn->has_buffered()) give_back(std::move(conn));
    return out;
  }
}

Result<nlohmann::json> ApiClient::call(std::string_view method, std::string_view target,
                                       const nlohmann::json* body, const RequestOptions& options) {
  const std::string text = body ? body->dump() : std::string();
  auto r = request(method, target, text, options);
  if (!r) return r.take_error();
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  if (r->status < 200 || r->status > 299) {
    return make_error(what, std::to_string(r->status) + " " + daemon_message(r->body));
  }
  if (r->body.empty()) return nlohmann::json();
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return make_error(what, "the reply is not JSON");
  return j;
}

Result<std::unique_ptr<Connection>> ApiClient::hijack(std::string_view method,
                                                      std::string_view target,
                                                      std::string_view body,
                                                      const RequestOptions& options) {
  const std::string full = "/v" + api_version_ + std::string(target);
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  auto conn = open_connection(host_, options.timeout);
  if (!conn) return make_error(what, conn.error().to_string());
  RF_TRY((*conn)->write_all(serialise(method, full, body, options, host_, true)));
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // the head only: what follows is the raw stream
  std::string rest;
  bool got_any = false;
  RF_TRY(read_until(
      **conn, parser, [](auto& p) { return p.is_header_done(); }, Clock::now() + options.timeout,
      &rest, &got_any, what));
  const int status = static_cast<int>(parser.get().result_int());
  if (status != 101 && status != 200) {
    return make_error(what, "expected 101 Switching Protocols, got " + std::to_string(status));
  }
  return with_prefix(std::move(*conn), std::move(rest));
}

Status ApiClient::stream_json_lines(std::string_view method, std::string_view target,
                                    const std::function<void(const nlohmann::json&)>& on_line,
                                    const RequestOptions& options) {
  auto r = request(method, target, {}, options);
  if (!r) return r.take_error();
  const std::string what = "docker " + std::string(method) + " " + std::string(target);
  if (r->status < 200 || r->status > 299) {
    return make_error(what, std::to_string(r->status) + " " + daemon_message(r->body));
  }
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.is_object() && j.contains("error")) {
      return make_error(what, j["error"].is_string() ? j["error"].get<std::string>() : j.dump());
    }
    on_line(j);
  }
  return ok_status();
}

}  // namespace rf::docker
