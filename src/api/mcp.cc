#include "api/mcp.h"

#include <chrono>
#include <optional>
#include <set>

#include "api/exec_json.h"
#include "core/base64.h"
#include "sandbox/file_tree.h"

namespace rf::api {
namespace {

using nlohmann::json;

constexpr const char* kVersionKey = "io.modelcontextprotocol/protocolVersion";
constexpr const char* kServerInfoKey = "io.modelcontextprotocol/serverInfo";
const std::set<std::string> kLegacyVersions = {"2025-11-25", "2025-06-18", "2025-03-26"};

// JSON-RPC and MCP error codes.
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kUnsupportedVersion = -32022;

// sandbox_pause's and sandbox_resume's answer.
const json& pause_output() {
  static const json kOut = {{"type", "object"},
                            {"properties",
                             {{"sandbox_id", {{"type", "string"}}},
                              {"state", {{"type", "string"}, {"enum", {"paused", "running"}}}}}},
                            {"required", {"sandbox_id", "state"}}};
  return kOut;
}

json server_info() { return {{"name", "ringfence"}, {"version", RF_VERSION}}; }

json rpc_error(const json& id, int code, const std::string& message, json data = nullptr) {
  json e = {{"code", code}, {"message", message}};
  if (!data.is_null()) e["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", e}};
}

// A tool's answer: text for the model, the same as structured content.
json tool_result(const json& structured, const std::string& text) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})},
          {"structuredContent", structured},
          {"isError", false}};
}

json tool_error(const std::string& message) {
  return {{"content", json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
}

json schema(json properties, std::vector<std::string> required) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

const json kSandboxId = {{"type", "string"},
                         {"description", "The sandbox's id, from sandbox_create"}};
const json kPid = {{"type", "integer"},
                   {"minimum", 1},
                   {"description", "The process's pid, from sandbox_process_start"}};
// A background process as sandbox/process_request.h's process_json gives it.
const json kProcessSchema = {
    {"type", "object"},
    {"properties",
     {{"pid", {{"type", "integer"}}},
      {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}},
      {"tag", {{"type", "string"}}},
      {"state", {{"type", "string"}, {"enum", {"running", "exited", "ended"}}}},
      {"exit_code", {{"type", {"integer", "null"}}}},
      {"error", {{"type", {"string", "null"}}}},
      {"output_bytes", {{"type", "integer"}}}}},
    {"required", {"pid", "argv", "state"}}};
// A volume as the API answers it (api/sandbox_service.h).
const json kVolumeSchema = {{"type", "object"},
                            {"properties",
                             {{"name", {{"type", "string"}}},
                              {"size", {{"type", "string"}}},
                              {"size_bytes", {{"type", "integer"}}},
                              {"host", {{"type", {"string", "null"}}}}}},
                            {"required", {"name", "size_bytes"}}};
const json kPath = {
    {"type", "string"},
    {"description", "An absolute path inside the sandbox, e.g. /workspace/main.py"}};

struct Lang {
  const char* file;
  std::vector<std::string> argv;
};
const std::map<std::string, Lang> kLanguages = {
    {"python", {"/workspace/main.py", {"python3", "/workspace/main.py"}}},
    {"bash", {"/workspace/main.sh", {"bash", "/workspace/main.sh"}}},
    {"sh", {"/workspace/main.sh", {"sh", "/workspace/main.sh"}}},
    {"node", {"/workspace/main.js", {"node", "/workspace/main.js"}}},
};

// Refuses arguments the schema does not name, and checks required strings.
std::optional<std::string> check_args(const json& args, const std::set<std::string>& allowed,
                                      const std::vector<std::string>& required) {
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (!allowed.count(it.key())) return "unknown argument \"" + it.key() + "\"";
  }
  for (const auto& r : required) {
    if (!args.contains(r) || !args[r].is_string() || args[r].get<std::string>().empty()) {
      return "argument \"" + r + "\" is required (a non-empty string)";
    }
  }
  return std::nullopt;
}

std::string exec_text(const json& answer) {
  std::string text = "exit_code: " + std::to_string(answer.value("exit_code", -1));
  if (!answer["limit"].is_null())
    text += " (limit reached: " + answer["limit"].get<std::string>() + ")";
  auto stream = [&](const char* name) {
    if (answer[name].is_string()) {
      const std::string s = answer[name];
      if (!s.empty()) text += std::string("\n--- ") + name + " ---\n" + s;
    } else {
      text += std::string("\n--- ") + name + " (base64, not UTF-8) ---\n" +
              answer[std::string(name) + "_base64"].get<std::string>();
    }
  };
  stream("stdout");
  stream("stderr");
  return text;
}

}  // namespace

