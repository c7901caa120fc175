// DSSE envelopes (github.com/secure-systems-lab/dsse, v1.0): what reports and
// receipts travel in. The signature covers the pre-authentication encoding
//   PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
// (LEN in ASCII decimal), so neither the type nor the body can be swapped.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/result.h"
#include "proof/signing_key.h"

namespace rf::proof {

inline constexpr std::string_view kInTotoPayloadType = "application/vnd.in-toto+json";
inline constexpr std::string_view kStatementType = "https://in-toto.io/Statement/v1";

std::string pae(std::string_view payload_type, std::string_view payload);

struct Envelope {
  std::string payload_type;
  std::string payload;  // the bytes signed (a statement's JSON)
  std::string keyid;    // hex SHA-256 of the signer's public key
  std::string sig;      // 64 raw bytes
};

Envelope sign_envelope(const SigningKey& key, std::string_view payload_type, std::string payload);
// {"payloadType": ..., "payload": base64, "signatures": [{"keyid": ..., "sig": base64}]}
nlohmann::json envelope_json(const Envelope& e);
// `where` names the envelope in errors ("receipt").
Result<Envelope> parse_envelope(const nlohmann::json& j, const std::string& where);
// The signature is `key`'s over PAE(type, payload); the error says which part failed.
Status verify_envelope(const Envelope& e, const PublicKey& key, const std::string& where);
// The payload as JSON (a statement), or an error naming `where`.
Result<nlohmann::json> envelope_statement(const Envelope& e, const std::string& where);

}  // namespace rf::proof
