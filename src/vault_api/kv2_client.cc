#include "vault_api/kv2_client.h"

#include <string.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/json_input.h"
#include "docker_api/beast_http.h"

namespace rf::vault {
namespace http = boost::beast::http;
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr uint64_t kBodyLimit = 1 << 20;  // a secret's JSON; Vault's own cap is 512 KiB
constexpr uint32_t kHeaderLimit = 16 << 10;

#ifndef RF_VERSION
#define RF_VERSION "0.1.0"
#endif

void wipe(std::string& s) {
  if (!s.empty()) explicit_bzero(s.data(), s.size());
  s.clear();
}

// Wipes a string when the scope ends (request texts hold the token and values).
struct Wiped {
  std::string& s;
  ~Wiped() { wipe(s); }
};

// Beast's parser keeps its body in a std::string we cannot reach after it is
// moved from; wipe it in place through the parser.
template <class Parser>
void wipe_parser_body(Parser& parser) {
  wipe(parser.get().body());
}

std::string host_header(const docker::DockerHost& h) {
  const bool v6 = h.host.find(':') != std::string::npos;
  return (v6 ? "[" + h.host + "]" : h.host) + ":" + std::to_string(h.port);
}

bool stale_errno(int e) { return e == EPIPE || e == ECONNRESET || e == ENOTCONN; }

milliseconds left_of(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds{1});
}

// Vault's {"errors": [...]} as one line, at most 300 bytes.
std::string vault_errors(const std::string& body) {
  const json j = rf::parse_json_or_discarded(body);
  std::string out;
  if (j.is_object() && j.contains("errors") && j["errors"].is_array()) {
    for (const auto& e : j["errors"]) {
      if (!e.is_string()) continue;
      if (!out.empty()) out += "; ";
      out += e.get<std::string>();
    }
  }
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out.size() > 300 ? out.substr(0, 300) + "..." : out;
}

// What the server says never carries the token back out, even if it echoes it.
std::string scrub(std::string text, std::string_view token) {
  if (token.empty()) return text;
  static const std::string mark = "[token]";
  for (size_t at = text.find(token); at != std::string::npos;
       at = text.find(token, at + mark.size())) {
    text.replace(at, token.size(), mark);
  }
  return text;
}

// Fields of a remote server's JSON, read without throwing on a wrong type.
bool bool_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
std::string string_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool valid_part(std::string_view s, bool slashes) {
  if (s.empty() || s.front() == '/' || s.back() == '/') return false;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '/') {
      const auto seg = s.substr(start, i - start);
      if (seg.empty() || seg == "." || seg == "..") return false;
      if (!slashes && i != s.size()) return false;
      start = i + 1;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#' || c == '%' || c == '\\') return false;
  }
  return true;
}

}  // namespace

Kv2Data::~Kv2Data() {
  for (auto& [k, v] : fields) wipe(v);
}

Status check_kv2_location(std::string_view mount, std::string_view path) {
  if (!valid_part(mount, true)) {
    return make_error("Vault mount \"" + std::string(mount) + "\"",
                      "expected a KV v2 mount such as secret (no '..', spaces, '?', '#', '%')");
  }
  if (!valid_part(path, true)) {
    return make_error("Vault path \"" + std::string(path) + "\"",
                      "expected a path such as acme/anthropic (no leading or trailing '/', no "
                      "'..', spaces, '?', '#', '%')");
  }
  return ok_status();
}

