#include "proto/seccomp_blob.h"

#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rf::proto {
namespace {

constexpr std::string_view kMagic = "RFBPF1\n";
constexpr uint32_t kMaxPrograms = 4;

void put_le32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool read_le32(std::string_view bytes, size_t* at, uint32_t* v) {
  if (bytes.size() - *at < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) {
    *v |= uint32_t{static_cast<unsigned char>(bytes[*at + static_cast<size_t>(i)])} << (8 * i);
  }
  *at += 4;
  return true;
}

Error bad(size_t at, const std::string& what) {
  return make_error("seccomp file", what + " at byte " + std::to_string(at));
}

}  // namespace

std::string encode_bpf_programs(const std::vector<BpfProgram>& programs) {
  std::string out(kMagic);
  put_le32(&out, static_cast<uint32_t>(programs.size()));
  for (const auto& p : programs) {
    put_le32(&out, static_cast<uint32_t>(p.size()));
    out.append(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(sock_filter));
  }
  return out;
}

Result<std::vector<BpfProgram>> decode_bpf_programs(std::string_view bytes) {
  if (bytes.substr(0, kMagic.size()) != kMagic) return bad(0, "bad magic (expected RFBPF1)");
  size_t at = kMagic.size();
  uint32_t count = 0;
  if (!read_le32(bytes, &at, &count)) return bad(at, "truncated count");
  if (count < 1 || count > kMaxPrograms) {
    return bad(at - 4, "program count " + std::to_string(count) + " is not 1 to 4");
  }
  std::vector<BpfProgram> out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t n = 0;
    if (!read_le32(bytes, &at, &n))
      return bad(at, "truncated length of program " + std::to_string(i));
    if (n < 1 || n > BPF_MAXINSNS) {
      return bad(at - 4, "program " + std::to_string(i) + " has " + std::to_string(n) +
                             " instructions (1 to " + std::to_string(BPF_MAXINSNS) + ")");
    }
    const size_t len = size_t{n} * sizeof(sock_filter);
    if (bytes.size() - at < len) return bad(at, "truncated program " + std::to_string(i));
    BpfProgram p(n);
    std::memcpy(p.data(), bytes.data() + at, len);
    at += len;
    out.push_back(std::move(p));
  }
  if (at != bytes.size()) return bad(at, "trailing bytes");
  return out;
}

int install_bpf_programs(const std::vector<BpfProgram>& programs) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  for (const auto& p : programs) {
    const sock_fprog prog{static_cast<unsigned short>(p.size()),
                          const_cast<sock_filter*>(p.data())};
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return errno;
  }
  return 0;
}

}  // namespace rf::proto
