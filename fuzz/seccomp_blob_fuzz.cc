// The seccomp file the tool runner reads at start (proto/seccomp_blob.h):
// decoding never crashes, and what decodes encodes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "proto/seccomp_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto programs = rf::proto::decode_bpf_programs(bytes);
  if (programs && rf::proto::encode_bpf_programs(*programs) != bytes) __builtin_trap();
  return 0;
}
