// What a Vault server answers to a KV v2 read (issue 11) is a remote peer's
// bytes: the answer's interpreter must not crash or throw on any body, must
// succeed only for a 200 with a live version, and its error texts must stay
// one printable line (they reach logs and terminals).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "vault_api/kv2_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const unsigned kStatuses[] = {200, 204, 400, 403, 404, 500, 503};
  const unsigned status = kStatuses[data[0] % 7];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  rf::vault::Kv2Failure why = rf::vault::Kv2Failure::kNone;
  auto out = rf::vault::parse_kv2_read_answer(status, body,
                                              "vault GET http://127.0.0.1/v1/s/data/p", "s", &why);
  if (out.ok()) {
    if (status != 200 || why != rf::vault::Kv2Failure::kNone) std::abort();
    return 0;
  }
  if (why == rf::vault::Kv2Failure::kNone) std::abort();
  for (unsigned char c : out.error().to_string()) {
    if (c < 0x20) std::abort();
  }
  return 0;
}
