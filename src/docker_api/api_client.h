// The Docker Engine HTTP API client: HTTP/1.1 over a Connection (Boost.Beast
// serialises requests and parses responses), keep-alive connections reused
// from a small pool, and API version negotiation at connect (GET /version:
// the highest version both sides speak, at most kMaxApiVersion). Thread-safe.
//
// Errors name the request and carry the daemon's own message:
//   docker POST /containers/create: 404 No such image: rf-test/none:1
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "docker_api/connection.h"
#include "docker_api/docker_host.h"

namespace rf::docker {

// We speak 1.41 (Docker 20.10, Debian 12's docker.io) and below to 1.40.
inline constexpr std::string_view kMaxApiVersion = "1.41";
inline constexpr std::string_view kMinApiVersion = "1.40";

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;
};

struct RequestOptions {
  std::string content_type = "application/json";  // of the body, when there is one
  std::chrono::milliseconds timeout{60'000};      // the whole exchange
};

class ApiClient {
 public:
  // Connects, negotiates the API version and reads the daemon's version.
  static Result<std::unique_ptr<ApiClient>> connect(
      const DockerHost& host,
      std::chrono::milliseconds timeout = std::chrono::milliseconds{10'000});
  ~ApiClient();

  const DockerHost& host() const { return host_; }
  const std::string& api_version() const { return api_version_; }        // negotiated, "1.41"
  const std::string& server_version() const { return server_version_; }  // "20.10.24+dfsg1"
  const nlohmann::json& version_info() const { return version_; }        // GET /version as is

  // One request. `target` is the path and query without the version prefix
  // ("/containers/json?all=1"); the client adds "/v1.41". Any status is
  // returned as a response; only transport failures are errors.
  Result<HttpResponse> request(std::string_view method, std::string_view target,
                               std::string_view body = {}, const RequestOptions& options = {});

  // The same, but a status outside 2xx is an error carrying the daemon's
  // message, and the body is parsed as JSON (an empty body is null).
  Result<nlohmann::json> call(std::string_view method, std::string_view target,
                              const nlohmann::json* body = nullptr,
                              const RequestOptions& options = {});

  // For endpoints that upgrade the connection (attach): sends the request
  // with "Connection: Upgrade" / "Upgrade: tcp", reads the response head
  // (101, or 200 from old daemons) and hands over the raw stream. Never pooled.
  Result<std::unique_ptr<Connection>> hijack(std::string_view method, std::string_view target,
                                             std::string_view body = {},
                                             const RequestOptions& options = {});

  // Streams a body the daemon sends in pieces (POST /images/create progress):
  // calls `on_line` for each newline-delimited JSON object. Status as call().
  Status stream_json_lines(std::string_view method, std::string_view target,
                           const std::function<void(const nlohmann::json&)>& on_line,
                           const RequestOptions& options = {});

 private:
  explicit ApiClient(DockerHost host) : host_(std::move(host)) {}
  // A kept-alive connection (unless `fresh`), else a new one; `pooled` says which.
  Result<std::unique_ptr<Connection>> take_connection(bool fresh, bool* pooled,
                                                      std::chrono::milliseconds timeout);
  void give_back(std::unique_ptr<Connection> conn);

  DockerHost host_;
  std::string api_version_;
  std::string server_version_;
  nlohmann::json version_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // keep-alive connections, at most a few
};

// Percent-encodes a query value (filters JSON, image names).
std::string url_encode(std::string_view text);

}  // namespace rf::docker
