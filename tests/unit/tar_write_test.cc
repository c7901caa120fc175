// write_tar, our own ustar writer (docker_api/tar_write.cc): what it refuses,
// how it places long paths, and that other readers take its archives as
// written: libarchive (read_tar) and GNU tar.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "docker_api/tar_archive.h"

namespace rf::docker {
namespace {

unsigned header_sum(const std::string& block) {
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)block[i];
  return sum;
}

TEST(TarWrite, HeaderIsUstarWithAValidChecksum) {
  auto tar = write_tar({{"bin/tool", "abc", 0755, false, 7, 8}});
  ASSERT_TRUE(tar.ok()) << tar.error().to_string();
  ASSERT_EQ(tar->size(), 512u + 512u + 1024u);  // header, content padded, end blocks
  const std::string h = tar->substr(0, 512);
  EXPECT_EQ(h.substr(0, 9), std::string("bin/tool\0", 9));
  EXPECT_EQ(h.substr(100, 8), std::string("0000755\0", 8));
  EXPECT_EQ(h.substr(108, 8), std::string("0000007\0", 8));
  EXPECT_EQ(h.substr(116, 8), std::string("0000010\0", 8));
  EXPECT_EQ(h.substr(124, 12), std::string("00000000003\0", 12));
  EXPECT_EQ(h[156], '0');
  EXPECT_EQ(h.substr(257, 8), std::string("ustar\0"
                                          "00",
                                          8));
  EXPECT_EQ(std::strtoul(h.substr(148, 6).c_str(), nullptr, 8), header_sum(h));
  EXPECT_EQ(h.substr(154, 2), std::string("\0 ", 2));
  EXPECT_EQ(tar->substr(512, 4), std::string("abc\0", 4));
  EXPECT_EQ(tar->substr(1024), std::string(1024, '\0'));
}

TEST(TarWrite, LongPathsSplitIntoPrefixAndNameAndReadBackWhole) {
  const std::string dir = std::string(60, 'a') + "/" + std::string(60, 'b');  // 121 bytes
  const std::string file(100, 'f');
  auto tar = write_tar({{dir, "", 0755, true}, {dir + "/" + file, "x", 0644}});
  ASSERT_TRUE(tar.ok()) << tar.error().to_string();
  const std::string second = tar->substr(512, 512);
  EXPECT_EQ(second.substr(0, 100), file);
  EXPECT_EQ(second.substr(345, 122), dir + '\0');
  EXPECT_EQ(tar->substr(345, 61), std::string(60, 'a') + '\0');  // the directory: split too
  auto back = read_tar(*tar, 10);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].path, dir);
  EXPECT_TRUE((*back)[0].directory);
  EXPECT_EQ((*back)[1].path, dir + "/" + file);
  EXPECT_EQ((*back)[1].content, "x");
}

TEST(TarWrite, RefusesWhatUstarCannotHoldAndNamesTheEntry) {
  auto empty = write_tar({{"", "x", 0644}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().to_string(), "tar entry: empty path");
  auto slash = write_tar({{"a/", "x", 0644}});
  ASSERT_FALSE(slash.ok());
  EXPECT_EQ(slash.error().to_string(), "tar entry \"a/\": a regular file's path ends in \"/\"");
  const std::string no_cut(101, 'n');
  auto long_name = write_tar({{no_cut, "x", 0644}});
  ASSERT_FALSE(long_name.ok());
  EXPECT_EQ(long_name.error().to_string(),
            "tar entry \"" + no_cut + "\": path too long for a ustar header");
  auto long_tail = write_tar({{"dir/" + no_cut, "x", 0644}});
  ASSERT_FALSE(long_tail.ok());
  auto uid = write_tar({{"f", "x", 0644, false, 07777777 + 1, 0}});
  ASSERT_FALSE(uid.ok());
  EXPECT_EQ(uid.error().to_string(), "tar entry \"f\": uid above 07777777");
  auto nul = write_tar({{std::string("a\0b", 3), "x", 0644}});
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.error().to_string().find("NUL byte in the path"), std::string::npos);
}

// GNU tar lists the entries with their types, modes, owners and sizes.
TEST(TarWrite, ASymbolicLinkHasATargetAndNoContent) {
  TarEntry bad{"l", "x", 0777};
  bad.symlink = "t";
  EXPECT_EQ(write_tar({bad}).error().to_string(),
            "tar entry \"l\": a symbolic link has no content");
  TarEntry far{"l", "", 0777};
  far.symlink = std::string(101, 't');
  EXPECT_EQ(write_tar({far}).error().to_string(),
            "tar entry \"l\": link target longer than 100 bytes");
}

TEST(TarWrite, GnuTarReadsItAsWritten) {
  ASSERT_EQ(::access("/usr/bin/tar", X_OK), 0) << "tar is an essential Debian package";
  auto tar = write_tar({{"d", "", 0750, true},
                        {"d/run", std::string(1000, 'r'), 0555, false, 0, 0},
                        {"d/link", "", 0777, false, 0, 0, "run"}});
  ASSERT_TRUE(tar.ok()) << tar.error().to_string();
  char path[] = "/tmp/rf-tar-write-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, tar->data(), tar->size()), static_cast<ssize_t>(tar->size()));
  ::close(fd);
  const std::string cmd =
      std::string("/usr/bin/tar --numeric-owner -tvf ") + path + " | awk '{print $1, $2, $3, $6}'";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  EXPECT_EQ(::pclose(p), 0);
  ::unlink(path);
  EXPECT_EQ(out, "drwxr-x--- 0/0 0 d\n-r-xr-xr-x 0/0 1000 d/run\nlrwxrwxrwx 0/0 0 d/link\n");
}

}  // namespace
}  // namespace rf::docker
