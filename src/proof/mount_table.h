// Host side: the mount table a sandbox's self-probe read from its
// /proc/self/mountinfo, parsed in place (views into the text, which comes
// from inside the sandbox: any bytes at all are parsed without harm, a line
// of the wrong shape is skipped).
//   "36 35 98:0 /root /mnt opts opt-fields... - fstype source super-opts"
// Fields are as the kernel prints them: a space, tab, newline or backslash
// in a path is an octal escape (\040), left as it is.
#pragma once

#include <string_view>
#include <vector>

namespace rf::proof {

struct MountEntry {
  std::string_view root, mount_point, options, fstype, source, super_options;
};

std::vector<MountEntry> parse_mountinfo(std::string_view text);

}  // namespace rf::proof