Result<Kv2Data> parse_kv2_read_answer(unsigned status, const std::string& body,
                                      const std::string& what, std::string_view mount,
                                      Kv2Failure* why) {
  Kv2Failure ignored;
  Kv2Failure& failure = why != nullptr ? *why : ignored;
  failure = Kv2Failure::kNone;
  if (status == 403) {
    failure = Kv2Failure::kForbidden;
    return make_error(what, "403 " + vault_errors(body) +
                                ": the token in VAULT_TOKEN is refused (expired, revoked, or "
                                "without a policy for this path)");
  }
  json doc = rf::parse_json_or_discarded(body);
  const json* meta = nullptr;
  if (doc.is_object() && doc.contains("data") && doc["data"].is_object() &&
      doc["data"].contains("metadata") && doc["data"]["metadata"].is_object()) {
    meta = &doc["data"]["metadata"];
  }
  auto meta_version = [&]() -> int64_t {
    if (meta == nullptr || !meta->contains("version") || !(*meta)["version"].is_number_integer()) {
      return 0;
    }
    return (*meta)["version"].get<int64_t>();
  };
  auto clear_doc = [&] {
    // nlohmann's strings are freed without a wipe; overwrite the values first.
    if (doc.is_object() && doc.contains("data") && doc["data"].is_object() &&
        doc["data"].contains("data") && doc["data"]["data"].is_object()) {
      for (auto& [k, v] : doc["data"]["data"].items()) {
        if (v.is_string()) wipe(v.get_ref<std::string&>());
      }
    }
  };
  if (status == 404) {
    failure = Kv2Failure::kNotFound;
    if (meta != nullptr) {
      const int64_t v = meta_version();
      if (bool_field(*meta, "destroyed")) {
        failure = Kv2Failure::kDeleted;
        return make_error(what, "404: its latest version (" + std::to_string(v) +
                                    ") is destroyed: failing closed");
      }
      std::string deleted = string_field(*meta, "deletion_time");
      for (char& c : deleted) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
      }
      if (deleted.size() > 64) deleted.resize(64);
      if (!deleted.empty()) {
        failure = Kv2Failure::kDeleted;
        return make_error(what, "404: its latest version (" + std::to_string(v) +
                                    ") was deleted at " + deleted + ": failing closed");
      }
    }
    const std::string said = vault_errors(body);
    return make_error(
        what, "404: no secret at this path" +
                  (said.empty() ? std::string(" (or no KV v2 mount \"") + std::string(mount) + "\")"
                                : " (" + said + ")"));
  }
  if (status != 200) {
    failure = status >= 500 ? Kv2Failure::kUnreachable : Kv2Failure::kBadAnswer;
    clear_doc();
    return make_error(what, std::to_string(status) + " " + vault_errors(body) + ": failing closed");
  }
  if (meta == nullptr || !doc["data"].contains("data") || !doc["data"]["data"].is_object()) {
    failure = Kv2Failure::kBadAnswer;
    clear_doc();
    return make_error(what, "the answer has no data.data object (is the mount KV version 2?)");
  }
  if (!string_field(*meta, "deletion_time").empty() || bool_field(*meta, "destroyed")) {
    failure = Kv2Failure::kDeleted;
    clear_doc();
    return make_error(what, "its latest version is deleted: failing closed");
  }
  Kv2Data out;
  out.version = meta_version();
  for (auto& [k, v] : doc["data"]["data"].items()) {
    if (v.is_string()) out.fields[k] = v.get<std::string>();
  }
  clear_doc();
  return out;
}

Kv2Client::Kv2Client(VaultAddress address, std::string token, Kv2Options options)
    : address_(std::move(address)), token_(std::move(token)), options_(options) {}

Kv2Client::~Kv2Client() { wipe(token_); }

Result<Kv2Client::Reply> Kv2Client::exchange_once(docker::Connection& conn,
                                                  const std::string& request,
                                                  const std::string& what, bool* stale,
                                                  bool* keep) {
  const auto deadline = Clock::now() + options_.timeout;
  if (auto w = conn.write_all(request); !w) {
    *stale = stale_errno(w.error().sys_errno);
    return make_error(what, scrub(w.error().to_string(), token_));
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  parser.header_limit(kHeaderLimit);
  char chunk[16384];
  bool got_any = false;
  std::string pending;
  Wiped wipe_pending{pending};
  while (!parser.is_done()) {
    auto n = conn.read_some(chunk, sizeof chunk, left_of(deadline));
    if (!n) {
      *stale = !got_any && stale_errno(n.error().sys_errno);
      wipe_parser_body(parser);
      return make_error(what, scrub(n.error().to_string(), token_));
    }
    boost::system::error_code ec;
    if (*n == 0) {
      // Beast takes an EOF before any byte as a complete (empty, "200")
      // message: no answer at all is the server having closed the connection.
      if (!got_any) {
        *stale = true;
        return make_error(what, "the server closed the connection without answering");
      }
      parser.put_eof(ec);
      if (ec || !parser.is_done()) {
        wipe_parser_body(parser);
        return make_error(what, "the server closed the connection mid-answer");
      }
      break;
    }
    got_any = true;
    pending.append(chunk, *n);
    explicit_bzero(chunk, *n);
    size_t pos = 0;
    while (pos < pending.size() && !parser.is_done()) {
      const size_t used =
          parser.put(boost::asio::buffer(pending.data() + pos, pending.size() - pos), ec);
      if (ec == http::error::need_more) ec = {};
      if (ec) {
        wipe_parser_body(parser);
        return make_error(what, "not an HTTP answer Vault would give: " + ec.message());
      }
      pos += used;
      if (used == 0) break;
    }
    explicit_bzero(pending.data(), pos);
    pending.erase(0, pos);
  }
  Reply reply;
  reply.status = parser.get().result_int();
  reply.body = std::move(parser.get().body());
  *keep = parser.get().keep_alive() && pending.empty() && !conn.has_buffered();
  return reply;
}

Status Kv2Client::check_token(const std::string& what) const {
  if (token_.empty()) {
    return make_error(what, "no token: set VAULT_TOKEN in the environment of ringfence");
  }
  for (char c : token_) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
      return make_error(what, "VAULT_TOKEN holds a space or a control byte");
    }
  }
  return ok_status();
}

