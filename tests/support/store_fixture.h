// A store test's own store: a temp dir, a fresh store in it (an SQLite file,
// or a PostgreSQL schema: store_target.h), and a clock the test moves.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "store/store.h"
#include "support/store_target.h"

namespace rf::testing {

class StoreFixture : public ::testing::Test {
 protected:
  // `prefix` names the temp dir; `file` is the store's path inside it.
  explicit StoreFixture(std::string prefix, std::string file = "ringfence.db")
      : prefix_(std::move(prefix)), file_(std::move(file)) {}

  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix_ + "-XXXXXX")).string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = fresh_store_target(dir_ + "/" + file_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A store whose clock is clock_.
  std::unique_ptr<store::Store> open() {
    auto s = store::Store::open(path_);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    if (!s.ok()) return nullptr;
    (*s)->set_clock([this] { return clock_.load(); });
    return std::move(*s);
  }

  std::string dir_, path_;
  std::atomic<int64_t> clock_{1'000'000};

 private:
  std::string prefix_, file_;
};

}  // namespace rf::testing
