// Agent adapters (issue 12): how to run a CLI coding agent headless in a
// sandbox, as a data file (agents/claude-code.yaml, agents/codex.yaml, or a
// custom one given by path). An adapter says:
//   argv        the command, headless and without prompts; {{prompt}},
//               {{home}}, {{tmp}}, {{workdir}} and {{endpoint}} are filled in
//   env         variables to set (same placeholders; {{env.NAME}} reads the
//               step's environment)
//   keys        environment keys the agent needs from identity (its API key)
//   endpoint    the variable naming where its model is, and the default
//   files       config files written under HOME before it runs
//   result      where its answer is (stdout or a file), in which format
//               (json, jsonl, text), and JSON Pointers to the answer and to
//               an error flag
//   unreachable output texts that mean its model could not be reached
//   memory_floor  the least memory its sandbox gets (>= 1 GiB)
// Parsing errors name the file, the line and the key. Pure data: nothing runs.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf::agents {

struct AdapterFile {
  std::string path;     // under HOME
  std::string content;  // a template
  uint32_t mode = 0600;
};

struct AgentAdapter {
  std::string name;
  std::string file;  // where it was read from
  std::string description;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<std::string> keys;
  std::string endpoint_env;
  std::string endpoint_default;
  std::vector<AdapterFile> files;
  std::string result_from = "stdout";  // stdout | file
  std::string result_file;             // with from: file, a template
  std::string result_format = "text";  // json | jsonl | text
  std::string answer_pointer;          // json: a JSON Pointer; jsonl: a rule (below)
  std::string error_pointer;           // json: true at this pointer means the agent failed
  // jsonl: the answer is the text of the last event whose `type_pointer`
  // equals `type_value` (codex: /item/type == agent_message, text at /item/text).
  std::string jsonl_type_pointer, jsonl_type_value;
  std::vector<std::string> unreachable;
  uint64_t memory_floor = 1ull << 30;
  std::string workdir = "/workspace";
  bool stdin_closed = true;
};

Result<AgentAdapter> parse_adapter(const std::string& text, const std::string& file);

// `name`: claude-code, codex (files in `agents_dir`), or a path to an
// adapter file (it contains a '/' or ends in .yaml/.yml).
Result<AgentAdapter> load_adapter(const std::string& name, const std::string& agents_dir);

// Where the adapters that ship with ringfence are: $RINGFENCE_AGENTS_DIR, else
// agents/ next to the binary's source tree (build/../agents), else
// /usr/share/ringfence/agents.
std::string default_agents_dir();

// What to run, for one prompt.
struct AgentPlan {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the adapter's, filled in
  std::vector<AdapterFile> files;          // paths absolute, content filled in
  std::string endpoint;                    // where its model is
  std::string result_file;                 // absolute, when the answer is in a file
  std::string home, tmp;                   // made (writable) before it runs
  // The keys of `env` whose value holds something from identity, each with
  // the identity keys it holds: such a value is given to the agent and never
  // recorded (see env_to_record).
  std::map<std::string, std::set<std::string>> env_from_identity;
};

struct PlanInput {
  std::string prompt;
  std::string home = "/tmp/rf-agent/home";
  std::string tmp = "/tmp/rf-agent";
  // The environment the agent gets from identity (values of secrets
  // included) and from the step (plain values; a key in both is the step's).
  // Both fill {{env.NAME}} and {{endpoint}}; a value from identity never
  // reaches argv, and is never recorded.
  std::map<std::string, std::string> identity;
  std::map<std::string, std::string> env;
};

// Fills in the placeholders. Refused: a key the adapter needs that neither
// map has (the error names the agent and the key), a placeholder it does not
// know, {{endpoint}} in argv or result.file when the endpoint comes from
// identity (it would be in the process's command line and the call's record).
Result<AgentPlan> plan_agent(const AgentAdapter& adapter, const PlanInput& input);

// The plan's env as a call may record it: each value that holds something
// from identity is replaced by [REDACTED:KEY,...], naming the identity keys.
std::map<std::string, std::string> env_to_record(const AgentPlan& plan);

struct AgentAnswer {
  std::string answer;
  bool is_error = false;
  std::optional<nlohmann::json> json;  // the parsed result (json), or the last event (jsonl)
};

// Reads the answer from what the agent printed (or wrote to its result file).
Result<AgentAnswer> read_answer(const AgentAdapter& adapter, const std::string& text);

// When the run failed: was its model unreachable (one of the adapter's
// `unreachable` texts in what it printed)?
bool model_unreachable(const AgentAdapter& adapter, const std::string& output);

}  // namespace rf::agents
