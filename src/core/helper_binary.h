// Finding one of ringfence's own helper programs (the tool runner, the Docker
// TLS relay): an environment variable names it, else it sits next to the
// running binary, else in /usr/libexec/ringfence.
#pragma once

#include <string>

#include "core/result.h"

namespace rf {

Result<std::string> find_helper_binary(const std::string& name, const char* env_var);

}  // namespace rf
