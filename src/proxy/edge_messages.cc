#include "proxy/edge_messages.h"

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/json_input.h"

namespace rf::proxy::edge {
namespace {

using json = nlohmann::json;

Error bad(const std::string& field, const std::string& what) {
  return make_error("egress TLS message", field + ": " + what);
}

Result<std::string> str(const json& j, const char* field, bool required = true) {
  if (!j.contains(field)) {
    if (required) return bad(field, "missing");
    return std::string();
  }
  if (!j[field].is_string()) return bad(field, "not a string");
  return j[field].get<std::string>();
}

Result<uint64_t> num(const json& j, const char* field) {
  if (!j.contains(field)) return uint64_t{0};
  const json& v = j[field];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  return bad(field, "not a whole number");
}

#define RF_FIELD(var, expr)                  \
  auto var##_r = (expr);                     \
  if (!var##_r) return var##_r.take_error(); \
  auto var = std::move(*var##_r)

json cred_json(const net::EdgeCredential& c) {
  return {{"key", c.key},
          {"secret", c.secret},
          {"delivery", net::to_string(c.delivery())},
          {"settings", net::edge_settings_json(c.settings)},
          {"placeholder", c.placeholder},
          {"value", base64_encode(c.value)}};
}

Result<net::EdgeCredential> cred_from(const json& j) {
  if (!j.is_object()) return bad("creds", "not an object");
  net::EdgeCredential c;
  RF_FIELD(key, str(j, "key"));
  RF_FIELD(secret, str(j, "secret", false));
  RF_FIELD(delivery, str(j, "delivery"));
  RF_FIELD(settings, str(j, "settings"));
  RF_FIELD(placeholder, str(j, "placeholder"));
  RF_FIELD(value, str(j, "value"));
  if (key.empty()) return bad("creds.key", "empty");
  if (delivery != "gateway" && delivery != "proxy") return bad("creds.delivery", delivery);
  auto s = net::edge_settings_from_json(
      delivery == "gateway" ? net::EdgeDelivery::kGateway : net::EdgeDelivery::kProxy, settings);
  if (!s) return bad("creds.settings", s.error().to_string());
  auto v = base64_decode(value);
  if (!v) return bad("creds.value", "not base64");
  if (placeholder.size() < net::kMinEdgeValueBytes || v->size() != placeholder.size()) {
    return bad("creds.placeholder", "not as long as the value, or shorter than 16 bytes");
  }
  c.key = std::move(key);
  c.secret = std::move(secret);
  c.settings = std::move(*s);
  c.placeholder = std::move(placeholder);
  c.value = std::move(*v);
  return c;
}

}  // namespace

std::string encode(const Message& m) {
  json j;
  std::string tail;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, CaRequest>) {
          j = {{"op", "ca"}, {"sandbox", v.sandbox}};
        } else if constexpr (std::is_same_v<T, CaAnswer>) {
          j = {{"op", "ca"}, {"sandbox", v.sandbox}};
          if (v.error.empty()) {
            j["pem"] = v.pem;
          } else {
            j["error"] = v.error;
          }
        } else if constexpr (std::is_same_v<T, Bind>) {
          json creds = json::array();
          for (const auto& c : v.creds) creds.push_back(cred_json(c));
          j = {{"op", "bind"}, {"sandbox", v.sandbox}, {"creds", creds}};
        } else if constexpr (std::is_same_v<T, Forget>) {
          j = {{"op", "forget"}, {"sandbox", v.sandbox}};
        } else if constexpr (std::is_same_v<T, Conn>) {
          j = {{"op", "conn"},
               {"id", v.id},
               {"sandbox", v.sandbox},
               {"kind", v.kind == ConnKind::kGateway ? "gateway" : "intercept"},
               {"key", v.key},
               {"host", v.target.host},
               {"port", v.target.port},
               {"max_up", v.max_up}};
          tail = v.initial;
        } else {
          j = {{"op", "done"},
               {"id", v.id},
               {"status", v.status},
               {"outcome", v.outcome},
               {"bytes_up", v.bytes_up},
               {"bytes_down", v.bytes_down},
               {"reason", v.reason},
               {"error", v.error},
               {"key", v.key},
               {"refused", v.refused},
               {"substitutions", v.substitutions},
               {"restored", v.restored}};
        }
      },
      m);
  // Texts from the network may hold bytes that are not UTF-8: replaced, never thrown.
  std::string out = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (std::holds_alternative<Conn>(m)) out.append("\n").append(tail);
  return out;
}

