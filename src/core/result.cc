#include "core/result.h"

#include <cstring>

namespace rf {

std::string Error::to_string() const {
  std::string out = where;
  auto append = [&out](const std::string& part) {
    if (part.empty()) return;
    if (!out.empty()) out += ": ";
    out += part;
  };
  append(message);
  if (sys_errno != 0) append(std::strerror(sys_errno));
  return out;
}

Error sys_error(std::string where, int err) { return Error{std::move(where), {}, err}; }

Error make_error(std::string where, std::string message) {
  return Error{std::move(where), std::move(message), 0};
}

Error make_error(ErrorCode code, std::string where, std::string message) {
  return Error{std::move(where), std::move(message), 0, code};
}

}  // namespace rf
