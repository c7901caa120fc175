// What any client of `ringfence serve` sends (issue 14): the bytes go through
// Beast's parser under the server's limits, then through what we own: the
// target's splitting and percent-decoding, the exec request's parser, and the
// MCP server's message handling (its sandboxes come from a backend that
// refuses, so tools fail cleanly instead of making sandboxes).
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/exec_json.h"
#include "api/mcp.h"
#include "api/sandbox_service.h"
#include "core/json_input.h"
#include "httpd/request_target.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static rf::api::LocalSandboxes sandboxes(
      rf::api::LocalOptions{}, [](rf::BackendKind) -> rf::Result<std::unique_ptr<rf::Backend>> {
        return rf::make_error("backend", "none in the fuzzer");
      });
  static rf::api::McpServer mcp(sandboxes);
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(1024 * 1024);
  parser.eager(true);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(bytes), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  std::string target, body;
  if (parser.is_done()) {
    auto& req = parser.get();
    target.assign(req.target().data(), req.target().size());
    body = req.body();
  } else {
    // Not a whole request: use the bytes as a target and a body anyway.
    target = bytes;
    body = bytes;
  }
  (void)rf::httpd::split_target(target);
  const auto j = rf::parse_json_or_discarded(body);
  if (!j.is_discarded()) {
    if (j.is_object()) (void)rf::api::parse_exec(j);
    auto reply = mcp.handle("fuzz", j, "");
    if (reply) (void)reply->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
