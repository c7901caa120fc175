#include "core/no_core_dumps.h"

#include <sys/resource.h>

namespace rf {

Status forbid_core_dumps() {
  const rlimit none{0, 0};
  if (::setrlimit(RLIMIT_CORE, &none) != 0) return sys_error("setrlimit RLIMIT_CORE");
  return ok_status();
}

}  // namespace rf
