// Who a request is (issue 39): every request at every door has one principal,
// and what the request names (a project, a user) is checked against it, never
// taken from its body.
//   token           an API token of one project (api/tokens.h), maybe bound
//                   to one user, with a role: agent (its project's routes) or
//                   operator (server-wide routes too: metrics, the fleet,
//                   every project's approvals and audit)
//   local operator  whoever runs the CLI on the host with the store
//   worker          a worker, acting for the runs it claimed
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::policy {

// A project's name: 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.'. It
// names a directory (a local artifact lands under ROOT/PROJECT/) and prefixes
// secrets (PROJECT:NAME), so nothing in it may reach past either.
Status check_project_name(std::string_view name);

enum class Role { kAgent, kOperator };
std::string_view to_string(Role role);
Result<Role> parse_role(std::string_view text);  // "agent" | "operator"

struct Principal {
  enum class Kind { kToken, kLocalOperator, kWorker };
  Kind kind = Kind::kToken;
  std::string project;  // a token's project; empty for the others (any)
  std::string token_id, token_name;
  std::optional<std::string> user;  // the one user a token acts as
  Role role = Role::kAgent;
  std::string worker_id;

  static Principal token(std::string id, std::string name, std::string project,
                         std::optional<std::string> user, Role role);
  static Principal local_operator();
  static Principal worker(std::string id);

  bool is_operator() const;
  // Who, as the audit log and an approval's decider name it: "token NAME
  // (tok_...)", "cli", "worker W".
  std::string actor() const;

  // The user a request acts as, given what its body names (empty: none) in
  // `field`. A token bound to a user acts as that user only; a token bound to
  // none may not name one (no user-level identity). The local operator and a
  // worker (which acts for a run whose user its door checked) name any.
  // Refused with ErrorCode::kDenied, naming the field.
  Result<std::string> user_for(std::string_view named, std::string_view field) const;
  // Routes of every project (metrics, the fleet, other projects' records):
  // refused with ErrorCode::kDenied unless an operator.
  Status require_operator(std::string_view what) const;
  // Whether this principal may see or act on a record of `project`.
  bool sees_project(std::string_view project) const;
};

}  // namespace rf::policy
