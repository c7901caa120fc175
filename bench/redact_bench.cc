// rf_redact_bench: throughput of the streaming redactor (issue 11) with 0, 10
// and 100 secrets injected (each ~40 random bytes, ~10 forms each), on text
// with no match and with a match every ~64 KiB, fed in 4 KiB and 64 KiB
// chunks. The bar: >= 500 MB/s per core with 100 secrets. Peers in the same
// run, on the same bytes: memcpy (the floor of any pass that copies), and
// GNU grep -F -c with every pattern (a well-tuned multi-pattern matcher).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "redact/patterns.h"
#include "redact/stream_redactor.h"

using namespace rf::redact;
using Clock = std::chrono::steady_clock;

namespace {

std::string random_text(std::mt19937_64& rng, size_t n) {
  // Log-like text: words, digits, punctuation, newlines.
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz  eeeeaaattt0123456789.,:;-_/=\n";
  std::string s(n, ' ');
  for (auto& c : s) c = chars[rng() % (sizeof chars - 1)];
  return s;
}

constexpr std::string_view kTokenChars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
// An AWS secret access key's: '/' and '+' give it URL and JSON forms of
// their own (redact/forms.h).
constexpr std::string_view kAwsChars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+";

std::vector<SecretToRedact> secrets_of(std::mt19937_64& rng, int n,
                                       std::string_view chars = kTokenChars) {
  std::vector<SecretToRedact> out;
  for (int i = 0; i < n; ++i) {
    std::string v = "sk-";
    for (int k = 0; k < 37; ++k) v.push_back(chars[rng() % chars.size()]);
    out.push_back({"KEY_" + std::to_string(i), v});
  }
  return out;
}

double mb_per_s(size_t bytes, Clock::duration d) {
  return static_cast<double>(bytes) / 1e6 / std::chrono::duration<double>(d).count();
}

double redact_rate(const std::shared_ptr<const Patterns>& p, const std::string& text, size_t chunk,
                   int rounds, size_t* redacted) {
  size_t out_bytes = 0;
  const auto t0 = Clock::now();
  for (int r = 0; r < rounds; ++r) {
    StreamRedactor s(p);
    for (size_t at = 0; at < text.size(); at += chunk) {
      out_bytes += s.feed(std::string_view(text).substr(at, chunk)).size();
    }
    out_bytes += s.finish().size();
    *redacted = 0;
    for (const auto& [_, n] : s.counts()) *redacted += n;
  }
  const auto d = Clock::now() - t0;
  if (out_bytes == 0) std::abort();
  return mb_per_s(text.size() * static_cast<size_t>(rounds), d);
}

// grep -F -c -f patterns file: its wall time for the same bytes.
double grep_rate(const std::shared_ptr<const Patterns>& p, const std::string& text) {
  const std::string dir = "/tmp/rf-redact-bench-" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  {
    std::ofstream pat(dir + "/patterns");
    for (const auto& x : p->patterns()) pat << x.bytes << "\n";
    std::ofstream(dir + "/text", std::ios::binary) << text;
  }
  const auto t0 = Clock::now();
  const std::string cmd = "LC_ALL=C grep -F -c -f " + dir + "/patterns " + dir + "/text >/dev/null";
  if (std::system(cmd.c_str()) < 0) return 0;
  const auto d = Clock::now() - t0;
  if (std::system(("rm -rf " + dir).c_str()) != 0) std::perror("rm");
  return mb_per_s(text.size(), d);
}

}  // namespace

int main() {
  std::mt19937_64 rng(11);
  const size_t size = 64 << 20;  // 64 MiB per pass
  const std::string clean = random_text(rng, size);
  std::printf("rf_redact_bench: %zu MiB of text per pass, one core\n", size >> 20);
  {
    std::string copy(size, '\0');
    const auto t0 = Clock::now();
    for (int r = 0; r < 4; ++r) {
      std::memcpy(copy.data(), clean.data(), size);
      asm volatile("" : : "r"(copy.data()) : "memory");
    }
    std::printf("%-58s %8.0f MB/s\n", "peer: memcpy of the same bytes",
                mb_per_s(size * 4, Clock::now() - t0));
  }
  for (int n : {0, 10, 100}) {
    auto secrets = secrets_of(rng, n);
    auto p = compile_patterns(secrets);
    // The same text with a secret (in some form) every ~64 KiB.
    std::string dirty = clean;
    for (size_t at = 1000; n > 0 && at + 200 < dirty.size(); at += 65536) {
      const auto& pat = p->patterns()[rng() % p->patterns().size()].bytes;
      dirty.replace(at, pat.size(), pat);
    }
    for (size_t chunk : {size_t{4096}, size_t{65536}}) {
      size_t redacted = 0;
      char label[96];
      std::snprintf(label, sizeof label, "%3d secrets (%4zu patterns), %2zu KiB chunks, no match",
                    n, p->patterns().size(), chunk / 1024);
      std::printf("%-58s %8.0f MB/s\n", label, redact_rate(p, clean, chunk, 3, &redacted));
      if (n > 0) {
        std::snprintf(label, sizeof label, "%3d secrets, %2zu KiB chunks, a match per 64 KiB", n,
                      chunk / 1024);
        const double rate = redact_rate(p, dirty, chunk, 3, &redacted);
        std::printf("%-58s %8.0f MB/s  (%zu redacted)\n", label, rate, redacted);
      }
    }
    if (n > 0) {
      char label[96];
      std::snprintf(label, sizeof label, "peer: grep -F -c, the same %zu patterns, no match",
                    p->patterns().size());
      std::printf("%-58s %8.0f MB/s\n", label, grep_rate(p, clean));
    }
  }
  {
    auto p = compile_patterns(secrets_of(rng, 100, kAwsChars));
    for (size_t chunk : {size_t{4096}, size_t{65536}}) {
      size_t redacted = 0;
      char label[96];
      std::snprintf(label, sizeof label, "100 AWS-style secrets (%4zu patterns), %2zu KiB chunks",
                    p->patterns().size(), chunk / 1024);
      std::printf("%-58s %8.0f MB/s\n", label, redact_rate(p, clean, chunk, 3, &redacted));
    }
  }
  return 0;
}
