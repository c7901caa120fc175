#include "net/edge_credential.h"

#include <sys/random.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "core/base64.h"
#include "core/json_input.h"

namespace rf::net {
namespace {

using json = nlohmann::json;

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool is_env_name(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

Error bad(std::string_view option, std::string message) {
  return make_error(std::string(option), std::move(message));
}

Status set_upstream(EdgeSettings& s, std::string_view url) {
  constexpr std::string_view kHttps = "https://";
  if (ascii_lower(url.substr(0, kHttps.size())) != kHttps) {
    return bad("upstream", "\"" + std::string(url) +
                               "\" is not an https:// URL (the gateway opens verified TLS to "
                               "its upstream)");
  }
  std::string_view rest = url.substr(kHttps.size());
  const size_t slash = rest.find('/');
  auto a = parse_authority(rest.substr(0, slash), 443);
  if (!a) return bad("upstream", a.error().to_string());
  std::string path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  if (path.find_first_of("?#") != std::string::npos) {
    return bad("upstream", "a base URL has no query or fragment");
  }
  for (char c : path) {
    if (c <= 0x20 || c >= 0x7f) return bad("upstream", "a bad byte in the path");
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  s.upstream = std::move(*a);
  s.upstream_path = std::move(path);
  return ok_status();
}

Status apply_preset(EdgeSettings& s, std::string_view name) {
  if (name == "anthropic") {
    RF_TRY(set_upstream(s, "https://api.anthropic.com"));
    s.header = "x-api-key";
    s.scheme = EdgeScheme::kRaw;
    s.base_env = "ANTHROPIC_BASE_URL";
  } else if (name == "openai") {
    RF_TRY(set_upstream(s, "https://api.openai.com/v1"));
    s.header = "authorization";
    s.scheme = EdgeScheme::kBearer;
    s.base_env = "OPENAI_BASE_URL";
  } else if (name == "github") {
    RF_TRY(set_upstream(s, "https://github.com"));
    s.header = "authorization";
    s.scheme = EdgeScheme::kBasic;
    s.user = "x-access-token";
    s.git = true;
  } else {
    return bad("preset", "\"" + std::string(name) + "\" is not anthropic, openai or github");
  }
  return ok_status();
}

Result<EdgePlace> parse_place(std::string_view text) {
  EdgePlace p;
  const std::string t = ascii_lower(text);
  if (t == "basic") {
    p.kind = EdgePlace::Kind::kBasic;
  } else if (t == "query") {
    p.kind = EdgePlace::Kind::kQuery;
  } else if (t == "body") {
    p.kind = EdgePlace::Kind::kBody;
  } else if (t.starts_with("header:") && is_token(t.substr(7))) {
    p.kind = EdgePlace::Kind::kHeader;
    p.header = t.substr(7);
    if (p.header == "host" || p.header == "content-length" || p.header == "transfer-encoding") {
      return bad("in", "header " + p.header + " frames the request; it takes no placeholder");
    }
  } else {
    return bad("in", "\"" + std::string(text) + "\" is not header:NAME, basic, query or body");
  }
  return p;
}

Status check(EdgeSettings& s) {
  if (s.delivery == EdgeDelivery::kGateway) {
    if (s.upstream.host.empty()) {
      return bad("upstream", "a gateway needs upstream=https://... or a preset");
    }
    return ok_status();
  }
  if (s.hosts.empty()) return bad("host", "a proxy delivery needs host=RULE (the bound hosts)");
  auto p = EgressPolicy::parse(s.hosts);
  if (!p) return bad("host", p.error().to_string());
  s.bound = std::move(*p);
  return ok_status();
}

}  // namespace

std::string_view to_string(EdgeDelivery d) {
  return d == EdgeDelivery::kGateway ? "gateway" : "proxy";
}

std::string EdgePlace::to_string() const {
  switch (kind) {
    case Kind::kHeader:
      return "header:" + header;
    case Kind::kBasic:
      return "basic";
    case Kind::kQuery:
      return "query";
    case Kind::kBody:
      return "body";
  }
  return "";
}

std::string EdgeSettings::upstream_url() const {
  std::string host =
      upstream.host.find(':') != std::string::npos ? "[" + upstream.host + "]" : upstream.host;
  std::string out = "https://" + host;
  if (upstream.port != 443) out += ":" + std::to_string(upstream.port);
  return out + upstream_path;
}

Result<EdgeSettings> parse_edge_options(EdgeDelivery delivery, std::string_view options) {
  EdgeSettings s;
  s.delivery = delivery;
  std::vector<std::pair<std::string, std::string>> opts;
  while (!options.empty()) {
    const size_t comma = options.find(',');
    const std::string_view word = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view() : options.substr(comma + 1);
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return bad(word, "expected OPTION=VALUE");
    }
    opts.emplace_back(ascii_lower(word.substr(0, eq)), std::string(word.substr(eq + 1)));
  }
  const bool gateway = delivery == EdgeDelivery::kGateway;
  // A preset first, whatever its place: the other options override it.
  for (const auto& [k, v] : opts) {
    if (k == "preset") {
      if (!gateway) return bad(k, "only a gateway has presets");
      RF_TRY(apply_preset(s, v));
    }
  }
  bool header_given = false, scheme_given = false;
  for (const auto& [k, v] : opts) {
    if (k == "preset") continue;
    if (v.empty()) return bad(k, "the value is empty");
    if (gateway && k == "upstream") {
      RF_TRY(set_upstream(s, v));
    } else if (gateway && k == "header") {
      if (!is_token(v)) return bad(k, "\"" + v + "\" is not a header name");
      s.header = ascii_lower(v);
      header_given = true;
    } else if (gateway && k == "scheme") {
      const std::string l = ascii_lower(v);
      if (l == "raw") {
        s.scheme = EdgeScheme::kRaw;
      } else if (l == "bearer") {
        s.scheme = EdgeScheme::kBearer;
      } else if (l == "basic") {
        s.scheme = EdgeScheme::kBasic;
      } else {
        return bad(k, "\"" + v + "\" is not raw, bearer or basic");
      }
      scheme_given = true;
    } else if (gateway && k == "user") {
      if (v.find(':') != std::string::npos) return bad(k, "a basic-auth user has no ':'");
      s.user = v;
    } else if (gateway && k == "base_env") {
      if (!is_env_name(v)) return bad(k, "\"" + v + "\" is not an environment name");
      s.base_env = v;
    } else if (gateway && k == "git") {
      if (v != "true" && v != "false") return bad(k, "true or false");
      s.git = v == "true";
    } else if (!gateway && k == "host") {
      s.hosts.push_back(v);
    } else if (!gateway && k == "in") {
      auto p = parse_place(v);
      if (!p) return p.take_error();
      s.places.push_back(std::move(*p));
    } else {
      return bad(k, gateway ? "not a gateway option (preset, upstream, header, scheme, user, "
                              "base_env, git)"
                            : "not a proxy option (host, in)");
    }
  }
  // A header named without a scheme: the value as is, unless it is Authorization.
  if (gateway && header_given && !scheme_given) {
    s.scheme = s.header == "authorization" ? EdgeScheme::kBearer : EdgeScheme::kRaw;
  }
  if (!gateway && s.places.empty()) {
    s.places = {{EdgePlace::Kind::kHeader, "authorization"}, {EdgePlace::Kind::kBasic, ""}};
  }
  RF_TRY(check(s));
  return s;
}

std::string edge_settings_json(const EdgeSettings& s) {
  json j;
  if (s.delivery == EdgeDelivery::kGateway) {
    j["upstream"] = s.upstream_url();
    j["header"] = s.header;
    j["scheme"] = s.scheme == EdgeScheme::kRaw      ? "raw"
                  : s.scheme == EdgeScheme::kBearer ? "bearer"
                                                    : "basic";
    if (s.scheme == EdgeScheme::kBasic) j["user"] = s.user;
    if (!s.base_env.empty()) j["base_env"] = s.base_env;
    if (s.git) j["git"] = true;
  } else {
    j["hosts"] = s.hosts;
    json places = json::array();
    for (const auto& p : s.places) places.push_back(p.to_string());
    j["in"] = places;
  }
  return j.dump();
}

Result<EdgeSettings> edge_settings_from_json(EdgeDelivery delivery, std::string_view text) {
  // Written by edge_settings_json; read back through the same parser, so a
  // row edited by hand is checked as a profile entry is.
  json j = rf::parse_json_or_discarded(text);
  if (!j.is_object()) return make_error("delivery_json", "not a JSON object");
  std::string opts;
  auto add = [&](const std::string& k, const std::string& v) {
    if (v.find(',') != std::string::npos) return false;
    opts += (opts.empty() ? "" : ",") + k + "=" + v;
    return true;
  };
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) {
      if (!add(k, v.get<std::string>())) {
        return make_error("delivery_json", k + ": a ',' in the value");
      }
    } else if (v.is_boolean()) {
      add(k, v.get<bool>() ? "true" : "false");
    } else if (v.is_array() && (k == "hosts" || k == "in")) {
      for (const auto& e : v) {
        if (!e.is_string() || !add(k == "hosts" ? "host" : "in", e.get<std::string>())) {
          return make_error("delivery_json", k + ": not a list of strings without ','");
        }
      }
    } else {
      return make_error("delivery_json", k + ": an unexpected value");
    }
  }
  auto s = parse_edge_options(delivery, opts);
  if (!s) return make_error("delivery_json", s.error().to_string());
  return s;
}

