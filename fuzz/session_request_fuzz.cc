// What a client sends to a sandbox's processes and volumes (issue 41): a
// request's method, its path below the sandbox, its query and its body, all
// the client's. The parsers must not crash, and every refusal must name a
// field or route with an HTTP status a door can answer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/process_request.h"
#include "sandbox/volume_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char* kMethods[] = {"GET", "POST", "DELETE", "PUT"};
  static const char* kOps[] = {"", "output", "stdin", "stdin:close", "signal", "resize", "x"};
  const std::string method = kMethods[data[0] % 4];
  const std::string body(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::vector<std::string> rest = {"processes"};
  if (data[1] & 1) rest.push_back(std::to_string(data[1]));
  if ((data[1] & 2) && rest.size() > 1) rest.push_back(kOps[(data[1] >> 2) % 7]);
  const std::map<std::string, std::string> query = {{"from", body.substr(0, 8)},
                                                    {"wait_ms", body.substr(0, 6)}};
  auto parsed = rf::parse_process_request(method, rest, query, body);
  if (auto* r = std::get_if<rf::ProcessRefusal>(&parsed)) {
    if (r->status < 400 || r->status > 499) std::abort();
  } else {
    (void)rf::process_http(std::get<rf::ProcessRequest>(parsed));
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded()) {
    (void)rf::parse_volume_create(j);
    nlohmann::json spec = j.is_object() ? j : nlohmann::json::object({{"volumes", j}});
    (void)rf::take_volumes(spec);
    (void)rf::parse_process_start(j);
  }
  return 0;
}
