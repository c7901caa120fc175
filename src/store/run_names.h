// A project's run names (issue 39): a tenant names its runs (a call's "run",
// a workflow run's "run_id"), and each project's names are its own. A name
// no run has yet is the run's id; a name another project's run already has
// gets an id of its own ("NAME~" and 8 hex digits), remembered here, so the
// answer to "make run r1" is the same whether or not another project has an
// r1: ids of other tenants cannot be enumerated. The tenant's doors (the
// API) ask here; the local operator's CLI and the workers see the ids.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace rf::store {

class RunNames {
 public:
  explicit RunNames(Store& store) : store_(store) {}

  // The id of `project`'s run `name`, if it has one.
  Result<std::optional<std::string>> find(const std::string& project, const std::string& name);
  // The id `project`'s run `name` has or will have: the name itself when no
  // run (and no other name) holds it, else an id of its own, remembered.
  Result<std::string> claim(const std::string& project, const std::string& name);
  // The name a tenant gave run `run_id` (the id itself when it is its name).
  Result<std::string> name_of(const std::string& run_id);

 private:
  Store& store_;
};

}  // namespace rf::store
