// The fixture of the identity end-to-end tests (issues 11 and 13): a state
// dir, real `ringfence` commands and workers, a random secret, and the forms
// of it that must never leave a sandbox.
#pragma once

#include <gtest/gtest.h>
#include <sodium.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/sha256_hex.h"
#include "worker/worker.h"

namespace rf::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A value no command line or file of the test machine holds by chance.
inline std::string random_secret() {
  unsigned char raw[18];
  randombytes_buf(raw, sizeof raw);
  char b64[64];
  sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return std::string("sk-") + b64;
}

inline std::string base64(const std::string& s, int variant) {
  std::string out(sodium_base64_ENCODED_LEN(s.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(s.data()),
                    s.size(), variant);
  out.resize(std::strlen(out.c_str()));
  return out;
}

inline std::string hex(const std::string& s) {
  std::string out(2 * s.size() + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), reinterpret_cast<const unsigned char*>(s.data()),
                 s.size());
  out.pop_back();
  return out;
}

inline std::string slurp_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class IdentityCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "identity calls run in native sandboxes, which need root";
    ASSERT_GE(sodium_init(), 0);
    char tmpl[] = "/tmp/rf-identity-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    secret_ = random_secret();
  }
  void TearDown() override {
    for (auto& w : workers_) {
      w->signal(SIGTERM);
      w->wait(30s);
      // A failed test shows what its workers said (the secret is the test's own).
      if (HasFailure()) std::cerr << "worker log:\n" << w->out() << w->err() << "\n";
    }
    workers_.clear();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> with_state(std::vector<std::string> args) {
    args.push_back("--state-dir");
    args.push_back(dir_);
    return args;
  }
  // Runs a command to its end; returns its exit code. It reads the output for
  // longer than a sandbox may take to set up under TSAN (60 s), so the error
  // of a start that timed out is still read.
  int run(std::vector<std::string> args, std::optional<std::string> in = std::nullopt,
          std::string* out = nullptr, std::string* err = nullptr,
          const std::vector<std::string>& env = {}) {
    Cli c(with_state(std::move(args)), std::move(in), env);
    const int code = c.wait(90s);
    if (out) *out = c.out();
    if (err) *err = c.err();
    return code;
  }
  std::vector<std::string> call(const std::string& project, const std::string& run_id,
                                std::vector<std::string> extra, std::vector<std::string> cmd) {
    std::vector<std::string> a{"call", "--project", project, "--run", run_id, "--state-dir", dir_};
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return a;
  }
  Cli& start_worker(std::vector<std::string> flags, const std::vector<std::string>& env = {}) {
    std::vector<std::string> a{"worker", "start", "--state-dir", dir_};
    a.insert(a.end(), flags.begin(), flags.end());
    workers_.push_back(std::make_unique<Cli>(a, std::nullopt, env));
    auto s = store::Store::open(worker::store_path(dir_));
    EXPECT_TRUE(s.ok());
    const auto end = Clock::now() + 20s;
    while (Clock::now() < end) {
      auto w = (*s)->workers_serving("acme", store::now_ms() - 10'000);
      if (w && !w->empty()) break;
      std::this_thread::sleep_for(20ms);
    }
    return *workers_.back();
  }
  void set_secret_and_profile() {
    std::string err;
    ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, secret_ + "\n", nullptr, &err), 0) << err;
    ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                   "ANTHROPIC_API_KEY=secret:acme-anthropic", "MODEL=value:small"},
                  std::nullopt, nullptr, &err),
              0)
        << err;
  }
  // Every form of the value the redactor promises to catch.
  std::vector<std::string> forms() const {
    return {secret_,
            base64(secret_, sodium_base64_VARIANT_ORIGINAL),
            base64(secret_, sodium_base64_VARIANT_URLSAFE),
            base64("x" + secret_, sodium_base64_VARIANT_ORIGINAL).substr(4),
            base64("xy" + secret_, sodium_base64_VARIANT_ORIGINAL).substr(4),
            hex(secret_)};
  }
  void expect_no_form_in(const std::string& text, const std::string& where) const {
    for (const auto& f : forms()) {
      // The encoded forms' last characters depend on what follows: compare
      // all but the last 4, which is still far longer than chance allows.
      const std::string core = f.size() > 12 ? f.substr(0, f.size() - 4) : f;
      EXPECT_EQ(text.find(core), std::string::npos) << "a form of the secret in " << where;
    }
  }

  std::string dir_;
  std::string secret_;
  std::vector<std::unique_ptr<Cli>> workers_;
};

}  // namespace rf::testing
