// libFuzzer target for the egress policy: request targets and IP literals come
// from sandboxed code, rules from configs. Nothing may crash, and:
//   - an IP literal prints to text that parses back to the same address;
//   - a parsed authority is canonical: parsing its own text gives it back, and
//     a host that is an IP literal in any notation comes out as that address;
//   - a verdict's reason is printable ASCII (it goes into a 403), and an allowed
//     verdict names one of the rules, which on its own allows the same target;
//   - an unspecified address never passes check_address.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   make -C build-fuzz egress_policy_fuzz && build-fuzz/fuzz/egress_policy_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "net/egress_policy.h"

namespace {

using rf::net::AddressClass;
using rf::net::Authority;
using rf::net::EgressPolicy;
using rf::net::IpAddress;
using rf::net::Verdict;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_printable(const std::string& s) {
  for (char c : s) check(c >= 0x20 && c < 0x7f);
}

std::string authority_text(const Authority& a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

void check_ip_literal(std::string_view text) {
  const auto a = rf::net::parse_ip_literal(text);
  if (!a) return;
  if (!a->v6) {
    for (size_t i = 4; i < a->bytes.size(); ++i) check(a->bytes[i] == 0);
  }
  const std::string s = a->to_string();
  check(rf::net::parse_ip_literal(s) == a);
  if (a->v6) check(rf::net::parse_ip_literal("[" + s + "]") == a);
  check(!rf::net::to_string(rf::net::classify(*a)).empty());
}

// The verdict of `policy` for `target`, with the invariants every verdict keeps.
void check_verdict(const EgressPolicy& policy, const Verdict& v) {
  check_printable(v.reason);
  check(!v.reason.empty());
  if (!v.allowed) return;
  bool named = false;
  for (const std::string& r : policy.rules()) {
    if (r.find(v.reason) != std::string::npos) named = true;
  }
  check(named || v.reason.ends_with(" is a public address"));
}

void check_against(const EgressPolicy& policy, const Authority& target) {
  const Verdict v = policy.check_name(target);
  check_verdict(policy, v);
  if (v.allowed) {
    // The rule named in the reason allows the target on its own.
    auto alone = EgressPolicy::parse({v.reason});
    check(alone.ok());
    check(alone->check_name(target).allowed);
  }
  if (const auto ip = rf::net::parse_ip_literal(target.host)) {
    const Verdict a = policy.check_address(target.host, *ip, target.port);
    check_verdict(policy, a);
    if (rf::net::classify(*ip) == AddressClass::unspecified) check(!a.allowed);
    if (v.allowed) check(a.allowed);  // an allowed literal may be connected to
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_ip_literal(text);

  // The first line is a request target; the rest, one rule a line.
  const size_t nl = text.find('\n');
  const std::string_view target_text = text.substr(0, nl);
  std::vector<std::string> rules;
  if (nl != std::string_view::npos) {
    std::string_view rest = text.substr(nl + 1);
    while (!rest.empty() && rules.size() < 16) {
      const size_t end = rest.find('\n');
      rules.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    }
  }

  auto target = rf::net::parse_authority(target_text, 443);
  if (target.ok()) {
    check(!target->host.empty() && target->port != 0);
    auto again = rf::net::parse_authority(authority_text(*target), std::nullopt);
    check(again.ok() && again->host == target->host && again->port == target->port);
    if (const auto ip = rf::net::parse_ip_literal(target->host)) {
      check(ip->to_string() == target->host);
    }
    // The host as written, if a literal, must come out as that address.
    const size_t colon = target_text.rfind(':');
    const std::string_view host_text =
        target_text.find('[') == std::string_view::npos && colon != std::string_view::npos
            ? target_text.substr(0, colon)
            : target_text;
    if (const auto ip = rf::net::parse_ip_literal(host_text)) {
      check(target->host == ip->to_string());
    }
  } else {
    check_printable(target.error().to_string());
  }

  auto policy = EgressPolicy::parse(rules);
  if (!policy.ok()) {
    check_printable(policy.error().to_string());
    return 0;
  }
  if (target.ok()) check_against(*policy, *target);
  // Each rule, read as a request target, against the whole policy.
  for (const std::string& r : rules) {
    auto t = rf::net::parse_authority(r, 443);
    if (t.ok()) check_against(*policy, *t);
  }
  return 0;
}
