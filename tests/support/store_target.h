// Where the store tests keep their store: an SQLite file, or, with
// RF_TEST_STORE=postgres, a schema of a PostgreSQL cluster this process starts
// (postgres_server.h). ctest runs the store suites both ways
// (tests/CMakeLists.txt: store_suites_on_postgres).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "support/postgres_server.h"

namespace rf::testing {

// The engine the store's tests run on: RF_TEST_STORE=postgres runs them on a
// cluster this process starts once (PostgresServer), anything else on SQLite
// files. ctest runs the store suites both ways (tests/CMakeLists.txt).
inline bool store_tests_on_postgres() {
  const char* e = std::getenv("RF_TEST_STORE");
  return e != nullptr && std::string_view(e) == "postgres";
}

inline PostgresServer& shared_postgres() {
  static PostgresServer server;  // ended at exit, or with the thread that made it
  return server;
}

// Where a test's fresh store lives: `sqlite_path` on SQLite; on PostgreSQL a
// new schema of the shared cluster ("" if the cluster could not start: the
// store's open then fails, and says so).
inline std::string fresh_store_target(const std::string& sqlite_path) {
  if (!store_tests_on_postgres()) return sqlite_path;
  PostgresServer& pg = shared_postgres();
  if (!pg.ok()) {
    ADD_FAILURE() << "the tests' PostgreSQL did not start: " << pg.error();
    return "";
  }
  std::string uri = pg.fresh_schema_uri();
  if (uri.empty()) ADD_FAILURE() << "could not make a schema in the tests' PostgreSQL";
  return uri;
}

}  // namespace rf::testing