Result<std::string> make_placeholder(size_t length) {
  if (length < kMinEdgeValueBytes) {
    return make_error("placeholder", "the value is " + std::to_string(length) +
                                         " bytes; the gateway and proxy deliveries need at "
                                         "least " +
                                         std::to_string(kMinEdgeValueBytes) +
                                         ", so that its placeholder can be as long");
  }
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string out(kPlaceholderPrefix);
  std::string raw(length - out.size(), '\0');
  size_t got = 0;
  while (got < raw.size()) {
    const ssize_t n = ::getrandom(raw.data() + got, raw.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("getrandom");
    }
    got += static_cast<size_t>(n);
  }
  // 62 letters: a byte maps through 248 = 4 * 62 values; the rest are drawn again.
  for (char& c : raw) {
    auto b = static_cast<uint8_t>(c);
    while (b >= 248) {
      if (::getrandom(&b, 1, 0) != 1) return sys_error("getrandom");
    }
    out += kAlphabet[b % 62];
  }
  return out;
}

EdgeCredential::~EdgeCredential() {
  if (!value.empty()) ::explicit_bzero(value.data(), value.size());
}

bool EdgeCredential::binds(const Authority& target) const {
  return settings.delivery == EdgeDelivery::kProxy && settings.bound.check_name(target).allowed;
}