json McpServer::tool_list(bool local) {
  const json exec_props = {
      {"sandbox_id", kSandboxId},
      {"cmd", {{"type", "string"}, {"description", "A shell command line (run by /bin/sh -c)"}}},
      {"argv",
       {{"type", "array"},
        {"items", {{"type", "string"}}},
        {"description", "The command and its arguments, without a shell (instead of cmd)"}}},
      {"stdin", {{"type", "string"}, {"description", "Text for the command's standard input"}}},
      {"env",
       {{"type", "object"},
        {"additionalProperties", {{"type", "string"}}},
        {"description", "Variables added to the environment"}}},
      {"cwd", {{"type", "string"}, {"description", "Working directory (default /workspace)"}}},
      {"timeout",
       {{"type", {"number", "string"}},
        {"description", "Seconds, or a duration such as \"30s\" (default: the sandbox's)"}}}};
  json tools = json::array({
      {{"name", "sandbox_create"},
       {"description",
        "Create an isolated Linux sandbox (read-only root, writable /workspace, no network unless "
        "allowed, no host environment). Returns its sandbox_id; destroy it when done."},
       {"inputSchema",
        [&] {
          json create = schema(
              {{"limits",
                {{"type", "object"},
                 {"description",
                  "Bounds, e.g. {\"memory\": \"512m\", \"timeout\": \"60s\", \"pids\": 256}"}}},
               {"network",
                {{"type", "string"},
                 {"enum", {"none", "proxy"}},
                 {"description", "none (default) or proxy (only the hosts in allow)"}}},
               {"allow",
                {{"type", "array"},
                 {"items", {{"type", "string"}}},
                 {"description", "With network proxy: hosts the sandbox may reach"}}},
               {"env",
                {{"type", "object"},
                 {"additionalProperties", {{"type", "string"}}},
                 {"description", "Variables every command in the sandbox sees"}}}},
              {});
          if (!local) {  // lifetimes are serve's (sandbox/lifetime_request.h)
            create["properties"]["timeout"] = {
                {"type", {"number", "string"}},
                {"description",
                 "How long it lives: seconds or a duration such as \"30m\" (default: the "
                 "project's policy, 1h built in); it is destroyed when it runs out"}};
            create["properties"]["idle_timeout"] = {
                {"type", {"number", "string"}},
                {"description", "Destroyed after this long with no command running"}};
            create["properties"]["name"] = {
                {"type", "string"},
                {"pattern", "^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$"},
                {"description", "Unique among the project's live sandboxes"}};
            create["properties"]["metadata"] = {{"type", "object"},
                                                {"additionalProperties", {{"type", "string"}}},
                                                {"description", "String keys and values"}};
            create["properties"]["volumes"] = {
                {"type", "array"},
                {"maxItems", 8},
                {"items",
                 {{"type", "object"},
                  {"properties",
                   {{"name", {{"type", "string"}}},
                    {"path", {{"type", "string"}}},
                    {"readonly", {{"type", "boolean"}}}}},
                  {"required", {"name", "path"}},
                  {"additionalProperties", false}}},
                {"description",
                 "The project's volumes (volume_create) to mount, each at an absolute path"}};
          }
          if (local) {
            create["properties"]["id"] = {
                {"type", "string"},
                {"pattern", "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"},
                {"description", "A name of your choosing (default: generated)"}};
          }
          return create;
        }()}},
      {{"name", "sandbox_exec"},
       {"description",
        "Run a command in a sandbox and wait for it: exit code, stdout, stderr, and the limit "
        "that ended it, if any. Give cmd or argv."},
       {"inputSchema", schema(exec_props, {"sandbox_id"})}},
      {{"name", "sandbox_set_timeout"},
       {"description",
        "Give a sandbox a new lifetime from now (longer or shorter); it is destroyed when it "
        "runs out."},
       {"inputSchema", schema({{"sandbox_id", kSandboxId},
                               {"timeout",
                                {{"type", {"number", "string"}},
                                 {"description", "Seconds, or a duration such as \"30m\""}}}},
                              {"sandbox_id", "timeout"})}},
      {{"name", "sandbox_pause"},
       {"description",
        "Pause a sandbox: every process in it is frozen (no CPU; memory, processes and files "
        "kept) until sandbox_resume, or until any other tool uses it (which resumes it)."},
       {"annotations", {{"destructiveHint", false}, {"idempotentHint", true}}},
       {"inputSchema", schema({{"sandbox_id", kSandboxId}}, {"sandbox_id"})},
       {"outputSchema", pause_output()}},
      {{"name", "sandbox_resume"},
       {"description", "Resume a paused sandbox: its processes go on where they were."},
       {"annotations", {{"destructiveHint", false}, {"idempotentHint", true}}},
       {"inputSchema", schema({{"sandbox_id", kSandboxId}}, {"sandbox_id"})},
       {"outputSchema", pause_output()}},
      {{"name", "sandbox_destroy"},
       {"description", "Destroy a sandbox: every process ends and its files are gone."},
       {"inputSchema", schema({{"sandbox_id", kSandboxId}}, {"sandbox_id"})}},
      {{"name", "sandbox_file_read"},
       {"description", "Read a file from a sandbox (text, or base64 when it is not UTF-8)."},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId}, {"path", kPath}}, {"sandbox_id", "path"})}},
      {{"name", "sandbox_file_write"},
       {"description",
        "Write a file in a sandbox (under /workspace or /tmp; the root is read-only)."},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"path", kPath},
                {"content", {{"type", "string"}, {"description", "The file's contents"}}},
                {"encoding",
                 {{"type", "string"},
                  {"enum", {"utf8", "base64"}},
                  {"description", "How content is given (default utf8)"}}}},
               {"sandbox_id", "path", "content"})}},
      {{"name", "sandbox_file_list"},
       {"description",
        "List a directory in a sandbox: names (paths below it, with depth), types, sizes."},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"path", kPath},
                {"depth",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", kMaxListDepth},
                  {"description", "Levels to list (default 1: the directory itself)"}}}},
               {"sandbox_id", "path"})}},
      {{"name", "sandbox_file_stat"},
       {"description",
        "Is there a file, directory or symlink at a path: its type, size, mode, mtime."},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId}, {"path", kPath}}, {"sandbox_id", "path"})}},
      {{"name", "sandbox_file_remove"},
       {"description",
        "Remove a file, a symlink (itself, not what it names) or a directory (with everything "
        "in it when recursive) in a sandbox."},
       {"annotations", {{"destructiveHint", true}, {"idempotentHint", false}}},
       {"inputSchema",
        schema(
            {{"sandbox_id", kSandboxId},
             {"path", kPath},
             {"recursive", {{"type", "boolean"}, {"description", "A directory and its contents"}}}},
            {"sandbox_id", "path"})}},
      {{"name", "sandbox_file_mkdir"},
       {"description", "Make a directory in a sandbox (with missing parents when asked)."},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"path", kPath},
                {"parents", {{"type", "boolean"}, {"description", "Make missing parents too"}}}},
               {"sandbox_id", "path"})}},
      {{"name", "sandbox_file_move"},
       {"description", "Rename a file or directory in a sandbox."},
       {"annotations", {{"destructiveHint", true}}},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"from", kPath},
                {"to", {{"type", "string"}, {"description", "The new absolute path"}}}},
               {"sandbox_id", "from", "to"})}},
      {{"name", "sandbox_file_watch"},
       {"description",
        "Wait for changes under a directory of a sandbox (create, write, remove, rename, "
        "chmod): returns the events once something changed (and 200 ms more passed), after "
        "max_events, or after wait_ms with none."},
       {"annotations", {{"readOnlyHint", true}}},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"path", kPath},
                {"recursive", {{"type", "boolean"}, {"description", "Directories below it too"}}},
                {"wait_ms",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", 30000},
                  {"description", "How long to wait for a change (default 10000)"}}},
                {"max_events", {{"type", "integer"}, {"minimum", 1}, {"maximum", 10000}}}},
               {"sandbox_id", "path"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties",
          {{"events",
            {{"type", "array"},
             {"items",
              {{"type", "object"},
               {"properties",
                {{"type", {{"type", "string"}}},
                 {"path", {{"type", "string"}}},
                 {"dir", {{"type", "boolean"}}}}},
               {"required", {"type", "path"}}}}}},
           {"ended", {{"type", "boolean"}}},
           {"reason", {{"type", "string"}}}}},
         {"required", {"events", "ended"}}}}},
      {{"name", "volume_create"},
       {"description",
        "Make a named volume of the project: a disk of its own that outlives sandboxes; mount "
        "it with sandbox_create's volumes."},
       {"annotations", {{"destructiveHint", false}, {"idempotentHint", false}}},
       {"inputSchema",
        schema({{"name", {{"type", "string"}, {"pattern", "^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$"}}},
                {"size",
                 {{"type", "string"}, {"description", "Its size, e.g. \"1g\" (default 1g)"}}}},
               {"name"})},
       {"outputSchema", kVolumeSchema}},
      {{"name", "volume_list"},
       {"description", "The project's named volumes."},
       {"annotations", {{"readOnlyHint", true}}},
       {"inputSchema", schema(json::object(), {})},
       {"outputSchema",
        {{"type", "object"},
         {"properties", {{"volumes", {{"type", "array"}, {"items", kVolumeSchema}}}}},
         {"required", {"volumes"}}}}},
      {{"name", "volume_delete"},
       {"description", "Delete a named volume and all its data (refused while a sandbox mounts it)."},
       {"annotations", {{"destructiveHint", true}, {"idempotentHint", true}}},
       {"inputSchema", schema({{"name", {{"type", "string"}}}}, {"name"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties", {{"name", {{"type", "string"}}}, {"deleted", {{"type", "boolean"}}}}},
         {"required", {"name", "deleted"}}}}},
      {{"name", "sandbox_port_fetch"},
       {"description",
        "Send an HTTP request to a server a process listens on inside a sandbox "
        "(127.0.0.1:port there), e.g. to check a dev server; returns its status, headers and "
        "body."},
       {"annotations", {{"destructiveHint", false}, {"openWorldHint", false}}},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"port", {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}}},
                {"path", {{"type", "string"}, {"description", "The path and query (default /)"}}},
                {"method",
                 {{"type", "string"}, {"enum", {"GET", "POST", "PUT", "PATCH", "DELETE"}}}},
                {"body", {{"type", "string"}}},
                {"headers", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}},
               {"sandbox_id", "port"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties",
          {{"status", {{"type", "integer"}}},
           {"headers", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
           {"body", {{"type", {"string", "null"}}}},
           {"body_base64", {{"type", "string"}}}}},
         {"required", {"status", "headers"}}}}},
      {{"name", "sandbox_ports"},
       {"description",
        "List the TCP ports processes listen on inside a sandbox (a dev server that came up), "
        "each reachable with sandbox_port_fetch."},
       {"annotations", {{"readOnlyHint", true}, {"openWorldHint", false}}},
       {"inputSchema", schema({{"sandbox_id", kSandboxId}}, {"sandbox_id"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties",
          {{"ports",
            {{"type", "array"},
             {"items",
              {{"type", "object"},
               {"properties", {{"port", {{"type", "integer"}}}, {"address", {{"type", "string"}}}}},
               {"required", {"port", "address"}}}}}}}},
         {"required", {"ports"}}}}},
      {{"name", "sandbox_process_start"},
       {"description",
        "Start a command in the background in a sandbox: it keeps running after this call "
        "(a dev server, a watcher, a long build). Returns its pid; read its output with "
        "sandbox_process_output, end it with sandbox_process_signal."},
       {"annotations", {{"destructiveHint", false}, {"openWorldHint", false}}},
       {"inputSchema",
        [&] {
          json props = exec_props;
          props.erase("stdin");
          props.erase("timeout");
          props["tag"] = {{"type", "string"},
                          {"maxLength", 128},
                          {"description", "A label of yours to find it by"}};
          props["stdin"] = {{"type", "boolean"},
                            {"description", "Keep its stdin open for sandbox_process_input"}};
          return schema(props, {"sandbox_id"});
        }()},
       {"outputSchema", kProcessSchema}},
      {{"name", "sandbox_process_list"},
       {"description",
        "The background processes of a sandbox: pid, command, tag, state, exit code."},
       {"annotations", {{"readOnlyHint", true}}},
       {"inputSchema", schema({{"sandbox_id", kSandboxId}}, {"sandbox_id"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties", {{"processes", {{"type", "array"}, {"items", kProcessSchema}}}}},
         {"required", {"processes"}}}}},
      {{"name", "sandbox_process_output"},
       {"description",
        "A background process's output from an offset (0: all its buffer still holds); "
        "next is where to read on. Waits up to wait_ms for output when there is none yet."},
       {"annotations", {{"readOnlyHint", true}}},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"pid", kPid},
                {"from",
                 {{"type", {"integer", "string"}},
                  {"description", "A byte offset (from next), \"start\" or \"now\""}}},
                {"wait_ms", {{"type", "integer"}, {"minimum", 0}, {"maximum", 30000}}}},
               {"sandbox_id", "pid"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties",
          {{"pid", {{"type", "integer"}}},
           {"next", {{"type", "integer"}}},
           {"skipped", {{"type", "integer"}}},
           {"ended", {{"type", "boolean"}}},
           {"stdout", {{"type", {"string", "null"}}}},
           {"stderr", {{"type", {"string", "null"}}}},
           {"process", kProcessSchema}}},
         {"required", {"pid", "next", "ended", "process"}}}}},
      {{"name", "sandbox_process_input"},
       {"description",
        "Send text to a background process's stdin (started with stdin: true), and/or close it."},
       {"annotations", {{"destructiveHint", false}}},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"pid", kPid},
                {"data", {{"type", "string"}, {"description", "Text for its stdin"}}},
                {"close", {{"type", "boolean"}, {"description", "Close its stdin after"}}}},
               {"sandbox_id", "pid"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties", {{"pid", {{"type", "integer"}}}, {"written", {{"type", "integer"}}}}},
         {"required", {"pid", "written"}}}}},
      {{"name", "sandbox_process_signal"},
       {"description",
        "Send a signal to a background process (TERM asks it to stop; KILL ends it)."},
       {"annotations", {{"destructiveHint", true}, {"idempotentHint", false}}},
       {"inputSchema",
        schema({{"sandbox_id", kSandboxId},
                {"pid", kPid},
                {"signal",
                 {{"type", {"string", "integer"}},
                  {"description", "TERM, KILL, INT, HUP, ... or a number"}}}},
               {"sandbox_id", "pid", "signal"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties", {{"pid", {{"type", "integer"}}}, {"signal", {{"type", "integer"}}}}},
         {"required", {"pid", "signal"}}}}},
      {{"name", "run_code"},
       {"description",
        "Run a program once in a fresh sandbox that is destroyed afterwards: python, bash, sh "
        "or node."},
       {"inputSchema",
        schema({{"language", {{"type", "string"}, {"enum", {"python", "bash", "sh", "node"}}}},
                {"code", {{"type", "string"}, {"description", "The program's source"}}},
                {"stdin", {{"type", "string"}}},
                {"timeout", {{"type", {"number", "string"}}}}},
               {"language", "code"})}},
  });
  // Lifetimes and volumes are serve's: a local door's sandboxes live as long
  // as its process.
  if (local) {
    for (auto it = tools.begin(); it != tools.end();) {
      const std::string name = (*it)["name"];
      if (name == "sandbox_set_timeout" || name.rfind("volume_", 0) == 0) {
        it = tools.erase(it);
      } else {
        ++it;
      }
    }
  }
  return tools;
}

