// Where the documents of a YAML text start (header-only: for the targets that
// link yaml-cpp), the first two at most. Not YAML::LoadAll: a stray ',' where
// a document may start makes yaml-cpp 0.7 read an empty document there and
// never go past it, and LoadAll collects them until memory runs out (a
// one-byte file took 20 GB). A second start at the first one's position
// means the first read nothing: what is there is no YAML.
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace rf {

class YamlDocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The starts of the first two documents of `text`; throws YAML::Exception
// on a syntax error, as YAML::Load does.
inline std::vector<YAML::Mark> yaml_document_starts(std::string_view text) {
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  YamlDocumentStarts starts;
  for (int i = 0; i < 2 && parser.HandleNextDocument(starts); ++i) {
  }
  return std::move(starts.marks);
}

}  // namespace rf
