// Shared by tests that run calls: an OutputSink that keeps what a call wrote,
// and reading a whole file.
#pragma once

#include <atomic>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

#include "sandbox/sandbox.h"

namespace rf::testing {

struct Captured : OutputSink {
  std::mutex mu;
  std::string out, err;
  std::atomic<uint32_t> call_id{0};
  std::atomic<int> pid{0};
  void on_started(uint32_t id, int p) override {
    call_id = id;
    pid = p;
  }
  void on_stdout(std::string_view d) override {
    std::lock_guard l(mu);
    out.append(d);
  }
  void on_stderr(std::string_view d) override {
    std::lock_guard l(mu);
    err.append(d);
  }
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace rf::testing
