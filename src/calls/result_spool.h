// How a call ended, kept on the worker's disk while the store cannot take it
// (issue 40): a store outage must not throw away what a call produced. The
// end is written here as soon as its first write to the store fails as
// unavailable, removed once the store took it, and filed by the worker's
// housekeeping, or by its next process under the same id before that one
// registers (the old registration's epoch still holds the call), when the
// process gave up or died meanwhile. Bounded: past max_bytes an end is
// kept in memory only, while its writer retries.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/store.h"

namespace rf::calls {

struct SpooledEnd {
  int64_t call_id = 0;
  std::string worker_id;
  int64_t epoch = -1;  // the worker's registration that held the call
  std::string state;   // done, failed, revoked
  int exit_code = 0;
  std::string result_json;                  // done
  std::string error;                        // failed, revoked
  std::vector<store::PendingChunk> output;  // held back, not yet in the store
};

// The end's write to the store, as the worker makes it (finish, fail or
// revoke the held call, with its held output).
Status write_end(store::Store& store, const SpooledEnd& end);

class ResultSpool {
 public:
  explicit ResultSpool(std::string dir, size_t max_bytes = 64u << 20);
  // Written whole (a temporary file renamed over) or not at all. Its writer
  // still retrying, file_all leaves it alone until drop() or let_go().
  Status put(const SpooledEnd& end);
  // Filed (or refused for good): the end goes.
  void drop(int64_t call_id);
  // Its writer gave up: file_all files it from now on.
  void let_go(int64_t call_id);
  // Every end kept, oldest call first; a file that does not read is set
  // aside (NAME.bad) with a warning.
  std::vector<SpooledEnd> all() const;
  // Files every end kept into `store`; those filed, or refused for good
  // (their call ended otherwise: the refusal is logged), are removed. Stops
  // at the first unavailable store. Returns how many were filed.
  // `registered`: the epoch this process's Store registered the worker
  // under, whose ends it files as its own; nullopt: before it registers,
  // each end is filed under the epoch that held it (a predecessor's).
  int file_all(store::Store& store, std::optional<int64_t> registered);
  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(int64_t call_id) const;
  std::string dir_;
  size_t max_bytes_;
  std::mutex mu_;
  std::set<int64_t> writing_;  // under mu_: ends their writers still retry
};

}  // namespace rf::calls
