#include "policy/principal.h"

#include "core/printable.h"

namespace rf::policy {

Status check_project_name(std::string_view name) {
  const bool shaped = !name.empty() && name.size() <= 64 && name.front() != '.' &&
                      name.find_first_not_of(
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                          "0123456789._-") == std::string_view::npos;
  if (shaped) return ok_status();
  return make_error(
      "project", "a project's name is 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.' (got \"" +
                     printable(name, 80) + "\")");
}

std::string_view to_string(Role role) { return role == Role::kOperator ? "operator" : "agent"; }

Result<Role> parse_role(std::string_view text) {
  if (text == "agent") return Role::kAgent;
  if (text == "operator") return Role::kOperator;
  return make_error("", "unknown role \"" + std::string(text) + "\" (allowed: agent, operator)");
}

Principal Principal::token(std::string id, std::string name, std::string project,
                           std::optional<std::string> user, Role role) {
  Principal p;
  p.kind = Kind::kToken;
  p.token_id = std::move(id);
  p.token_name = std::move(name);
  p.project = std::move(project);
  p.user = std::move(user);
  p.role = role;
  return p;
}

Principal Principal::local_operator() {
  Principal p;
  p.kind = Kind::kLocalOperator;
  p.role = Role::kOperator;
  return p;
}

Principal Principal::worker(std::string id) {
  Principal p;
  p.kind = Kind::kWorker;
  p.worker_id = std::move(id);
  return p;
}

bool Principal::is_operator() const {
  return kind == Kind::kLocalOperator || (kind == Kind::kToken && role == Role::kOperator);
}

std::string Principal::actor() const {
  switch (kind) {
    case Kind::kLocalOperator:
      return "cli";
    case Kind::kWorker:
      return "worker " + worker_id;
    case Kind::kToken:
      break;
  }
  return "token " + (token_name.empty() ? token_id : token_name + " (" + token_id + ")");
}

Result<std::string> Principal::user_for(std::string_view named, std::string_view field) const {
  if (kind != Kind::kToken) return std::string(named);
  if (user) {
    if (named.empty() || named == *user) return *user;
    return make_error(ErrorCode::kDenied, std::string(field),
                      "token " + token_id + " acts as user " + *user + " only, not as \"" +
                          std::string(named) + "\"");
  }
  if (named.empty()) return std::string();
  return make_error(ErrorCode::kDenied, std::string(field),
                    "token " + token_id +
                        " is bound to no user, so it cannot act as a user (a token made with "
                        "`ringfence token create --user NAME` can)");
}

Status Principal::require_operator(std::string_view what) const {
  if (is_operator()) return ok_status();
  return make_error(ErrorCode::kDenied, "",
                    std::string(what) +
                        " needs an operator token (`ringfence token create "
                        "--role operator`); token " +
                        token_id + " is an agent token of project " + project);
}

bool Principal::sees_project(std::string_view p) const {
  return kind != Kind::kToken || role == Role::kOperator || p == project;
}

}  // namespace rf::policy
