// The API's secrets (issue 14): a project's secrets set, listed and revoked,
// never a value returned. A token of project P sees only the secrets the
// store names "P:NAME", as NAME; identity profiles of P name them
// secret:P:NAME. Values are sealed in the store (the builtin backend);
// `secret set --backend vault` stays the CLI's. Every change is audited with
// the token that made it.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/json_answers.h"
#include "identity/secrets.h"
#include "identity/text_value.h"
#include "store/identity_store.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// A name of the API's: what `[A-Za-z0-9._-]{1,128}` allows. Neither it nor
// a project's name (worker/settings.h parse_name) holds a ':', so "P:NAME"
// is always one project's.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

json secret_json(const store::SecretRow& s, const std::string& name) {
  return {{"name", name},
          {"backend", s.backend},
          {"state", std::string(store::to_string(s.state))},
          {"version", s.current_version},
          {"updated_at", s.updated_at}};
}

}  // namespace

void Api::route_secrets(const Caller& caller, const Target& t, const Request& request,
                        Responder& responder) {
  const auto& seg = t.segments;
  const http::verb method = request.method();
  if (options_.state_dir.empty())
    return fail(responder, 503, "", "secrets: this server was started without a state dir");
  const std::string prefix = caller.project + ":";
  const std::string by =
      "token " + (caller.token_name.empty() ? caller.token_id
                                            : caller.token_name + " (" + caller.token_id + ")");
  identity::Secrets secrets(store_, identity::SecretsOptions{options_.state_dir, nullptr, by});

  if (seg.size() == 2) {
    if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
    auto all = secrets.list();
    if (!all) return fail(responder, 500, "", all.error().to_string());
    // The caller's own, by the name it knows them by.
    json list = json::array();
    for (const auto& s : *all) {
      if (s.name.starts_with(prefix)) list.push_back(secret_json(s, s.name.substr(prefix.size())));
    }
    return answer(responder, 200, {{"secrets", list}});
  }
  if (seg.size() != 3) return fail(responder, 404, "", "no such route");
  const std::string& name = seg[2];
  if (!valid_name(name)) {
    return fail(responder, 400, "name",
                "a secret's name is 1 to 128 of A-Z a-z 0-9 . _ - (got " +
                    json(name.substr(0, 64)).dump() + ")");
  }
  auto found = store::IdentityStore(store_).secret(prefix + name);
  if (!found) return fail(responder, 500, "", found.error().to_string());

  if (method == http::verb::put) {
    // The body holds the value: never echoed, whatever is wrong with it.
    const json body = json::parse(request.body(), nullptr, false);
    if (!body.is_object()) return fail(responder, 400, "body", "expected a JSON object");
    const auto value = body.find("value");
    if (value == body.end() || !value->is_string())
      return fail(responder, 400, "value", "expected the secret's value as a string");
    const std::string& text = value->get_ref<const std::string&>();
    if (text.empty()) return fail(responder, 400, "value", "the value is empty");
    if (text.size() > identity::kMaxSecretBytes) {
      return fail(responder, 400, "value",
                  "the value is over " + std::to_string(identity::kMaxSecretBytes) + " bytes");
    }
    // A NUL can come in as \u0000: refused as secrets.set would (a sandbox
    // could not be given it unaltered), as the caller's mistake.
    if (!identity::is_text_value(text)) {
      return fail(responder, 400, "value", "the value is not UTF-8 text or holds a NUL byte");
    }
    identity::NewSecret s{prefix + name, identity::SecretValue(text), "builtin", std::nullopt};
    auto version = secrets.set(s);
    if (!version) return fail(responder, 500, "", version.error().to_string());
    return answer(responder, *found ? 200 : 201, {{"name", name}, {"version", *version}});
  }
  if (method == http::verb::delete_) {
    if (!*found) return fail(responder, 404, "name", "no secret " + name);
    const bool hard = t.query.count("hard") && t.query.at("hard") == "true";
    if (auto s = secrets.revoke(prefix + name, hard); !s)
      return fail(responder, 409, "", s.error().to_string());
    return answer(responder, 200, {{"name", name}, {"state", hard ? "hard_revoked" : "revoked"}});
  }
  if (method == http::verb::get) {
    if (!*found) return fail(responder, 404, "name", "no secret " + name);
    return answer(responder, 200, secret_json(**found, name));
  }
  return fail(responder, 405, "", "allowed: GET, PUT, DELETE");
}

}  // namespace rf::api
