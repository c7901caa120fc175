// Starting one of our helper processes (ringfence-docker-tls, ssh,
// ringfence-egress-tls) from a threaded process: posix_spawn (vfork-like,
// safe with threads), a new session (no controlling terminal to prompt on),
// default dispositions for the signals a helper must see and an empty mask.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/result.h"

namespace rf {

struct SpawnFd {
  int fd = -1;  // ours; -1: /dev/null, read-only
  int as = 0;   // the child's number for it (dup2 clears CLOEXEC)
};

// The variables of ours that hold a credential (Vault's token; the store's
// URI and libpq's password, which may carry one): never in a helper's environment.
inline constexpr const char* kHelperHiddenEnv[] = {"VAULT_TOKEN", "RINGFENCE_STORE", "PGPASSWORD"};

// Every fd of ours not in `fds` must be CLOEXEC (ours always are). `envp`
// null: our environment but kHelperHiddenEnv. `search_path`: argv[0] is
// looked up in PATH.
Result<pid_t> spawn_helper(const std::vector<std::string>& argv, const std::vector<SpawnFd>& fds,
                           const std::vector<std::string>* envp = nullptr,
                           bool search_path = false);

}  // namespace rf
