// rf-seccomp-gen OUTPUT.cc: compiles the default seccomp profile with
// libseccomp (seccomp_compiler.cc) and writes both BPF programs as the C++
// arrays of seccomp_prebuilt.h. Runs at build time; a failure fails the build.
#include <seccomp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "host/seccomp_profile.h"

namespace {

std::string array(const char* name, const std::vector<sock_filter>& prog) {
  std::string out = "const sock_filter " + std::string(name) + "[] = {\n";
  char line[64];
  for (const sock_filter& f : prog) {
    std::snprintf(line, sizeof line, "    {0x%04x, %u, %u, 0x%08xu},\n", f.code, f.jt, f.jf, f.k);
    out += line;
  }
  out +=
      "};\nconst size_t " + std::string(name) + "Length = " + std::to_string(prog.size()) + ";\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: rf-seccomp-gen OUTPUT.cc\n");
    return 2;
  }
  auto filters = rf::host::compile_seccomp_profile("default");
  if (!filters) {
    std::fprintf(stderr, "rf-seccomp-gen: %s\n", filters.error().to_string().c_str());
    return 1;
  }
  const scmp_version* v = seccomp_version();
  std::string text =
      "// Generated at build time by rf-seccomp-gen (src/host/seccomp_gen.cc): the rules\n"
      "// of src/host/seccomp_compiler.cc compiled by libseccomp " +
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->micro) +
      ". Do not edit.\n"
      "#include \"host/seccomp_prebuilt.h\"\n\n"
      "namespace rf::host::prebuilt {\n\n" +
      array("kDefaultAllowlist", filters->allowlist) + "\n" +
      array("kDefaultArgRules", filters->arg_rules) + "\n}  // namespace rf::host::prebuilt\n";
  // Written beside, then renamed: an interrupted build leaves no half file.
  const std::string out = argv[1];
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.flush()) {
      std::fprintf(stderr, "rf-seccomp-gen: cannot write %s\n", tmp.c_str());
      return 1;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) {
    std::fprintf(stderr, "rf-seccomp-gen: rename %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  return 0;
}
