// The git artifact (issue 12): the workspace pushed over smart HTTP, from
// inside the sandbox, never by the host's git in a directory the agent wrote
// (its hooks and config would be the agent's). The push runs in a new git
// directory outside the workspace (a fresh `mktemp -d` under $TMPDIR or
// /tmp, removed when it ends), with no system or
// global config, hooks off, the workspace's own .git left out, and on top of
// the branch's head when it exists. The token reaches git only through its
// environment (GIT_CONFIG_* -> http.<url>.extraHeader), never argv, a URL or
// a file, and only for that URL.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf::artifact {

struct GitTarget {
  std::string url;     // http(s)://host/owner/repo.git
  std::string branch;  // main
  std::string message;
  std::string path = "/workspace";  // the tree to push
  std::string author = "ringfence";
  std::string email = "ringfence@localhost";
};

struct GitPushPlan {
  std::vector<std::string> argv;           // /bin/sh -c SCRIPT (no secret in it)
  std::map<std::string, std::string> env;  // holds the token
};

// Refused: a URL that is not http(s), holds credentials, a query or
// fragment; a branch git would not take.
Result<GitPushPlan> plan_git_push(const GitTarget& target, const std::string& token);

// The commit the push printed last ("rf-commit <40 hex>"), if any.
std::optional<std::string> pushed_commit(const std::string& output);

}  // namespace rf::artifact