json McpServer::call_tool(const std::string& project, const std::string& name, const json& args,
                          const std::function<bool()>& client_gone, const std::string& actor) {
  auto failed = [](const ServiceError& e) {
    return tool_error((e.field.empty() ? "" : e.field + ": ") + e.message);
  };
  // A sandbox that is not the caller's project's answers as one that does not exist.
  auto unknown = [](const std::string& id) {
    return tool_error("no sandbox " + id + " (sandbox_create makes one)");
  };
  auto run = [&](const std::string& id, const json& exec_args) -> json {
    if (auto parsed = parse_exec(exec_args); std::holds_alternative<ServiceError>(parsed))
      return failed(std::get<ServiceError>(parsed));
    CollectSink sink;
    auto result = sandboxes_.exec(project, id, exec_args, sink, client_gone);
    if (auto* e = std::get_if<ServiceError>(&result)) {
      return e->status == 404 ? unknown(id) : failed(*e);
    }
    const json answer = exec_answer(std::get<ExecResult>(result), id, sink);
    return tool_result(answer, exec_text(answer));
  };

  if (name == "sandbox_create") {
    if (auto bad = local_ ? check_args(args, {"id", "limits", "network", "allow", "env"}, {})
                          : check_args(args,
                                       {"limits", "network", "allow", "env", "timeout",
                                        "idle_timeout", "name", "metadata", "volumes"},
                                       {})) {
      return tool_error(*bad);
    }
    auto made = sandboxes_.create(project, actor, args.dump());
    if (auto* e = std::get_if<ServiceError>(&made)) return failed(*e);
    const json& sb = std::get<json>(made);
    const std::string id = sb.value("id", "");
    json out = {{"sandbox_id", id}, {"spec", sb.value("spec", json::object())}};
    for (const char* k : {"name", "metadata", "expires_at"}) {
      if (sb.contains(k)) out[k] = sb[k];
    }
    return tool_result(out, "sandbox_id: " + id);
  }
  if (name == "sandbox_set_timeout") {
    if (auto bad = check_args(args, {"sandbox_id", "timeout"}, {"sandbox_id"}))
      return tool_error(*bad);
    if (!args.contains("timeout") || !(args["timeout"].is_number() || args["timeout"].is_string()))
      return tool_error(
          "argument \"timeout\" is required (seconds, or a duration such as \"30m\")");
    const std::string id = args["sandbox_id"];
    auto set = sandboxes_.set_timeout(project, id, {{"timeout", args["timeout"]}});
    if (auto* e = std::get_if<ServiceError>(&set)) return failed(*e);
    const auto& sb = std::get<std::optional<json>>(set);
    if (!sb) return tool_error("no sandbox " + id);
    return tool_result({{"sandbox_id", id}, {"expires_at", sb->value("expires_at", json())}},
                       "sandbox " + id + " now expires at " +
                           std::to_string(sb->value("expires_at", int64_t{0})) + " (ms)");
  }
  if (name == "sandbox_pause" || name == "sandbox_resume") {
    if (auto bad = check_args(args, {"sandbox_id"}, {"sandbox_id"})) return tool_error(*bad);
    const std::string id = args["sandbox_id"];
    auto set = sandboxes_.set_paused(project, id, name == "sandbox_pause", actor);
    if (auto* e = std::get_if<ServiceError>(&set)) return failed(*e);
    const auto& sb = std::get<std::optional<json>>(set);
    if (!sb) return unknown(id);
    const std::string state = sb->value("state", std::string("running"));
    return tool_result({{"sandbox_id", id}, {"state", state}}, "sandbox " + id + " is " + state);
  }
  if (name == "sandbox_exec") {
    if (auto bad = check_args(args, {"sandbox_id", "cmd", "argv", "stdin", "env", "cwd", "timeout"},
                              {"sandbox_id"})) {
      return tool_error(*bad);
    }
    json exec_args = args;
    exec_args.erase("sandbox_id");
    return run(args["sandbox_id"].get<std::string>(), exec_args);
  }
  if (name == "sandbox_destroy") {
    if (auto bad = check_args(args, {"sandbox_id"}, {"sandbox_id"})) return tool_error(*bad);
    const std::string id = args["sandbox_id"];
    auto gone = sandboxes_.destroy(project, id, actor);
    if (auto* e = std::get_if<ServiceError>(&gone)) return failed(*e);
    if (!std::get<bool>(gone)) return tool_error("no sandbox " + id);
    return tool_result({{"sandbox_id", id}, {"destroyed", true}}, "destroyed " + id);
  }
  if (name == "sandbox_file_remove" || name == "sandbox_file_mkdir" ||
      name == "sandbox_file_move") {
    const bool move = name == "sandbox_file_move";
    const bool remove = name == "sandbox_file_remove";
    auto bad = move ? check_args(args, {"sandbox_id", "from", "to"}, {"sandbox_id", "from", "to"})
               : remove
                   ? check_args(args, {"sandbox_id", "path", "recursive"}, {"sandbox_id", "path"})
                   : check_args(args, {"sandbox_id", "path", "parents"}, {"sandbox_id", "path"});
    if (bad) return tool_error(*bad);
    for (const char* flag : {"recursive", "parents"}) {
      if (args.contains(flag) && !args[flag].is_boolean())
        return tool_error(std::string("argument \"") + flag + "\" must be true or false");
    }
    const std::string id = args["sandbox_id"];
    const std::string path =
        move ? args["from"].get<std::string>() : args["path"].get<std::string>();
    const std::string to = move ? args["to"].get<std::string>() : "";
    using Op = SandboxService::FileOp;
    const Op op = move     ? Op::kMove
                  : remove ? (args.value("recursive", false) ? Op::kRemoveRecursive : Op::kRemove)
                           : (args.value("parents", false) ? Op::kMkdirParents : Op::kMkdir);
    auto done = sandboxes_.change_file(project, id, op, path, to);
    if (auto* e = std::get_if<ServiceError>(&done)) {
      return e->field == "id" ? unknown(id) : failed(*e);
    }
    json out = {{"sandbox_id", id}, {"path", path}};
    if (move) out["to"] = to;
    return tool_result(out, move     ? "moved " + path + " to " + to
                            : remove ? "removed " + path
                                     : "made " + path);
  }
  if (name == "sandbox_file_stat") {
    if (auto bad = check_args(args, {"sandbox_id", "path"}, {"sandbox_id", "path"})) {
      return tool_error(*bad);
    }
    const std::string id = args["sandbox_id"];
    const std::string path = args["path"];
    auto info = sandboxes_.stat(project, id, path);
    if (auto* e = std::get_if<ServiceError>(&info)) {
      return e->field == "id" ? unknown(id) : failed(*e);
    }
    const auto& f = std::get<proto::FileInfo>(info);
    return tool_result(
        {{"path", path}, {"type", f.type}, {"size", f.size}, {"mode", f.mode}, {"mtime", f.mtime}},
        path + ": " + f.type + ", " + std::to_string(f.size) + " bytes");
  }
  if (name == "sandbox_file_read" || name == "sandbox_file_list") {
    if (auto bad = name == "sandbox_file_list"
                       ? check_args(args, {"sandbox_id", "path", "depth"}, {"sandbox_id", "path"})
                       : check_args(args, {"sandbox_id", "path"}, {"sandbox_id", "path"})) {
      return tool_error(*bad);
    }
    const std::string id = args["sandbox_id"];
    const std::string path = args["path"];
    int depth = 1;
    if (args.contains("depth")) {
      if (!args["depth"].is_number_integer() || args["depth"].get<int64_t>() < 1 ||
          args["depth"].get<int64_t>() > kMaxListDepth) {
        return tool_error("argument \"depth\" must be an integer from 1 to " +
                          std::to_string(kMaxListDepth));
      }
      depth = args["depth"].get<int>();
    }
    if (name == "sandbox_file_read") {
      auto data = sandboxes_.read_file(project, id, path);
      if (auto* e = std::get_if<ServiceError>(&data)) {
        return e->field == "id" ? unknown(id) : failed(*e);
      }
      const std::string& bytes = std::get<std::string>(data);
      json out = {{"path", path}, {"size", bytes.size()}};
      put_bytes(out, "content", bytes);
      return tool_result(out, out["content"].is_string()
                                  ? out["content"].get<std::string>()
                                  : out["content_base64"].get<std::string>());
    }
    auto entries = sandboxes_.list_dir(project, id, path, depth);
    if (auto* e = std::get_if<ServiceError>(&entries)) {
      return e->field == "id" ? unknown(id) : failed(*e);
    }
    json list = json::array();
    std::string text;
    for (const auto& e : std::get<std::vector<proto::FileInfo>>(entries)) {
      list.push_back({{"name", e.name}, {"type", e.type}, {"size", e.size}});
      text += e.name + (e.type == "dir" ? "/" : "") + "\t" + std::to_string(e.size) + "\n";
    }
    return tool_result({{"path", path}, {"entries", list}}, text.empty() ? "(empty)" : text);
  }
  if (name == "sandbox_file_write") {
    if (auto bad = check_args(args, {"sandbox_id", "path", "content", "encoding"},
                              {"sandbox_id", "path"})) {
      return tool_error(*bad);
    }
    if (!args.contains("content") || !args["content"].is_string()) {
      return tool_error("argument \"content\" is required (a string)");
    }
    std::string data = args["content"];
    if (args.contains("encoding") && !args["encoding"].is_string()) {
      return tool_error("argument \"encoding\" must be a string (utf8 or base64)");
    }
    const std::string encoding = args.value("encoding", "utf8");
    if (encoding == "base64") {
      auto bytes = base64_decode(data);
      if (!bytes) return tool_error("content: not valid base64");
      data = std::move(*bytes);
    } else if (encoding != "utf8") {
      return tool_error("encoding: \"" + encoding + "\" is not utf8 or base64");
    }
    const std::string id = args["sandbox_id"];
    const std::string path = args["path"];
    auto wrote = sandboxes_.write_file(project, id, path, data, 0644);
    if (auto* e = std::get_if<ServiceError>(&wrote)) {
      return e->field == "id" ? unknown(id) : failed(*e);
    }
    return tool_result({{"path", path}, {"size", data.size()}},
                       "wrote " + std::to_string(data.size()) + " bytes to " + path);
  }
  if (name.rfind("sandbox_process_", 0) == 0) return process_tool(project, name, args);
  if (name == "sandbox_file_watch") return watch_tool(project, args, client_gone);
  if (name == "sandbox_ports") {
    const std::string id = args["sandbox_id"];
    auto found = sandboxes_.ports(project, id);
    if (auto* e = std::get_if<ServiceError>(&found)) {
      if (e->field == "id") return tool_error("no sandbox " + id + " (sandbox_create makes one)");
      return tool_error(e->message);
    }
    const json& out = std::get<json>(found);
    std::string text;
    for (const auto& p : out.value("ports", json::array())) {
      text +=
          std::to_string(p.value("port", 0)) + " on " + p.value("address", std::string()) + "\n";
    }
    return tool_result(out, text.empty() ? "nothing listens" : text);
  }
  if (name == "sandbox_port_fetch") {
    if (auto bad = check_args(args, {"sandbox_id", "port", "path", "method", "body", "headers"},
                              {"sandbox_id"}))
      return tool_error(*bad);
    if (!args.contains("port") || !args["port"].is_number_integer() ||
        args["port"].get<int64_t>() < 1 || args["port"].get<int64_t>() > 65535)
      return tool_error("argument \"port\" is required (1 to 65535)");
    for (const char* k : {"path", "method", "body"}) {
      if (args.contains(k) && !args[k].is_string())
        return tool_error(std::string("argument \"") + k + "\" must be a string");
    }
    std::string path = args.value("path", std::string("/"));
    if (path.empty() || path[0] != '/') path.insert(0, "/");
    const std::string method = args.value("method", std::string("GET"));
    if (method != "GET" && method != "POST" && method != "PUT" && method != "PATCH" &&
        method != "DELETE")
      return tool_error("argument \"method\": one of GET, POST, PUT, PATCH, DELETE");
    HeaderList headers;
    if (args.contains("headers")) {
      if (!args["headers"].is_object()) return tool_error("argument \"headers\": an object");
      for (auto it = args["headers"].begin(); it != args["headers"].end(); ++it) {
        if (!it.value().is_string()) return tool_error("argument \"headers\": strings only");
        headers.emplace_back(it.key(), it.value().get<std::string>());
      }
    }
    const std::string id = args["sandbox_id"];
    // One message carries the answer: at most 16 MiB of it.
    auto answered = fetch_port(sandboxes_, project, id, args["port"].get<int>(), method, path,
                               headers, args.value("body", std::string()), 16u << 20);
    if (auto* e = std::get_if<ServiceError>(&answered)) {
      if (e->field == "id") return tool_error("no sandbox " + id + " (sandbox_create makes one)");
      return tool_error((e->field.empty() ? "" : e->field + ": ") + e->message);
    }
    const PortAnswer& a = std::get<PortAnswer>(answered);
    json hs = json::object();
    for (const auto& [k, v] : a.headers) hs[k] = v;
    json out = {{"status", a.status}, {"headers", hs}};
    put_bytes(out, "body", a.body);
    return tool_result(out, "HTTP " + std::to_string(a.status) + "\n" +
                                (out["body"].is_string()
                                     ? out["body"].get<std::string>()
                                     : "(binary, " + std::to_string(a.body.size()) + " bytes)"));
  }
  if (name.rfind("volume_", 0) == 0 && !local_) {
    auto failed_volume = [&](const ServiceError& e) {
      return tool_error((e.field.empty() ? "" : e.field + ": ") + e.message);
    };
    if (name == "volume_list") {
      if (auto bad = check_args(args, {}, {})) return tool_error(*bad);
      auto all = sandboxes_.volumes(project);
      if (auto* e = std::get_if<ServiceError>(&all)) return failed_volume(*e);
      const json& list = std::get<json>(all);
      std::string text;
      for (const auto& v : list["volumes"])
        text += v.value("name", "") + " " + v.value("size", "") + "\n";
      return tool_result(list, text.empty() ? "no volumes" : text);
    }
    if (auto bad = name == "volume_create" ? check_args(args, {"name", "size"}, {"name"})
                                           : check_args(args, {"name"}, {"name"})) {
      return tool_error(*bad);
    }
    if (name == "volume_create") {
      auto made = sandboxes_.create_volume(project, actor, args);
      if (auto* e = std::get_if<ServiceError>(&made)) return failed_volume(*e);
      const json& v = std::get<json>(made);
      return tool_result(v, "volume " + v.value("name", "") + " (" + v.value("size", "") + ")");
    }
    if (name == "volume_delete") {
      const std::string vname = args["name"];
      auto gone = sandboxes_.delete_volume(project, vname, actor);
      if (auto* e = std::get_if<ServiceError>(&gone)) return failed_volume(*e);
      return tool_result({{"name", vname}, {"deleted", true}}, "deleted volume " + vname);
    }
  }
  if (name == "run_code") {
    if (auto bad =
            check_args(args, {"language", "code", "stdin", "timeout"}, {"language", "code"})) {
      return tool_error(*bad);
    }
    const auto lang = kLanguages.find(args["language"].get<std::string>());
    if (lang == kLanguages.end()) {
      return tool_error("language: \"" + args["language"].get<std::string>() +
                        "\" is not one of python, bash, sh, node");
    }
    auto made = sandboxes_.create(project, actor, "{}");
    if (auto* e = std::get_if<ServiceError>(&made)) return failed(*e);
    const std::string id = std::get<json>(made).value("id", "");
    json answer;
    auto wrote = sandboxes_.write_file(project, id, lang->second.file,
                                       args["code"].get<std::string>(), 0644);
    if (auto* e = std::get_if<ServiceError>(&wrote)) {
      answer = failed(*e);
    } else {
      json exec_args = {{"argv", lang->second.argv}};
      if (args.contains("stdin")) exec_args["stdin"] = args["stdin"];
      if (args.contains("timeout")) exec_args["timeout"] = args["timeout"];
      answer = run(id, exec_args);
    }
    (void)sandboxes_.destroy(project, id, actor);
    return answer;
  }
  return nullptr;  // unknown: the caller answers with a JSON-RPC error
}

