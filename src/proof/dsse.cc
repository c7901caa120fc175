#include "proof/dsse.h"

#include <nlohmann/json.hpp>

#include "core/base64.h"

namespace rf::proof {

std::string pae(std::string_view payload_type, std::string_view payload) {
  std::string out = "DSSEv1 ";
  out += std::to_string(payload_type.size());
  out += ' ';
  out += payload_type;
  out += ' ';
  out += std::to_string(payload.size());
  out += ' ';
  out += payload;
  return out;
}

Envelope sign_envelope(const SigningKey& key, std::string_view payload_type, std::string payload) {
  Envelope e;
  e.payload_type = std::string(payload_type);
  e.payload = std::move(payload);
  e.keyid = key.public_key().key_id();
  e.sig = key.sign(pae(e.payload_type, e.payload));
  return e;
}

nlohmann::json envelope_json(const Envelope& e) {
  return {
      {"payloadType", e.payload_type},
      {"payload", base64_encode(e.payload)},
      {"signatures", nlohmann::json::array({{{"keyid", e.keyid}, {"sig", base64_encode(e.sig)}}})}};
}

Result<Envelope> parse_envelope(const nlohmann::json& j, const std::string& where) {
  auto bad = [&](const std::string& what) { return make_error(where, "envelope: " + what); };
  if (!j.is_object()) return bad("not a JSON object");
  Envelope e;
  const auto type = j.find("payloadType");
  if (type == j.end() || !type->is_string()) return bad("payloadType is missing");
  e.payload_type = type->get<std::string>();
  const auto payload = j.find("payload");
  if (payload == j.end() || !payload->is_string()) return bad("payload is missing");
  auto bytes = base64_decode(payload->get<std::string>());
  if (!bytes) return bad("payload is not base64");
  e.payload = std::move(*bytes);
  const auto sigs = j.find("signatures");
  if (sigs == j.end() || !sigs->is_array() || sigs->empty()) return bad("no signatures");
  if (sigs->size() != 1) return bad("more than one signature (ringfence signs once)");
  const auto& s = (*sigs)[0];
  if (!s.is_object() || !s.contains("sig") || !s["sig"].is_string())
    return bad("signatures[0].sig is missing");
  auto sig = base64_decode(s["sig"].get<std::string>());
  if (!sig) return bad("signatures[0].sig is not base64");
  e.sig = std::move(*sig);
  if (s.contains("keyid") && s["keyid"].is_string()) e.keyid = s["keyid"].get<std::string>();
  return e;
}

Status verify_envelope(const Envelope& e, const PublicKey& key, const std::string& where) {
  if (!e.keyid.empty() && e.keyid != key.key_id()) {
    return make_error(where, "signed by another key (keyid " + e.keyid.substr(0, 16) +
                                 "..., this key is " + key.key_id().substr(0, 16) + "...)");
  }
  if (!verify_signature(key, pae(e.payload_type, e.payload), e.sig)) {
    return make_error(where, "the signature does not match its payload: the " + where +
                                 " was changed after it was signed, or another key signed it");
  }
  return ok_status();
}

Result<nlohmann::json> envelope_statement(const Envelope& e, const std::string& where) {
  if (e.payload_type != kInTotoPayloadType) {
    return make_error(
        where, "payloadType is \"" + e.payload_type + "\", not " + std::string(kInTotoPayloadType));
  }
  auto j = nlohmann::json::parse(e.payload, nullptr, false);
  if (!j.is_object()) return make_error(where, "its payload is not a JSON object");
  if (j.value("_type", "") != kStatementType)
    return make_error(where, "its payload is not an in-toto Statement v1");
  return j;
}

}  // namespace rf::proof
