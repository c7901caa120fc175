// libFuzzer target for what a process in a sandbox writes to the tool
// runner's credential socket (issue 13): the request line, and the
// cred_request it becomes on the host, which the host parses again. Nothing
// may crash; an accepted line must round-trip through the frame's JSON.
//
//   make -C build-fuzz jit_request_fuzz && build-fuzz/fuzz/jit_request_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/messages.h"
#include "runner/cred_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  auto r = rf::runner::parse_cred_line(line);
  if (!r) return 0;
  r->request = 1;
  auto back = rf::proto::parse_cred_request(rf::proto::to_json(*r));
  if (!back || back->name != r->name || back->scope != r->scope || back->reason != r->reason) {
    // Bytes that are not UTF-8 become U+FFFD in the JSON: only then may they differ.
    bool ascii = true;
    for (char c : r->name + r->scope + r->reason)
      ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) __builtin_trap();
  }
  (void)rf::proto::parse_cred_answer(line);
  return 0;
}