std::optional<json> McpServer::handle(const std::string& project, const json& message,
                                      std::string_view header_version,
                                      const std::function<bool()>& client_gone,
                                      const std::string& actor) {
  if (!message.is_object()) {
    return rpc_error(nullptr, kInvalidRequest,
                     message.is_array() ? "batches are not supported (send one message at a time)"
                                        : "a JSON-RPC message is an object");
  }
  const json id = message.contains("id") ? message["id"] : json(nullptr);
  if (!message.contains("method")) return std::nullopt;  // a response: we never ask
  if (!message["method"].is_string() || !message.contains("jsonrpc") ||
      message["jsonrpc"] != "2.0") {
    return rpc_error(id, kInvalidRequest, "expected {\"jsonrpc\": \"2.0\", \"method\": ...}");
  }
  const std::string method = message["method"];
  const bool notification = !message.contains("id");
  if (notification) return std::nullopt;  // notifications/initialized, cancelled, ...
  const json params = message.contains("params") ? message["params"] : json::object();
  if (!params.is_object()) return rpc_error(id, kInvalidParams, "params must be an object");

  // Which era: the version in _meta (2026-07-28 on), else the HTTP header.
  std::string version;
  if (params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains(kVersionKey) && params["_meta"][kVersionKey].is_string()) {
    version = params["_meta"][kVersionKey];
  } else if (!header_version.empty()) {
    version = std::string(header_version);
  }
  const bool modern = version >= kMcpModernVersion;
  if (modern && version != kMcpModernVersion) {
    return rpc_error(id, kUnsupportedVersion, "Unsupported protocol version: " + version,
                     {{"supported", {kMcpModernVersion, "2025-11-25"}}, {"requested", version}});
  }
  auto answer = [&](json result) {
    if (modern) {
      result["resultType"] = "complete";
      result["_meta"] = {{kServerInfoKey, server_info()}};
    }
    return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
  };
  const json capabilities = {{"tools", {{"listChanged", false}}}};

  if (method == "initialize") {
    const std::string asked =
        params.contains("protocolVersion") && params["protocolVersion"].is_string()
            ? params["protocolVersion"].get<std::string>()
            : "";
    const std::string chosen = kLegacyVersions.count(asked) ? asked : "2025-11-25";
    return json{{"jsonrpc", "2.0"},
                {"id", id},
                {"result",
                 {{"protocolVersion", chosen},
                  {"capabilities", capabilities},
                  {"serverInfo", server_info()},
                  {"instructions",
                   "Sandboxes for running untrusted commands and code: sandbox_create, then "
                   "sandbox_exec and the file tools, then sandbox_destroy; or run_code once."}}}};
  }
  if (method == "server/discover") {
    return answer({{"supportedVersions", {kMcpModernVersion, "2025-11-25"}},
                   {"capabilities", capabilities},
                   {"ttlMs", 0},
                   {"cacheScope", "private"}});
  }
  if (method == "ping") return answer(json::object());
  if (method == "tools/list") {
    json result = {{"tools", tool_list(local_)}};
    if (modern) {
      result["ttlMs"] = 0;
      result["cacheScope"] = "private";
    }
    return answer(result);
  }
  if (method == "tools/call") {
    if (!params.contains("name") || !params["name"].is_string()) {
      return rpc_error(id, kInvalidParams, "tools/call needs params.name");
    }
    const json args = params.contains("arguments") ? params["arguments"] : json::object();
    if (!args.is_object()) return rpc_error(id, kInvalidParams, "arguments must be an object");
    json result =
        call_tool(project, params["name"], args, client_gone, actor.empty() ? actor_ : actor);
    if (result.is_null()) {
      return rpc_error(id, kInvalidParams,
                       "Tool " + params["name"].get<std::string>() + " not found");
    }
    return answer(std::move(result));
  }
  return rpc_error(id, kMethodNotFound, "Method not found: " + method);
}

