// The streaming redactor (issue 11): what a sandbox prints is untrusted. The
// input is split into up to four secrets, a text and a chunking. Invariants:
// fed in chunks, the output is the one-shot output; and between the markers
// no form of any secret is left.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "redact/patterns.h"
#include "redact/stream_redactor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t n = 1 + static_cast<uint8_t>(in[0]) % 4;
  in.remove_prefix(1);
  std::vector<rf::redact::SecretToRedact> secrets;
  for (size_t i = 0; i < n && !in.empty(); ++i) {
    const size_t len = 1 + static_cast<uint8_t>(in[0]) % 48;
    in.remove_prefix(1);
    if (in.size() < len) return 0;
    secrets.push_back({"K" + std::to_string(i), std::string(in.substr(0, len))});
    in.remove_prefix(len);
  }
  if (in.empty()) return 0;
  const uint8_t stride = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  const std::string text(in);
  auto patterns = rf::redact::compile_patterns(secrets);
  const std::string whole = rf::redact::redact_all(*patterns, text);
  rf::redact::StreamRedactor r(patterns);
  std::string chunked;
  for (size_t at = 0, k = 0; at < text.size(); ++k) {
    const size_t len = 1 + (stride * (k + 1)) % 23;
    chunked += r.feed(std::string_view(text).substr(at, len));
    at += len;
  }
  chunked += r.finish();
  if (chunked != whole) std::abort();
  // Between markers, no pattern is left whole.
  size_t from = 0;
  while (from <= whole.size()) {
    size_t marker = whole.find("[REDACTED:K", from);
    const size_t end = marker == std::string::npos ? whole.size() : marker;
    const std::string_view segment = std::string_view(whole).substr(from, end - from);
    for (const auto& p : patterns->patterns()) {
      if (segment.find(p.bytes) != std::string_view::npos) std::abort();
    }
    if (marker == std::string::npos) break;
    const size_t close = whole.find(']', marker);
    if (close == std::string::npos) break;
    from = close + 1;
  }
  return 0;
}
