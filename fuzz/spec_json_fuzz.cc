// libFuzzer target: SandboxSpec JSON parsing and validation never crash, and a
// spec that parses and validates survives a round trip through spec_to_json.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sandbox/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = rf::parse_spec_json(text);
  if (!spec.ok()) return 0;
  spec->workspace_dir.clear();  // validation stats host paths; keep the fuzzer hermetic
  if (!rf::validate_spec(*spec).ok()) return 0;
  auto again = rf::parse_spec_json(rf::spec_to_json(*spec));
  if (!again.ok() || !rf::validate_spec(*again).ok()) std::abort();
  return 0;
}
