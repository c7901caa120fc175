#include "cli/name_services.h"

#include <nss.h>

namespace rf::cli {

void use_builtin_name_services() {
  static constexpr const char* kDatabases[][2] = {
      {"passwd", "files"},    {"group", "files"},    {"shadow", "files"},
      {"hosts", "files dns"}, {"networks", "files"}, {"services", "files"},
      {"protocols", "files"}, {"ethers", "files"},   {"rpc", "files"},
  };
  // Fails only for an unknown database name or no memory; a lookup then
  // falls back to nsswitch.conf, as in a dynamic build.
  for (const auto& [database, services] : kDatabases)
    (void)__nss_configure_lookup(database, services);
}

}  // namespace rf::cli
