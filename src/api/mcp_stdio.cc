#include "api/mcp_stdio.h"

#include <unistd.h>

#include <cerrno>
#include <list>
#include <mutex>
#include <thread>

#include "core/io.h"
#include "core/json_input.h"

namespace rf::api {

int serve_mcp_stdio(McpServer& server, const std::string& project, int in_fd, int out_fd) {
  std::mutex out_mu;
  auto write_line = [&](const nlohmann::json& j) {
    const std::string line =
        j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::lock_guard lock(out_mu);
    (void)write_all(out_fd, line);
  };
  std::list<std::thread> threads;
  auto handle = [&](std::string line) {
    auto message = parse_json(line, "message");
    if (!message) {
      write_line(
          {{"jsonrpc", "2.0"},
           {"id", nullptr},
           {"error", {{"code", -32700}, {"message", "Parse error: " + message.error().message}}}});
      return;
    }
    // A thread's exception would end the process, and every sandbox with it.
    try {
      if (auto reply = server.handle(project, *message)) write_line(*reply);
    } catch (const std::exception& e) {
      write_line(
          {{"jsonrpc", "2.0"},
           {"id", message->is_object() && message->contains("id") ? (*message)["id"]
                                                                  : nlohmann::json(nullptr)},
           {"error", {{"code", -32603}, {"message", std::string("Internal error: ") + e.what()}}}});
    }
  };

  std::string pending;
  char buf[65536];
  bool skipping = false;  // inside a line over the limit
  while (true) {
    const ssize_t n = ::read(in_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = pending.find('\n', start)) != std::string::npos) {
      std::string line = pending.substr(start, nl - start);
      start = nl + 1;
      if (skipping) {
        skipping = false;
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      threads.emplace_back(handle, std::move(line));
    }
    pending.erase(0, start);
    if (pending.size() > kMcpMaxLine) {
      write_line({{"jsonrpc", "2.0"},
                  {"id", nullptr},
                  {"error", {{"code", -32600}, {"message", "a message is over 64 MiB"}}}});
      pending.clear();
      skipping = true;
    }
    // Join the finished ones now and then; the rest at EOF.
    if (threads.size() > 64) {
      for (auto& t : threads) t.join();
      threads.clear();
    }
  }
  for (auto& t : threads) t.join();
  return 0;
}

}  // namespace rf::api
