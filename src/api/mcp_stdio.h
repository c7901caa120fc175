// MCP over stdio (`ringfence mcp`): newline-delimited JSON-RPC on stdin, the
// answers on stdout, one line each. Each request runs on a thread of its own,
// so a long sandbox_exec does not hold up a ping; answers are written whole,
// one at a time. Returns at EOF on stdin, once every request has answered.
#pragma once

#include <string>

#include "api/mcp.h"

namespace rf::api {

// Lines over this are answered with an error and skipped.
inline constexpr size_t kMcpMaxLine = 64 * 1024 * 1024;

int serve_mcp_stdio(McpServer& server, const std::string& project, int in_fd, int out_fd);

}  // namespace rf::api
