// The MCP server (issue 14): the same sandboxes as the HTTP API, as MCP tools,
// for agents. JSON-RPC messages in, answers out; the transports are stdio
// (`ringfence mcp`, api/mcp_stdio.h) and Streamable HTTP (`POST /mcp` of
// `ringfence serve`, api/api.cc).
//
// Two protocol eras at once, told apart per message:
// - 2026-07-28 (stateless): no initialize; each request names its version in
//   params._meta["io.modelcontextprotocol/protocolVersion"] (and, over HTTP,
//   the MCP-Protocol-Version header); `server/discover` says what we serve;
//   results carry resultType "complete" and our serverInfo in _meta.
// - 2025-11-25 (and 2025-06-18, 2025-03-26): `initialize` first, then plain
//   requests. Served statelessly too: no session id is needed or issued.
//
// Every string a client sends is checked for its type: a mistyped field is an
// answer naming it, never an exception.
//
// Tools: sandbox_create, sandbox_exec, sandbox_destroy, sandbox_file_read,
// sandbox_file_write, sandbox_file_list, run_code. A tool that fails answers
// a result with isError and a sentence saying what and where; a call to an
// unknown tool or with arguments that are not an object is a JSON-RPC error.
// There are no approval tools: approving a credential is for humans.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/sandbox_service.h"

namespace rf::api {

inline constexpr const char* kMcpModernVersion = "2026-07-28";

class McpServer {
 public:
  // `actor`: who the sandboxes' audit events name ("mcp" on stdio; serve
  // passes each request's token). `local`: the local user's own server
  // (`ringfence mcp` on stdio), where sandbox_create may name its sandbox;
  // a tenant's (serve) never may: an id of its choosing would tell it which
  // ids other projects use.
  explicit McpServer(SandboxService& sandboxes, std::string actor = "mcp", bool local = false)
      : sandboxes_(sandboxes), actor_(std::move(actor)), local_(local) {}

  // One message from a client acting for `project`. The answer, or nullopt
  // for a notification (or a response, which this server never asked for).
  // `header_version`: the MCP-Protocol-Version header over HTTP, else empty.
  // `client_gone`, when given, says whether the client has left: a tool's
  // command is then killed (api/sandbox_service.h, exec).
  std::optional<nlohmann::json> handle(const std::string& project, const nlohmann::json& message,
                                       std::string_view header_version = {},
                                       const std::function<bool()>& client_gone = {},
                                       const std::string& actor = "");

  // The tools, as tools/list answers them.
  static nlohmann::json tool_list(bool local = false);

 private:
  nlohmann::json call_tool(const std::string& project, const std::string& name,
                           const nlohmann::json& args, const std::function<bool()>& client_gone,
                           const std::string& actor);
  // sandbox_process_* (sandbox/process_request.h).
  nlohmann::json process_tool(const std::string& project, const std::string& name,
                              const nlohmann::json& args);
  // sandbox_file_watch: the changes under a directory within a wait.
  nlohmann::json watch_tool(const std::string& project, const nlohmann::json& args,
                            const std::function<bool()>& client_gone);

  SandboxService& sandboxes_;
  std::string actor_;
  bool local_ = false;
};

}  // namespace rf::api
