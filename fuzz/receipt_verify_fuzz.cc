// A receipt file is anyone's (`audit verify --receipt FILE`): its JSON, the
// envelopes, the checkpoint note and the log entries inside it are parsed and
// checked without crashing, and nothing but a real signature verifies.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proof/checkpoint.h"
#include "proof/signing_key.h"
#include "proof/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rf::proof::SigningKey key = rf::proof::SigningKey::generate();
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)rf::proof::verify_checkpoint(text, key.public_key());
  (void)rf::proof::parse_public_key_pem(text);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) {
    auto v = rf::proof::verify_bundle(j, key.public_key());
    if (v.ok()) __builtin_trap();  // nothing the fuzzer makes is signed by this key
  }
  return 0;
}