Result<Message> decode(std::string_view bytes) {
  if (bytes.size() > kMaxMessage) return bad("message", "larger than 256 KiB");
  const size_t nl = bytes.find('\n');
  const json j = rf::parse_json_or_discarded(bytes.substr(0, nl));
  if (!j.is_object()) return bad("message", "not a JSON object");
  RF_FIELD(op, str(j, "op"));
  if (op != "conn" && nl != std::string_view::npos) return bad("message", "bytes after the JSON");
  if (op == "ca") {
    RF_FIELD(sandbox, str(j, "sandbox"));
    if (!j.contains("pem") && !j.contains("error")) return Message(CaRequest{sandbox});
    RF_FIELD(pem, str(j, "pem", false));
    RF_FIELD(error, str(j, "error", false));
    return Message(CaAnswer{sandbox, pem, error});
  }
  if (op == "bind") {
    RF_FIELD(sandbox, str(j, "sandbox"));
    if (!j.contains("creds") || !j["creds"].is_array()) return bad("creds", "not a list");
    Bind b{sandbox, {}};
    for (const auto& c : j["creds"]) {
      auto cred = cred_from(c);
      if (!cred) return cred.take_error();
      b.creds.push_back(std::move(*cred));
    }
    return Message(std::move(b));
  }
  if (op == "forget") {
    RF_FIELD(sandbox, str(j, "sandbox"));
    return Message(Forget{sandbox});
  }
  if (op == "conn") {
    Conn c;
    RF_FIELD(id, num(j, "id"));
    RF_FIELD(sandbox, str(j, "sandbox"));
    RF_FIELD(kind, str(j, "kind"));
    RF_FIELD(key, str(j, "key", false));
    RF_FIELD(host, str(j, "host"));
    RF_FIELD(port, num(j, "port"));
    RF_FIELD(max_up, num(j, "max_up"));
    if (kind != "gateway" && kind != "intercept") return bad("kind", kind);
    if (port == 0 || port > 65535) return bad("port", std::to_string(port));
    // An IPv6 address goes as Authority keeps it, without brackets.
    const bool v6 = host.find(':') != std::string::npos;
    auto target = net::parse_authority(v6 ? "[" + host + "]" : host, static_cast<uint16_t>(port));
    if (!target || target->host != host) return bad("host", "not a host name or address");
    c.id = id;
    c.sandbox = std::move(sandbox);
    c.kind = kind == "gateway" ? ConnKind::kGateway : ConnKind::kIntercept;
    c.key = std::move(key);
    c.target = std::move(*target);
    c.max_up = max_up;
    if (nl != std::string_view::npos) c.initial = std::string(bytes.substr(nl + 1));
    return Message(std::move(c));
  }
  if (op == "done") {
    Done d;
    RF_FIELD(id, num(j, "id"));
    RF_FIELD(status, num(j, "status"));
    RF_FIELD(outcome, str(j, "outcome"));
    RF_FIELD(up, num(j, "bytes_up"));
    RF_FIELD(down, num(j, "bytes_down"));
    RF_FIELD(reason, str(j, "reason", false));
    RF_FIELD(error, str(j, "error", false));
    RF_FIELD(key, str(j, "key", false));
    RF_FIELD(subs, num(j, "substitutions"));
    RF_FIELD(restored, num(j, "restored"));
    if (status > 999) return bad("status", std::to_string(status));
    if (j.contains("refused") && !j["refused"].is_boolean()) return bad("refused", "not a boolean");
    d.id = id;
    d.status = static_cast<int>(status);
    d.outcome = std::move(outcome);
    d.bytes_up = up;
    d.bytes_down = down;
    d.reason = std::move(reason);
    d.error = std::move(error);
    d.key = std::move(key);
    d.refused = j.value("refused", false);
    d.substitutions = static_cast<int>(std::min<uint64_t>(subs, 1u << 30));
    d.restored = static_cast<int>(std::min<uint64_t>(restored, 1u << 30));
    return Message(std::move(d));
  }
  return bad("op", "\"" + op + "\" is not ca, bind, forget, conn or done");
}

}  // namespace rf::proxy::edge
