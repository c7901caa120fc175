// write_tar: POSIX ustar, written by hand. libarchive's writer links in every
// archive format (and libxml2 and ICU with them) for the few files the docker
// backend uploads.
#include <cstdio>
#include <cstring>
#include <optional>

#include "docker_api/tar_archive.h"

namespace rf::docker {
namespace {

constexpr size_t kBlock = 512;

// The ustar header, at its POSIX offsets.
struct Header {
  char name[100];
  char mode[8];
  char uid[8];
  char gid[8];
  char size[12];
  char mtime[12];
  char checksum[8];
  char typeflag;
  char linkname[100];
  char magic[6];
  char version[2];
  char uname[32];
  char gname[32];
  char devmajor[8];
  char devminor[8];
  char prefix[155];
  char pad[12];
};
static_assert(sizeof(Header) == kBlock);

// `value` in octal, zero-padded, NUL-terminated, in a field of N bytes; false
// when it does not fit in N - 1 digits.
template <size_t N>
bool octal(char (&field)[N], uint64_t value) {
  char digits[N + 1];
  const int n = std::snprintf(digits, sizeof digits, "%0*llo", static_cast<int>(N - 1),
                              static_cast<unsigned long long>(value));
  if (n != static_cast<int>(N - 1)) return false;
  std::memcpy(field, digits, N);  // the digits and their NUL
  return true;
}

// Where to cut a long path into prefix "/" name: the last "/" that leaves at
// most 155 bytes before and 1 to 100 after it.
std::optional<size_t> split_at(const std::string& path) {
  for (size_t i = std::min(path.size() - 1, sizeof(Header::prefix)); i > 0; --i) {
    if (path[i] != '/') continue;
    const size_t rest = path.size() - i - 1;
    if (rest == 0) continue;  // a directory's trailing "/"
    if (rest > sizeof(Header::name)) return std::nullopt;
    return i;
  }
  return std::nullopt;
}

Result<Header> header_of(const TarEntry& e) {
  const std::string where = "tar entry \"" + e.path + "\"";
  if (e.path.empty()) return make_error("tar entry", "empty path");
  if (e.path.find('\0') != std::string::npos) return make_error(where, "NUL byte in the path");
  if (!e.directory && e.path.back() == '/')
    return make_error(where, "a regular file's path ends in \"/\"");
  Header h{};
  if (e.path.size() <= sizeof h.name) {
    std::memcpy(h.name, e.path.data(), e.path.size());
  } else {
    const auto cut = split_at(e.path);
    if (!cut) return make_error(where, "path too long for a ustar header");
    std::memcpy(h.prefix, e.path.data(), *cut);
    std::memcpy(h.name, e.path.data() + *cut + 1, e.path.size() - *cut - 1);
  }
  if (!octal(h.mode, e.mode & 07777)) return make_error(where, "mode");
  if (!octal(h.uid, e.uid)) return make_error(where, "uid above 07777777");
  if (!octal(h.gid, e.gid)) return make_error(where, "gid above 07777777");
  const bool link = !e.symlink.empty();
  if (link && (e.directory || !e.content.empty()))
    return make_error(where, "a symbolic link has no content");
  if (e.symlink.size() > sizeof h.linkname)
    return make_error(where, "link target longer than 100 bytes");
  if (!octal(h.size, e.directory || link ? 0 : e.content.size()))
    return make_error(where, "8 GiB or more of content");
  octal(h.mtime, 0);
  h.typeflag = e.directory ? '5' : link ? '2' : '0';
  std::memcpy(h.linkname, e.symlink.data(), e.symlink.size());
  std::memcpy(h.magic, "ustar", 6);  // with its NUL
  std::memcpy(h.version, "00", 2);
  octal(h.devmajor, 0);
  octal(h.devminor, 0);
  // The checksum: the sum of the header's bytes, its own field counted as spaces.
  std::memset(h.checksum, ' ', sizeof h.checksum);
  unsigned sum = 0;
  for (const unsigned char c : std::string_view(reinterpret_cast<const char*>(&h), sizeof h))
    sum += c;
  std::snprintf(h.checksum, sizeof h.checksum, "%06o", sum);  // six digits, then NUL
  h.checksum[7] = ' ';
  return h;
}

}  // namespace

Result<std::string> write_tar(const std::vector<TarEntry>& entries) {
  std::string out;
  for (const TarEntry& e : entries) {
    auto h = header_of(e);
    if (!h) return h.take_error();
    out.append(reinterpret_cast<const char*>(&*h), sizeof *h);
    if (e.directory || !e.symlink.empty()) continue;
    out += e.content;
    out.append((kBlock - e.content.size() % kBlock) % kBlock, '\0');
  }
  out.append(2 * kBlock, '\0');  // the end of the archive
  return out;
}

}  // namespace rf::docker
