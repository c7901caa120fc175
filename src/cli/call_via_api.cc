#include "cli/call_via_api.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "core/base64.h"
#include "core/io.h"
#include "http_client/event_stream.h"
#include "http_client/http_client.h"

namespace rf::cli {
namespace {

using json = nlohmann::json;

// A queued call can wait for a worker as long as it takes; the stream is
// bounded only by the longest call serve lets a project have, and a day more.
constexpr std::chrono::hours kStreamBound{48};

http::Headers headers_for(const std::string& token, const char* accept) {
  return {{"Authorization", "Bearer " + token}, {"Accept", accept}};
}

// What a refused POST means for the caller: it was never queued in every
// case, but only some are worth retrying as they are.
int refused_exit(unsigned status) {
  switch (status) {
    case 429:  // too many at once
    case 503:  // the store is unavailable to serve
      return kExitNeverQueued;
    case 400:
    case 403:
    case 404:
    case 409:
    case 413:
      return kExitUsage;
    default:
      return kExitRuntime;
  }
}

bool write_output(const json& data, int fd) {
  std::string bytes;
  if (data.contains("data") && data["data"].is_string()) {
    bytes = data["data"].get<std::string>();
  } else if (data.contains("data_base64") && data["data_base64"].is_string()) {
    auto decoded = base64_decode(data["data_base64"].get<std::string>());
    if (!decoded) return false;
    bytes = std::move(*decoded);
  } else {
    return false;
  }
  (void)write_all(fd, bytes);
  return true;
}

// The exit code of an ended call, from the stream's `end` event (a Call).
int exit_of(const json& call, int64_t id) {
  const std::string state = call.value("state", "");
  const std::string error = call.contains("error") && call["error"].is_string()
                                ? call["error"].get<std::string>()
                                : std::string();
  const std::string name = "call " + std::to_string(id);
  if (state == "done") {
    const int code = call.contains("exit_code") && call["exit_code"].is_number_integer()
                         ? call["exit_code"].get<int>()
                         : 0;
    // A command that could not start (126, 127) says why, as the store path does.
    if ((code == 126 || code == 127) && call.contains("result") && call["result"].is_object() &&
        call["result"].contains("error") && call["result"]["error"].is_string()) {
      std::fprintf(stderr, "ringfence: %s: %s\n", name.c_str(),
                   call["result"]["error"].get<std::string>().c_str());
    }
    return code;
  }
  if (state == "cancelled")
    return fail(name + " cancelled: " + error + "; it never runs", kExitWaitTimeout);
  return fail(name + " " + state + ": " + error, kExitRuntime);
}

}  // namespace

std::string api_base(std::string api) {
  while (!api.empty() && api.back() == '/') api.pop_back();
  return api;
}

std::string api_error_line(unsigned status, const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string what = "HTTP " + std::to_string(status);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) {
    what += ": " + j["error"].get<std::string>();
    if (j.contains("field") && j["field"].is_string())
      what += " (field " + j["field"].get<std::string>() + ")";
  }
  return what;
}

Result<std::string> api_token(const std::string& token_file) {
  std::string token;
  if (!token_file.empty()) {
    auto text = read_file(token_file);
    if (!text) return make_error("--token-file", text.error().to_string());
    token = text->substr(0, text->find('\n'));
    if (token.empty()) return make_error("--token-file " + token_file, "the file is empty");
  } else {
    const char* env = std::getenv("RINGFENCE_TOKEN");
    if (env == nullptr || *env == 0)
      return make_error("--api",
                        "it needs the project's token: set RINGFENCE_TOKEN, or name a "
                        "file with --token-file (`ringfence token create` makes one)");
    token = env;
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

int run_call_via_api(const ApiCall& c) {
  const std::string base = api_base(c.api);
  http::Options post_options;
  post_options.timeout = std::chrono::seconds(60);
  http::Failure failure = http::Failure::kNone;
  auto posted = http::fetch({.method = "POST",
                             .url = base + "/v1/calls",
                             .headers = headers_for(c.token, "application/json"),
                             .body = c.body.dump()},
                            post_options, &failure);
  if (!posted) {
    // No answer: refused or unreachable means never queued; a timeout after
    // the request went out may have queued it.
    const bool sent = failure == http::Failure::kTimeout || failure == http::Failure::kBadAnswer;
    return fail(posted.error().to_string() +
                    (sent ? "; the call may have been queued: its outcome is unknown here"
                          : "; the call was never queued"),
                sent ? kExitOutcomeUnknown : kExitNeverQueued);
  }
  if (posted->status != 201) {
    return fail("POST " + base + "/v1/calls: " + api_error_line(posted->status, posted->body) +
                    "; the call was never queued",
                refused_exit(posted->status));
  }
  const json made = json::parse(posted->body, nullptr, /*allow_exceptions=*/false);
  if (!made.is_object() || !made.contains("id") || !made["id"].is_number_integer())
    return fail("POST " + base + "/v1/calls: an answer without the call's id", kExitOutcomeUnknown);
  const int64_t id = made["id"].get<int64_t>();
  const std::string url = base + "/v1/calls/" + std::to_string(id);
  const std::string later = "; call " + std::to_string(id) +
                            " was queued and its outcome is unknown here (GET " + url +
                            " says how it ended)";

  http::EventStream events;
  std::optional<int> exit_code;
  std::string broken;
  http::Options stream_options;
  stream_options.timeout = kStreamBound;
  stream_options.on_body = [&](std::string_view bytes) {
    auto got = events.feed(bytes);
    if (!got) {
      broken = got.error().to_string();
      return false;
    }
    for (const http::Event& e : *got) {
      const json data = json::parse(e.data, nullptr, /*allow_exceptions=*/false);
      if (e.name == "stdout" || e.name == "stderr") {
        if (!data.is_object() ||
            !write_output(data, e.name == "stdout" ? STDOUT_FILENO : STDERR_FILENO)) {
          broken = "a " + e.name + " event without its data";
          return false;
        }
      } else if (e.name == "end") {
        if (!data.is_object()) {
          broken = "an end event that is not a call";
          return false;
        }
        exit_code = exit_of(data, id);
        return false;
      }
    }
    return true;
  };
  auto streamed = http::fetch(
      {.method = "GET", .url = url, .headers = headers_for(c.token, "text/event-stream")},
      stream_options);
  if (exit_code) return *exit_code;
  if (!streamed) return fail(streamed.error().to_string() + later, kExitOutcomeUnknown);
  if (streamed->status != 200)
    return fail("GET " + url + ": " + api_error_line(streamed->status, streamed->body) + later,
                kExitOutcomeUnknown);
  if (!broken.empty()) return fail("GET " + url + ": " + broken + later, kExitOutcomeUnknown);
  return fail("GET " + url + ": the stream ended before the call did" + later, kExitOutcomeUnknown);
}

}  // namespace rf::cli