Result<Kv2Client::Reply> Kv2Client::exchange(std::string_view method, const std::string& target,
                                             std::string_view body) {
  const std::string what = "vault " + std::string(method) + " " + url(target);
  RF_TRY(check_token(what));
  std::string request;
  Wiped wipe_request{request};
  {
    http::request<http::string_body> req;
    req.method_string(boost::beast::string_view(method.data(), method.size()));
    req.target(target);
    req.version(11);
    req.set(http::field::host, host_header(address_.endpoint));
    req.set(http::field::user_agent, std::string("ringfence/") + RF_VERSION);
    req.set("X-Vault-Token", token_);
    req.set("X-Vault-Request", "true");
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = std::string(body);
      req.prepare_payload();
    }
    std::ostringstream out;
    out << req;
    request = out.str();
    wipe(req.body());
    // The stream's buffer held the token too; overwrite it before it is freed.
    std::string buffered = out.str();
    explicit_bzero(buffered.data(), buffered.size());
    out.str(buffered);
  }
  // A kept-alive connection the server may have closed meanwhile: one retry
  // on a new one, only when nothing of an answer arrived.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<docker::Connection> conn;
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    const bool reused = conn != nullptr;
    if (!conn) {
      auto opened = docker::open_connection(address_.endpoint, options_.timeout);
      if (!opened) {
        return make_error(what, scrub(opened.error().to_string(), token_));
      }
      conn = std::move(*opened);
    }
    bool stale = false, keep = false;
    auto reply = exchange_once(*conn, request, what, &stale, &keep);
    if (!reply) {
      if (reused && stale) continue;
      return reply.take_error();
    }
    if (keep) {  // kept alive: the next exchange may reuse it
      std::lock_guard lock(mu_);
      if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
    }
    return reply;
  }
  return make_error(what, "the server closed two connections before answering");
}

Result<Kv2Data> Kv2Client::read(std::string_view mount, std::string_view path, Kv2Failure* why) {
  Kv2Failure ignored;
  Kv2Failure& failure = why != nullptr ? *why : ignored;
  failure = Kv2Failure::kNone;
  RF_TRY(check_kv2_location(mount, path));
  const std::string target = "/v1/" + std::string(mount) + "/data/" + std::string(path);
  const std::string what = "vault GET " + url(target);
  RF_TRY(check_token(what));
  auto reply = exchange("GET", target, {});
  if (!reply) {
    failure = Kv2Failure::kUnreachable;
    return make_error(reply.error().where,
                      reply.error().message + " (Vault is unreachable: failing closed)");
  }
  Wiped wipe_body{reply->body};
  auto out = parse_kv2_read_answer(reply->status, reply->body, what, mount, &failure);
  if (!out) return make_error(out.error().where, scrub(out.error().message, token_));
  return out;
}

Result<int64_t> Kv2Client::write(std::string_view mount, std::string_view path,
                                 const std::map<std::string, std::string>& fields,
                                 Kv2Failure* why) {
  Kv2Failure ignored;
  Kv2Failure& failure = why != nullptr ? *why : ignored;
  failure = Kv2Failure::kNone;
  RF_TRY(check_kv2_location(mount, path));
  const std::string target = "/v1/" + std::string(mount) + "/data/" + std::string(path);
  const std::string what = "vault POST " + url(target);
  RF_TRY(check_token(what));
  std::string body;
  Wiped wipe_body{body};
  {
    json doc = {{"data", json::object()}};
    for (const auto& [k, v] : fields) doc["data"][k] = v;
    body = doc.dump();
    for (auto& [k, v] : doc["data"].items()) wipe(v.get_ref<std::string&>());
  }
  auto reply = exchange("POST", target, body);
  if (!reply) {
    failure = Kv2Failure::kUnreachable;
    return make_error(reply.error().where,
                      reply.error().message + " (Vault is unreachable: nothing was written)");
  }
  Wiped wipe_reply{reply->body};
  if (reply->status == 403) {
    failure = Kv2Failure::kForbidden;
    return make_error(what, "403 " + scrub(vault_errors(reply->body), token_) +
                                ": the token in VAULT_TOKEN is refused");
  }
  if (reply->status != 200 && reply->status != 204) {
    failure = reply->status == 404 ? Kv2Failure::kNotFound : Kv2Failure::kBadAnswer;
    return make_error(
        what, std::to_string(reply->status) + " " + scrub(vault_errors(reply->body), token_));
  }
  const json doc = rf::parse_json_or_discarded(reply->body);
  if (!doc.is_object() || !doc.contains("data") || !doc["data"].is_object() ||
      !doc["data"].contains("version") || !doc["data"]["version"].is_number_integer()) {
    failure = Kv2Failure::kBadAnswer;
    return make_error(what, "the answer has no data.version (is the mount KV version 2?)");
  }
  return doc["data"]["version"].get<int64_t>();
}

}  // namespace rf::vault