json McpServer::process_tool(const std::string& project, const std::string& name,
                             const json& args) {
  const std::map<std::string, std::set<std::string>> kArgs = {
      {"sandbox_process_start",
       {"sandbox_id", "cmd", "argv", "env", "cwd", "tag", "stdin", "pty", "rows", "cols"}},
      {"sandbox_process_list", {"sandbox_id"}},
      {"sandbox_process_output", {"sandbox_id", "pid", "from", "wait_ms"}},
      {"sandbox_process_input", {"sandbox_id", "pid", "data", "close"}},
      {"sandbox_process_signal", {"sandbox_id", "pid", "signal"}},
  };
  auto known = kArgs.find(name);
  if (known == kArgs.end()) return tool_error("unknown tool " + name);
  if (auto bad = check_args(args, known->second, {"sandbox_id"})) return tool_error(*bad);
  const std::string id = args["sandbox_id"];
  ProcessRequest req;
  if (name != "sandbox_process_start" && name != "sandbox_process_list") {
    if (!args.contains("pid") || !args["pid"].is_number_integer() || args["pid"].get<int64_t>() < 1)
      return tool_error("argument \"pid\" is required (a process's pid)");
    req.pid = args["pid"].get<int>();
  }
  json refused;  // the tool's error when ask() answers nothing
  auto ask = [&](const ProcessRequest& r) -> std::optional<json> {
    auto answered = sandboxes_.process(project, id, r);
    if (auto* e = std::get_if<ServiceError>(&answered)) {
      refused = e->field == "id"
                    ? tool_error("no sandbox " + id + " (sandbox_create makes one)")
                    : tool_error((e->field.empty() ? "" : e->field + ": ") + e->message);
      return std::nullopt;
    }
    return std::get<json>(std::move(answered));
  };
  if (name == "sandbox_process_start") {
    json body = args;
    body.erase("sandbox_id");
    auto start = parse_process_start(body);
    if (!start) {
      return tool_error("argument \"" + start.error().where + "\": " + start.error().message);
    }
    req.op = ProcessOp::kStart;
    req.start = std::move(*start);
    auto got = ask(req);
    if (!got) return refused;
    const json& p = *got;
    return tool_result(p, "started pid " + std::to_string(p.value("pid", 0)));
  }
  if (name == "sandbox_process_list") {
    req.op = ProcessOp::kList;
    auto got = ask(req);
    if (!got) return refused;
    const json& list = *got;
    std::string text;
    for (const auto& p : list["processes"]) {
      text += std::to_string(p.value("pid", 0)) + " " + p.value("state", "") + " " +
              p["argv"].dump() + "\n";
    }
    return tool_result(list, text.empty() ? "no background processes" : text);
  }
  if (name == "sandbox_process_output") {
    req.op = ProcessOp::kOutput;
    if (args.contains("from")) {
      const json& f = args["from"];
      if (f.is_number_integer() && f.get<int64_t>() >= 0) {
        req.from = f.get<uint64_t>();
      } else if (f.is_string()) {
        auto from = parse_output_from(f.get<std::string>());
        if (!from) return tool_error("argument \"from\": " + from.error().message);
        req.from = *from;
      } else {
        return tool_error("argument \"from\": expected a byte offset, \"start\" or \"now\"");
      }
    }
    if (args.contains("wait_ms")) {
      if (!args["wait_ms"].is_number_integer() || args["wait_ms"].get<int64_t>() < 0 ||
          args["wait_ms"].get<int64_t>() > 30000)
        return tool_error("argument \"wait_ms\": expected milliseconds from 0 to 30000");
      req.wait_ms = args["wait_ms"].get<int>();
    }
    auto got = ask(req);
    if (!got) return refused;
    const json& r = *got;
    std::string text;
    for (const char* stream : {"stdout", "stderr"}) {
      if (r[stream].is_string() && !r[stream].get<std::string>().empty())
        text += std::string("--- ") + stream + " ---\n" + r[stream].get<std::string>() + "\n";
    }
    text += "next: " + std::to_string(r.value("next", uint64_t{0})) +
            (r.value("ended", false)
                 ? " (the process ended: " + r["process"].value("state", std::string()) + ")"
                 : "");
    return tool_result(r, text);
  }
  if (name == "sandbox_process_input") {
    if (args.contains("data") && !args["data"].is_string())
      return tool_error("argument \"data\": expected a string");
    if (args.contains("close") && !args["close"].is_boolean())
      return tool_error("argument \"close\": expected true or false");
    const std::string data = args.value("data", std::string());
    if (!data.empty()) {
      req.op = ProcessOp::kStdin;
      req.data = data;
      if (!ask(req)) return refused;
    }
    if (args.value("close", false)) {
      req.op = ProcessOp::kCloseStdin;
      if (!ask(req)) return refused;
    }
    return tool_result({{"pid", req.pid}, {"written", data.size()}},
                       "wrote " + std::to_string(data.size()) + " bytes");
  }
  // sandbox_process_signal
  if (!args.contains("signal")) return tool_error("argument \"signal\" is required");
  auto sig = parse_signal(args["signal"], "signal");
  if (!sig) return tool_error("argument \"signal\": " + sig.error().message);
  req.op = ProcessOp::kSignal;
  req.signal = *sig;
  if (!ask(req)) return refused;
  return tool_result({{"pid", req.pid}, {"signal", *sig}},
                     "sent signal " + std::to_string(*sig) + " to " + std::to_string(req.pid));
}