std::string EdgeCredential::gateway_header_value() const {
  switch (settings.scheme) {
    case EdgeScheme::kRaw:
      return value;
    case EdgeScheme::kBearer:
      return "Bearer " + value;
    case EdgeScheme::kBasic:
      return "Basic " + base64_encode(settings.user + ":" + value);
  }
  return value;
}

std::string gateway_url(std::string_view key) {
  return "http://" + std::string(kSandboxProxyAuthority) + std::string(kGatewayPathPrefix) +
         std::string(key);
}

std::vector<std::pair<std::string, std::string>> edge_environment(const EdgeCredential& c,
                                                                  int* git_index) {
  std::vector<std::pair<std::string, std::string>> env{{c.key, c.placeholder}};
  if (c.delivery() != EdgeDelivery::kGateway) return env;
  const std::string url = gateway_url(c.key);
  // The gateway URL stands for the whole upstream URL, its path included.
  if (!c.settings.base_env.empty()) env.emplace_back(c.settings.base_env, url);
  if (c.settings.git) {
    const std::string n = std::to_string((*git_index)++);
    env.emplace_back("GIT_CONFIG_KEY_" + n, "url." + url + "/.insteadOf");
    env.emplace_back("GIT_CONFIG_VALUE_" + n, c.settings.upstream_url() + "/");
  }
  return env;
}

}  // namespace rf::net
