#include "core/labels.h"

namespace rf {
namespace {

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

Status check_part(std::string_view what, std::string_view text, std::string_view extra) {
  if (text.empty()) return make_error("", "the label's " + std::string(what) + " is empty");
  if (text.size() > 63) {
    return make_error("", "the label " + std::string(what) + " \"" +
                              std::string(text.substr(0, 20)) +
                              "...\" is longer than 63 characters");
  }
  for (char c : text) {
    if (alnum(c) || extra.find(c) != std::string_view::npos) continue;
    return make_error("", "the label " + std::string(what) + " \"" + std::string(text) +
                              "\" may hold only letters, digits and " + std::string(extra));
  }
  return ok_status();
}

}  // namespace

Status check_label(std::string_view key, std::string_view value) {
  RF_TRY(check_part("key", key, "._/-"));
  if (!alnum(key.front())) {
    return make_error(
        "", "the label key \"" + std::string(key) + "\" must start with a letter or a digit");
  }
  Status v = check_part("value", value, "._-");
  if (!v.ok()) return make_error("label " + std::string(key), v.error().message);
  return ok_status();
}

Status check_labels(const Labels& labels) {
  if (labels.size() > kMaxLabels) {
    return make_error("", std::to_string(labels.size()) + " labels: at most " +
                              std::to_string(kMaxLabels) + " are allowed");
  }
  for (const auto& [k, v] : labels) RF_TRY(check_label(k, v));
  return ok_status();
}

Result<std::pair<std::string, std::string>> parse_label(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return make_error("", "expected KEY=VALUE such as zone=eu, got \"" + std::string(text) + "\"");
  }
  std::string key(text.substr(0, eq)), value(text.substr(eq + 1));
  RF_TRY(check_label(key, value));
  return std::pair(std::move(key), std::move(value));
}

std::string labels_text(const Labels& labels) {
  if (labels.empty()) return "(none)";
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ' ';
    out += k + "=" + v;
  }
  return out;
}

std::string lacking_text(const Labels& required, const Labels& have) {
  Labels absent;
  std::string other;
  for (const auto& [k, v] : required) {
    auto it = have.find(k);
    if (it == have.end()) {
      absent.emplace(k, v);
    } else if (it->second != v) {
      other += ", has " + k + "=" + it->second + " (not " + k + "=" + v + ")";
    }
  }
  if (absent.empty()) return other.empty() ? "" : other.substr(2);
  return "lacks " + labels_text(absent) + other;
}

Labels missing_labels(const Labels& required, const Labels& have) {
  Labels out;
  for (const auto& [k, v] : required) {
    auto it = have.find(k);
    if (it == have.end() || it->second != v) out.emplace(k, v);
  }
  return out;
}

}  // namespace rf
