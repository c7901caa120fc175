#include "proof/checkpoint.h"

#include <charconv>
#include <vector>

#include "core/base64.h"
#include "proof/digest.h"

namespace rf::proof {
namespace {

constexpr std::string_view kDash = "\xe2\x80\x94 ";  // U+2014 EM DASH, then a space

std::string key_hash(const std::string& name, const PublicKey& key) {
  std::string in = name + "\n";
  in.push_back('\x01');
  in += key.raw;
  return sha256(in).substr(0, 4);
}

Error bad(const std::string& what) { return make_error("checkpoint", what); }

}  // namespace

std::string checkpoint_body(const Checkpoint& c) {
  return c.origin + "\n" + std::to_string(c.size) + "\n" + base64_encode(c.root) + "\n";
}

std::string sign_checkpoint(const Checkpoint& c, const SigningKey& key) {
  const std::string body = checkpoint_body(c);
  const std::string sig = key_hash(c.origin, key.public_key()) + key.sign(body);
  return body + "\n" + std::string(kDash) + c.origin + " " + base64_encode(sig) + "\n";
}

Result<Checkpoint> verify_checkpoint(std::string_view note, const PublicKey& key) {
  const auto blank = note.find("\n\n");
  if (blank == std::string_view::npos) return bad("no blank line before its signatures");
  const std::string_view body = note.substr(0, blank + 1);
  std::string_view sigs = note.substr(blank + 2);
  // The body: origin, size, root, then extension lines (none of ours).
  Checkpoint c;
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < body.size();) {
    const auto nl = body.find('\n', at);
    lines.push_back(body.substr(at, nl - at));
    at = nl + 1;
  }
  if (lines.size() < 3)
    return bad("its body has " + std::to_string(lines.size()) +
               " lines; origin, size and root are needed");
  c.origin = std::string(lines[0]);
  if (c.origin.empty()) return bad("its origin line is empty");
  const auto [end, ec] =
      std::from_chars(lines[1].data(), lines[1].data() + lines[1].size(), c.size);
  if (ec != std::errc() || end != lines[1].data() + lines[1].size() || lines[1].empty() ||
      (lines[1].size() > 1 && lines[1][0] == '0')) {
    return bad("its size line \"" + std::string(lines[1]) + "\" is not a decimal number");
  }
  auto root = base64_decode(lines[2]);
  if (!root || root->size() != kHashBytes) return bad("its root line is not a base64 SHA-256");
  c.root = std::move(*root);
  // The signature lines: find ours (same name and key hash).
  const std::string want = key_hash(c.origin, key);
  bool named = false;
  while (!sigs.empty()) {
    const auto nl = sigs.find('\n');
    if (nl == std::string_view::npos) return bad("its last signature line has no newline");
    std::string_view line = sigs.substr(0, nl);
    sigs.remove_prefix(nl + 1);
    if (line.substr(0, kDash.size()) != kDash)
      return bad("a signature line does not start with \"— \"");
    line.remove_prefix(kDash.size());
    const auto sp = line.find(' ');
    if (sp == std::string_view::npos) return bad("a signature line has no name");
    if (line.substr(0, sp) != c.origin) continue;
    named = true;
    auto sig = base64_decode(line.substr(sp + 1));
    if (!sig || sig->size() != 4 + kSignatureBytes) continue;
    if (sig->substr(0, 4) != want) continue;
    if (!verify_signature(key, body, sig->substr(4))) {
      return bad(
          "the signature does not match its text: the checkpoint was changed after it "
          "was signed");
    }
    return c;
  }
  return bad(named ? "signed under its origin by another key"
                   : "no signature under its origin \"" + c.origin + "\"");
}

}  // namespace rf::proof
