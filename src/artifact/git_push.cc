#include "artifact/git_push.h"

#include <sodium.h>

#include <cctype>
#include <cstring>

namespace rf::artifact {
namespace {

// The script reads everything from its environment: nothing the step or the
// agent chose ever becomes shell syntax.
// Its git dir and HOME are a fresh directory of its own (mktemp, 0700), gone
// when it ends: in mode none it runs on the host, where a fixed name in the
// shared /tmp was met by every push at once, and could be made ahead by
// another user with a config of theirs for root's git to run.
constexpr const char* kScript = R"sh(set -eu
d=$(mktemp -d "${TMPDIR:-/tmp}/rf-artifact-XXXXXX")
trap 'rm -rf "$d"' EXIT
mkdir "$d/home"
export HOME="$d/home" GIT_DIR="$d/git" GIT_WORK_TREE="$RF_GIT_TREE"
git init -q
git symbolic-ref HEAD "refs/heads/$RF_GIT_BRANCH"
if git fetch -q --depth=1 "$RF_GIT_URL" "refs/heads/$RF_GIT_BRANCH" 2>/dev/null; then
  git reset -q --soft FETCH_HEAD
fi
git add -A -- . ':(exclude,top).git'
git commit -q --allow-empty -m "$RF_GIT_MESSAGE"
git push -q "$RF_GIT_URL" "HEAD:refs/heads/$RF_GIT_BRANCH"
echo "rf-commit $(git rev-parse HEAD)"
)sh";

bool valid_branch(const std::string& b) {
  if (b.empty() || b.size() > 200 || b[0] == '-' || b[0] == '/' || b.back() == '/' ||
      b.back() == '.' || b.find("..") != std::string::npos || b.find("//") != std::string::npos ||
      b.find("@{") != std::string::npos || (b.size() >= 5 && b.substr(b.size() - 5) == ".lock")) {
    return false;
  }
  for (unsigned char c : b) {
    if (c <= 0x20 || c == 0x7f || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' ||
        c == '[' || c == '\\') {
      return false;
    }
  }
  return true;
}

std::string base64(const std::string& s) {
  std::string out(sodium_base64_encoded_len(s.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(s.data()),
                    s.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(std::strlen(out.c_str()));
  return out;
}

}  // namespace

Result<GitPushPlan> plan_git_push(const GitTarget& t, const std::string& token) {
  const std::string what = "git artifact " + t.url;
  const bool http = t.url.rfind("http://", 0) == 0 || t.url.rfind("https://", 0) == 0;
  if (!http) return make_error(what, "only http:// and https:// remotes are pushed to");
  const std::string rest = t.url.substr(t.url.find("//") + 2);
  const std::string authority = rest.substr(0, rest.find('/'));
  if (authority.find('@') != std::string::npos) {
    return make_error(what,
                      "credentials in the URL are not allowed: the token comes from identity");
  }
  if (t.url.find_first_of("?# \t\r\n") != std::string::npos) {
    return make_error(what, "a URL with a query, a fragment or spaces is not pushed to");
  }
  if (!valid_branch(t.branch)) return make_error(what, "\"" + t.branch + "\" is not a branch name");
  if (token.empty()) return make_error(what, "the push token is empty");
  for (unsigned char c : token) {
    if (c < 0x20 || c == 0x7f) return make_error(what, "the push token holds a control byte");
  }
  GitPushPlan p;
  p.argv = {"/bin/sh", "-c", kScript};
  p.env = {
      {"RF_GIT_URL", t.url},
      {"RF_GIT_BRANCH", t.branch},
      {"RF_GIT_TREE", t.path},
      {"RF_GIT_MESSAGE", t.message.empty() ? "ringfence artifact" : t.message},
      {"GIT_CONFIG_NOSYSTEM", "1"},
      {"GIT_CONFIG_GLOBAL", "/dev/null"},
      {"GIT_TERMINAL_PROMPT", "0"},
      {"GIT_ASKPASS", "/bin/false"},
      {"GIT_AUTHOR_NAME", t.author},
      {"GIT_AUTHOR_EMAIL", t.email},
      {"GIT_COMMITTER_NAME", t.author},
      {"GIT_COMMITTER_EMAIL", t.email},
      {"GIT_CONFIG_COUNT", "4"},
      // The token, for this URL only.
      {"GIT_CONFIG_KEY_0", "http." + t.url + ".extraHeader"},
      {"GIT_CONFIG_VALUE_0", "Authorization: Basic " + base64("x-access-token:" + token)},
      {"GIT_CONFIG_KEY_1", "core.hooksPath"},
      {"GIT_CONFIG_VALUE_1", "/dev/null"},
      {"GIT_CONFIG_KEY_2", "init.defaultBranch"},
      {"GIT_CONFIG_VALUE_2", t.branch},
      {"GIT_CONFIG_KEY_3", "http.followRedirects"},
      {"GIT_CONFIG_VALUE_3", "false"},
  };
  return p;
}

std::optional<std::string> pushed_commit(const std::string& output) {
  const std::string mark = "rf-commit ";
  const size_t at = output.rfind(mark);
  if (at == std::string::npos) return std::nullopt;
  std::string id = output.substr(at + mark.size(), 40);
  if (id.size() != 40) return std::nullopt;
  for (char c : id) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return id;
}

}  // namespace rf::artifact