json McpServer::watch_tool(const std::string& project, const json& args,
                           const std::function<bool()>& client_gone) {
  if (auto bad = check_args(args, {"sandbox_id", "path", "recursive", "wait_ms", "max_events"},
                            {"sandbox_id", "path"})) {
    return tool_error(*bad);
  }
  if (args.contains("recursive") && !args["recursive"].is_boolean())
    return tool_error("argument \"recursive\" must be true or false");
  auto number = [&](const char* name, int64_t fallback, int64_t most) -> std::optional<int64_t> {
    if (!args.contains(name)) return fallback;
    const json& v = args[name];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > most)
      return std::nullopt;
    return v.get<int64_t>();
  };
  const auto wait_ms = number("wait_ms", 10000, 30000);
  if (!wait_ms) return tool_error("argument \"wait_ms\" must be an integer from 1 to 30000");
  const auto max_events = number("max_events", 100, 10000);
  if (!max_events) return tool_error("argument \"max_events\" must be an integer from 1 to 10000");
  const std::string id = args["sandbox_id"];
  const std::string path = args["path"];
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::milliseconds(*wait_ms);
  std::optional<Clock::time_point> settle;  // 200 ms after the first event
  json events = json::array();
  std::string reason;
  auto followed = sandboxes_.watch_dir(
      project, id, path, args.value("recursive", false),
      [&](const char* name, const json& data) {
        if (std::string_view(name) == "fs" && events.size() < static_cast<size_t>(*max_events)) {
          events.push_back(data);
          if (!settle) settle = Clock::now() + std::chrono::milliseconds(200);
        } else if (std::string_view(name) == "end") {
          reason = data.value("reason", "");
        }
      },
      [&] {
        const auto now = Clock::now();
        return now >= until || (settle && now >= *settle) ||
               events.size() >= static_cast<size_t>(*max_events) || (client_gone && client_gone());
      });
  if (auto* e = std::get_if<ServiceError>(&followed)) {
    if (e->field == "id") return tool_error("no sandbox " + id + " (sandbox_create makes one)");
    return tool_error((e->field.empty() ? "" : e->field + ": ") + e->message);
  }
  const bool ended = std::get<bool>(followed);
  json out = {{"events", events}, {"ended", ended}};
  if (ended) out["reason"] = reason;
  std::string text;
  for (const auto& e : events) {
    text += e.value("type", "") + " " + e.value("path", "") + "\n";
  }
  if (text.empty()) text = "no change under " + path;
  if (ended) text += "(the watch ended: " + reason + ")";
  return tool_result(out, text);
}

}  // namespace rf::api
