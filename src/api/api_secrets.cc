// The API's secrets (issue 14): a project's secrets set, listed and revoked,
// never a value returned. A token of project P sees only the secrets the
// store names "P:NAME", as NAME; identity profiles of P name them
// secret:P:NAME. Values are sealed in the store (the builtin backend);
// `secret set --backend vault` stays the CLI's. Every change is audited with
// the token that made it.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/json_answers.h"
#include "core/json_input.h"
#include "identity/secrets.h"
#include "identity/text_value.h"
#include "store/identity_store.h"

namespace rf::api {
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

namespace {

// The secrets of a project as the API names them ("P:NAME" in the store).
identity::Secrets secrets_of(store::Store& store, const std::string& state_dir,
                             const policy::Principal& who) {
  return identity::Secrets(store, identity::SecretsOptions{state_dir, nullptr, who.actor()});
}

}  // namespace

void Api::secrets_list(Ctx& c) {
  if (options_.state_dir.empty())
    return fail(c.out, 503, "", "secrets: this server was started without a state dir");
  const std::string prefix = c.who.project + ":";
  auto all = secrets_of(store_, options_.state_dir, c.who).list();
  if (!all) return fail(c.out, 500, "", all.error().to_string());
  // The caller's own, by the name it knows them by.
  json list = json::array();
  for (const auto& s : *all) {
    if (s.name.starts_with(prefix)) list.push_back(secret_json(s, s.name.substr(prefix.size())));
  }
  answer(c.out, 200, {{"secrets", list}});
}

// The secret NAME of the caller's project (nullopt inside when unknown), or
// an answer was sent (a bad name, no state dir, the store) and nullopt.
std::optional<std::optional<store::SecretRow>> Api::secret_of(Ctx& c) {
  if (options_.state_dir.empty()) {
    fail(c.out, 503, "", "secrets: this server was started without a state dir");
    return std::nullopt;
  }
  const std::string& name = c.param("name");
  if (!valid_name(name)) {
    fail(c.out, 400, "name",
         "a secret's name is 1 to 128 of A-Z a-z 0-9 . _ - (got " +
             json(name.substr(0, 64)).dump() + ")");
    return std::nullopt;
  }
  auto found = store::IdentityStore(store_).secret(c.who.project + ":" + name);
  if (!found) {
    fail(c.out, 500, "", found.error().to_string());
    return std::nullopt;
  }
  return std::move(*found);
}

void Api::secret_get(Ctx& c) {
  auto found = secret_of(c);
  if (!found) return;
  if (!*found) return fail(c.out, 404, "name", "no secret " + c.param("name"));
  answer(c.out, 200, secret_json(**found, c.param("name")));
}

void Api::secret_put(Ctx& c) {
  auto found = secret_of(c);
  if (!found) return;
  const std::string& name = c.param("name");
  // The body holds the value: never echoed, whatever is wrong with it.
  auto body = parse_json(c.request.body(), "body");
  if (!body || !body->is_object()) return fail(c.out, 400, "body", "expected a JSON object");
  if (!only_fields(*body, {"value"}, c.out)) return;
  const auto value = body->find("value");
  if (value == body->end() || !value->is_string())
    return fail(c.out, 400, "value", "expected the secret's value as a string");
  const std::string& text = value->get_ref<const std::string&>();
  if (text.empty()) return fail(c.out, 400, "value", "the value is empty");
  if (text.size() > identity::kMaxSecretBytes) {
    return fail(c.out, 400, "value",
                "the value is over " + std::to_string(identity::kMaxSecretBytes) + " bytes");
  }
  // A NUL can come in as \u0000: refused as secrets.set would (a sandbox
  // could not be given it unaltered), as the caller's mistake.
  if (!identity::is_text_value(text)) {
    return fail(c.out, 400, "value", "the value is not UTF-8 text or holds a NUL byte");
  }
  identity::NewSecret s{c.who.project + ":" + name, identity::SecretValue(text), "builtin",
                        std::nullopt};
  auto version = secrets_of(store_, options_.state_dir, c.who).set(s);
  if (!version) return fail(c.out, 500, "", version.error().to_string());
  answer(c.out, *found ? 200 : 201, {{"name", name}, {"version", *version}});
}

void Api::secret_delete(Ctx& c) {
  const auto h = c.target.query.find("hard");
  if (h != c.target.query.end() && h->second != "true" && h->second != "false") {
    return fail(c.out, 400, "hard", "expected true or false");
  }
  auto found = secret_of(c);
  if (!found) return;
  const std::string& name = c.param("name");
  if (!*found) return fail(c.out, 404, "name", "no secret " + name);
  const bool hard = h != c.target.query.end() && h->second == "true";
  if (auto s =
          secrets_of(store_, options_.state_dir, c.who).revoke(c.who.project + ":" + name, hard);
      !s) {
    return fail(c.out, 409, "", s.error().to_string());
  }
  answer(c.out, 200, {{"name", name}, {"state", hard ? "hard_revoked" : "revoked"}});
}

}  // namespace rf::api
