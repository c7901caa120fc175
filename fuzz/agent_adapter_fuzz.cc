// Agent adapters are data files a workflow may name by path, and an agent's
// answer is what a sandboxed program printed (issue 12): the adapter parser,
// the plan's placeholder filling, and the answer reader (json, jsonl, text).
// Invariants: no crash; a secret from identity never reaches argv, the
// result file's path, or the env a call records.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agents/adapter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // The first half is the adapter, the rest what the agent printed.
  const size_t cut = in.size() / 2;
  const std::string adapter(in.substr(0, cut)), printed(in.substr(cut));
  auto a = rf::agents::parse_adapter(adapter, "a.yaml");
  const std::string secret = "SECRET-VALUE-0123456789";
  rf::agents::AgentAdapter fallback;
  fallback.name = "f";
  for (const char* format : {"json", "jsonl", "text"}) {
    fallback.result_format = format;
    fallback.answer_pointer = std::string(format) == "text" ? "" : "/result";
    fallback.jsonl_type_pointer = "/type";
    fallback.jsonl_type_value = "done";
    (void)rf::agents::read_answer(fallback, printed);
  }
  if (!a) return 0;
  (void)rf::agents::read_answer(*a, printed);
  (void)rf::agents::model_unreachable(*a, printed);
  rf::agents::PlanInput input;
  input.prompt = printed;
  for (const auto& k : a->keys) input.identity[k] = secret;
  input.identity["SOME_KEY"] = secret;
  if (!a->endpoint_env.empty()) input.identity[a->endpoint_env] = secret;
  auto plan = rf::agents::plan_agent(*a, input);
  if (plan && printed.find(secret) == std::string::npos &&
      adapter.find(secret) == std::string::npos) {
    for (const auto& arg : plan->argv) {
      if (arg.find(secret) != std::string::npos) std::abort();  // identity reached argv
    }
    if (plan->result_file.find(secret) != std::string::npos) std::abort();
    for (const auto& [k, v] : rf::agents::env_to_record(*plan)) {
      if (v.find(secret) != std::string::npos) std::abort();  // recorded
    }
  }
  return 0;
}
