#include "api/port_tokens.h"

#include <sodium.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/json_input.h"
#include "identity/key_file.h"

namespace rf::api {
namespace {

std::string b64url(std::string_view bytes) {
  std::string out(sodium_base64_encoded_len(bytes.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING),
                  '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(std::strlen(out.c_str()));
  return out;
}

std::optional<std::string> unb64url(std::string_view text) {
  std::string out(text.size(), '\0');
  size_t len = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), nullptr, &len, nullptr,
                        sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0)
    return std::nullopt;
  out.resize(len);
  return out;
}

}  // namespace

PortTokens::~PortTokens() { sodium_memzero(key_, sizeof key_); }

Result<std::unique_ptr<PortTokens>> PortTokens::open(const std::string& state_dir) {
  if (sodium_init() < 0) return make_error("port tokens", "libsodium did not start");
  auto sealing = identity::load_or_create_key(state_dir + "/secrets.key");
  if (!sealing) return sealing.take_error();
  std::unique_ptr<PortTokens> t(new PortTokens());
  const std::string_view master = sealing->key.reveal();
  if (master.size() != crypto_kdf_KEYBYTES)
    return make_error("port tokens", "a key of the wrong size");
  crypto_kdf_derive_from_key(t->key_, sizeof t->key_, 1, "rfports",
                             reinterpret_cast<const unsigned char*>(master.data()));
  return t;
}

std::string PortTokens::cookie_name(const std::string& sandbox, int port) {
  std::string name = "rf_port_" + sandbox + "_" + std::to_string(port);
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

std::string PortTokens::make(const std::string& project, const std::string& sandbox, int port,
                             int64_t expires_ms) const {
  const std::string payload =
      b64url(nlohmann::json{{"p", project}, {"s", sandbox}, {"o", port}, {"e", expires_ms}}.dump());
  unsigned char mac[crypto_auth_BYTES];
  crypto_auth(mac, reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), key_);
  return "rfp1." + payload + "." +
         b64url(std::string_view(reinterpret_cast<char*>(mac), sizeof mac));
}

Result<std::string> PortTokens::check(const std::string& token, const std::string& sandbox,
                                      int port, int64_t now_ms) const {
  auto refused = [](const std::string& why) { return make_error("rf_port_token", why); };
  if (token.rfind("rfp1.", 0) != 0) return refused("not a port token");
  const size_t dot = token.find('.', 5);
  if (dot == std::string::npos) return refused("not a port token");
  const std::string payload = token.substr(5, dot - 5);
  auto mac = unb64url(std::string_view(token).substr(dot + 1));
  if (!mac || mac->size() != crypto_auth_BYTES ||
      crypto_auth_verify(reinterpret_cast<const unsigned char*>(mac->data()),
                         reinterpret_cast<const unsigned char*>(payload.data()), payload.size(),
                         key_) != 0) {
    return refused("not a token this server made");
  }
  auto text = unb64url(payload);
  const nlohmann::json j = text ? parse_json_or_discarded(*text) : nlohmann::json();
  if (!j.is_object() || !j.contains("p") || !j["p"].is_string() || !j.contains("s") ||
      !j["s"].is_string() || !j.contains("o") || !j["o"].is_number_integer() || !j.contains("e") ||
      !j["e"].is_number_integer())
    return refused("not a port token");
  if (j["s"] != sandbox || j["o"].get<int>() != port)
    return refused("a token for another sandbox or port");
  if (j["e"].get<int64_t>() <= now_ms) return refused("expired");
  return j["p"].get<std::string>();
}

}  // namespace rf::api
