#include "proof/boundary_report.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "proof/digest.h"
#include "proof/mount_table.h"

namespace rf::proof {
namespace {

using json = nlohmann::json;

Bound bound(std::string name, bool held, json evidence) {
  return Bound{std::move(name), held ? BoundStatus::kHeld : BoundStatus::kNotHeld,
               std::move(evidence)};
}

Bound unknown(std::string name, std::string why, json evidence = json::object()) {
  evidence["why_unknown"] = std::move(why);
  return Bound{std::move(name), BoundStatus::kUnknown, std::move(evidence)};
}

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The sandbox's inside said nothing: every bound it feeds is unknown.
bool has_inside(const BoundaryFacts& f) { return f.inside.is_object() && f.inside.contains("ns"); }

// Who read a fact every process of the sandbox shares: "host" (from its
// PID 1, for a probe that left it out: runner/self_probe.h, "Inside only")
// or "sandbox" (the self-probe, as a tool sees it).
std::string read_by(const BoundaryFacts& f, std::string_view key) {
  const auto it = f.inside.find("read_by_host");
  if (it != f.inside.end() && it->is_array()) {
    for (const auto& k : *it)
      if (k.is_string() && k.get_ref<const std::string&>() == key) return "host";
  }
  return "sandbox";
}

std::optional<uint64_t> inode(const std::map<std::string, uint64_t>& ns, const char* n) {
  const auto it = ns.find(n);
  return it == ns.end() ? std::nullopt : std::optional<uint64_t>(it->second);
}

// Held: the sandbox's namespace is not the host's, as the tool sees it (the
// self-probe) and as the host reads it from the sandbox's PID 1 (which no
// process inside can tamper with). Either one being the host's is not held.
void namespaces(const BoundaryFacts& f, std::vector<Bound>& out) {
  for (const char* n : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}) {
    const std::string name = std::string("namespace.") + n;
    const uint64_t inside = has_inside(f) ? f.inside["ns"].value(n, uint64_t{0}) : 0;
    const auto host = inode(f.host_ns, n), pid1 = inode(f.pid1_ns, n);
    if (!host && inside != 0) {
      out.push_back(unknown(name,
                            "the sandbox runs on another kernel (a remote daemon): its namespace "
                            "cannot be compared with this host's",
                            {{"sandbox", inside}}));
      continue;
    }
    if (!host || (inside == 0 && !pid1)) {
      out.push_back(unknown(name, "the sandbox's namespace could not be read"));
      continue;
    }
    json ev = {{"host", *host}};
    if (inside != 0) ev["sandbox"] = inside;
    if (pid1) ev["pid1"] = *pid1;
    if (inside != 0 && pid1 && inside != *pid1) ev["tool_differs_from_pid1"] = true;
    if (std::string_view(n) == "net" && f.spec.network == NetworkPolicy::kHost)
      ev["spec"] = "network host: the spec asks for the host's network";
    const bool held = (inside == 0 || inside != *host) && (!pid1 || *pid1 != *host);
    out.push_back(bound(name, held, ev));
  }
}

// The host uid an inside uid maps to through `map` ("inside outside count" lines).
std::optional<uint64_t> host_id(const std::string& map, uint64_t id) {
  std::istringstream in(map);
  uint64_t inside = 0, outside = 0, count = 0;
  while (in >> inside >> outside >> count) {
    if (id >= inside && id - inside < count) return outside + (id - inside);
  }
  return std::nullopt;
}

void identity(const BoundaryFacts& f, std::vector<Bound>& out) {
  if (!has_inside(f)) {
    out.push_back(unknown("uid", "no self-probe"));
    return;
  }
  const uint64_t uid = f.inside.value("uid", uint64_t{0}), gid = f.inside.value("gid", uint64_t{0});
  // The maps as the host reads them from PID 1 when it can (the tool shares
  // its user namespace), else as the tool printed them.
  const bool host_read = !f.pid1_uid_map.empty() && !f.pid1_gid_map.empty();
  const std::string uid_map = host_read ? f.pid1_uid_map : str(f.inside, "uid_map");
  const std::string gid_map = host_read ? f.pid1_gid_map : str(f.inside, "gid_map");
  const auto host_uid = host_id(uid_map, uid), host_gid = host_id(gid_map, gid);
  json ev = {{"uid", uid},
             {"gid", gid},
             {"uid_map", uid_map},
             {"gid_map", gid_map},
             {"maps_read_by", host_read ? "host" : "sandbox"}};
  if (host_uid) ev["host_uid"] = *host_uid;
  if (host_gid) ev["host_gid"] = *host_gid;
  // Held: neither the process nor anything its map reaches is the host's root.
  bool root_reachable = false;
  std::istringstream in(uid_map);
  uint64_t inside = 0, outside = 0, count = 0;
  while (in >> inside >> outside >> count) {
    if (outside == 0) root_reachable = true;
  }
  ev["host_root_mapped"] = root_reachable;
  // Held: the process is not root, here or on the host. Whether its map
  // could reach the host's root is evidence (namespace.user says the rest).
  out.push_back(bound("uid", uid != 0 && host_uid && *host_uid != 0, ev));
}

void privileges(const BoundaryFacts& f, std::vector<Bound>& out) {
  const json status = has_inside(f) ? f.inside.value("status", json::object()) : json::object();
  if (status.empty()) {
    out.push_back(unknown("capabilities", "no /proc/self/status from inside"));
    out.push_back(unknown("no_new_privs", "no /proc/self/status from inside"));
    out.push_back(unknown("seccomp", "no /proc/self/status from inside"));
  } else {
    auto zero = [&](const char* k) {
      return std::strtoull(str(status, k).c_str(), nullptr, 16) == 0 && !str(status, k).empty();
    };
    json caps = json::object();
    for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd"})
      caps[k] = str(status, k);
    const std::string by = read_by(f, "status");
    caps["read_by"] = by;
    out.push_back(bound("capabilities",
                        zero("CapInh") && zero("CapPrm") && zero("CapEff") && zero("CapAmb"),
                        caps));
    out.push_back(bound("no_new_privs", str(status, "NoNewPrivs") == "1",
                        {{"NoNewPrivs", str(status, "NoNewPrivs")}, {"read_by", by}}));
    const std::string mode = str(status, "Seccomp");
    const uint64_t filters = std::strtoull(str(status, "Seccomp_filters").c_str(), nullptr, 10);
    out.push_back(bound("seccomp", mode == "2" && filters >= f.seccomp_profile.size(),
                        {{"mode", mode},
                         {"filters", filters},
                         {"profile", f.spec.seccomp},
                         {"profile_programs", f.seccomp_profile.size()},
                         {"read_by", by}}));
  }
  json ev = {{"profile", f.seccomp_profile}};
  if (f.seccomp_loaded.empty()) {
    out.push_back(unknown("seccomp.digest",
                          f.seccomp_readback_error.empty() ? "the loaded programs were not read"
                                                           : f.seccomp_readback_error,
                          ev));
    return;
  }
  ev["loaded"] = f.seccomp_loaded;
  // Both lists are in load order. Filters loaded before ours (a container
  // runtime's own) only add to them: ours must be the last ones.
  const size_t k = f.seccomp_profile.size(), n = f.seccomp_loaded.size();
  bool same = n >= k && k > 0;
  for (size_t i = 0; same && i < k; ++i) same = f.seccomp_loaded[n - k + i] == f.seccomp_profile[i];
  out.push_back(bound("seccomp.digest", same, ev));
}

// A limit file's number: "max" (or -1 on v1) is none.
std::optional<uint64_t> number(const std::string& text) {
  if (text.empty() || text == "max" || text == "-1") return std::nullopt;
  char* end = nullptr;
  const uint64_t v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return std::nullopt;
  return v;
}

void cgroups(const BoundaryFacts& f, std::vector<Bound>& out) {
  std::map<std::string, std::string> files = f.cgroup;
  std::string source = "the host read the sandbox's cgroup files";
  if (files.empty() && has_inside(f) && f.inside.contains("cgroup")) {
    for (const auto& [k, v] : f.inside["cgroup"].items())
      if (v.is_string()) files[k] = v.get<std::string>();
    source = "the sandbox read its cgroup files (cgroup namespace)";
  }
  if (files.empty()) {
    const bool local = f.spec.backend == BackendKind::kLocal;
    for (const char* n : {"cgroup.memory", "cgroup.pids", "cgroup.cpu"}) {
      if (local) {
        out.push_back(bound(n, false, {{"why", "the local backend sets no cgroup limits"}}));
      } else {
        out.push_back(unknown(n, "no cgroup limit file could be read"));
      }
    }
    return;
  }
  auto file = [&](std::initializer_list<const char*> names) -> std::pair<std::string, std::string> {
    for (const char* n : names) {
      const auto it = files.find(n);
      if (it != files.end()) return {n, it->second};
    }
    return {"", ""};
  };
  const Limits& l = f.spec.limits;
  {
    const auto [name, text] = file({"memory.max", "memory.limit_in_bytes"});
    json ev = {{"file", name}, {"value", text}, {"spec_bytes", l.memory_bytes}, {"source", source}};
    const auto v = number(text);
    // The kernel rounds a limit down to whole pages.
    const bool held =
        v && l.memory_bytes != 0 && *v <= l.memory_bytes && *v + 4096 > l.memory_bytes;
    out.push_back(name.empty() ? unknown("cgroup.memory", "no memory limit file", ev)
                               : bound("cgroup.memory", held, ev));
  }
  {
    const auto [name, text] = file({"pids.max"});
    json ev = {{"file", name}, {"value", text}, {"spec", l.pids}, {"source", source}};
    const auto v = number(text);
    out.push_back(name.empty() ? unknown("cgroup.pids", "no pids.max", ev)
                               : bound("cgroup.pids", v && l.pids != 0 && *v == l.pids, ev));
  }
  {
    std::optional<double> cpus;
    json ev = {{"spec_cpus", l.cpus}, {"source", source}};
    if (const auto [name, text] = file({"cpu.max"}); !name.empty()) {
      ev["cpu.max"] = text;
      std::istringstream in(text);
      std::string quota;
      uint64_t period = 0;
      in >> quota >> period;
      if (const auto q = number(quota); q && period > 0)
        cpus = static_cast<double>(*q) / static_cast<double>(period);
    } else if (const auto [qn, qt] = file({"cpu.cfs_quota_us"}); !qn.empty()) {
      const auto [pn, pt] = file({"cpu.cfs_period_us"});
      ev["cpu.cfs_quota_us"] = qt;
      ev["cpu.cfs_period_us"] = pt;
      const auto q = number(qt), p = number(pt);
      if (q && p && *p > 0) cpus = static_cast<double>(*q) / static_cast<double>(*p);
    } else {
      out.push_back(unknown("cgroup.cpu", "no cpu limit file", ev));
      return;
    }
    if (cpus) ev["cpus"] = *cpus;
    const bool held = cpus && l.cpus > 0 && std::abs(*cpus - l.cpus) < 0.005;
    out.push_back(bound("cgroup.cpu", held, ev));
  }
}

void rlimits(const BoundaryFacts& f, std::vector<Bound>& out) {
  const json r = has_inside(f) ? f.inside.value("rlimits", json::object()) : json::object();
  if (!r.contains("nofile") || !r.contains("core")) {
    out.push_back(unknown("rlimits", "no rlimits from inside"));
    return;
  }
  const json want = {f.spec.limits.nofile, f.spec.limits.nofile};
  const bool held = r["nofile"] == want && r["core"] == json({0, 0});
  json ev = r;
  ev["spec_nofile"] = f.spec.limits.nofile;
  ev["read_by"] = read_by(f, "rlimits");
  out.push_back(bound("rlimits", held, ev));
}

// A string field of a JSON object, viewed in place ("" when absent or not a string).
std::string_view view(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>())
                                          : std::string_view();
}

// Whether the comma-separated `list` ("rw,nosuid,...") has `option`.
bool has_option(std::string_view list, std::string_view option) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == option) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// The value of the last "key=value" option in `list`.
std::optional<std::string> option_value(std::string_view list, std::string_view key) {
  std::optional<std::string_view> found;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view o = list.substr(0, comma);
    if (o.size() > key.size() && o.substr(0, key.size()) == key && o[key.size()] == '=')
      found = o.substr(key.size() + 1);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (!found) return std::nullopt;
  return std::string(*found);
}

void filesystem(const BoundaryFacts& f, std::vector<Bound>& out) {
  const std::string_view mountinfo = has_inside(f) ? view(f.inside, "mountinfo") : "";
  const std::vector<MountEntry> mounts = parse_mountinfo(mountinfo);
  if (mounts.empty()) {
    for (const char* n : {"filesystem.root_readonly", "filesystem.writable", "filesystem.size",
                          "filesystem.masked"})
      out.push_back(unknown(n, "no mount table from inside"));
    return;
  }
  const std::string by = read_by(f, "mountinfo");
  // The mount on top at each point is the last listed there.
  std::map<std::string_view, const MountEntry*> top;
  for (const auto& m : mounts) top[m.mount_point] = &m;
  {
    const auto root = top.find("/");
    const bool ro = root != top.end() && has_option(root->second->options, "ro");
    json ev = root == top.end()
                  ? json::object()
                  : json{{"fstype", root->second->fstype}, {"options", root->second->options}};
    ev["read_by"] = by;
    out.push_back(bound("filesystem.root_readonly", ro, ev));
  }
  // Writable places a tool may have: its workspace, /tmp, and kernel
  // filesystems whose writes the namespaces confine.
  // The device nodes are bound one by one; writing to them keeps nothing.
  static const std::set<std::string_view> kMayWrite = {
      "/workspace", "/tmp",      "/dev/shm",  "/dev/pts",    "/dev/mqueue",  "/proc",   "/dev",
      "/dev/null",  "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
  // The root is filesystem.root_readonly's to judge; a mask over a /proc
  // file is filesystem.masked's.
  static const std::set<std::string_view> kMasks = {"/proc/kcore", "/proc/keys", "/proc/timer_list",
                                                    "/proc/kallsyms"};
  json writable = json::array(), unexpected = json::array();
  for (const auto& [point, m] : top) {
    if (point == "/" || kMasks.count(point) != 0 || !has_option(m->options, "rw")) continue;
    const std::string_view fstype = m->fstype;
    json w = {{"mount_point", point}, {"fstype", fstype}};
    if (auto size = option_value(m->super_options, "size")) w["size"] = std::move(*size);
    writable.push_back(std::move(w));
    const bool dev_ok = point == "/dev" && fstype == "tmpfs";
    if (kMayWrite.count(point) == 0 || (point == "/dev" && !dev_ok)) unexpected.push_back(point);
  }
  out.push_back(bound("filesystem.writable", unexpected.empty(),
                      {{"writable", writable}, {"unexpected", unexpected}, {"read_by", by}}));
  {
    json sizes = json::object();
    bool held = true, known = true;
    for (const char* point : {"/workspace", "/tmp"}) {
      const auto it = top.find(point);
      if (it == top.end()) {
        sizes[point] = "absent";
        continue;
      }
      const std::string_view fstype = it->second->fstype;
      if (fstype != "tmpfs") {
        sizes[point] = "not a tmpfs (" + std::string(fstype) + "): sized by the host";
        known = false;
        continue;
      }
      const std::string size = option_value(it->second->super_options, "size").value_or("");
      sizes[point] = size;
      uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
      if (!size.empty() && size.back() == 'k') bytes <<= 10;
      if (size.empty() || bytes == 0 || bytes > f.spec.limits.disk_bytes) held = false;
    }
    json ev = {{"sizes", sizes}, {"spec_disk_bytes", f.spec.limits.disk_bytes}, {"read_by", by}};
    out.push_back(!known && held ? unknown("filesystem.size",
                                           "the workspace is a host directory: its size is the "
                                           "host's; the runner's disk limit still applies",
                                           ev)
                                 : bound("filesystem.size", held, ev));
  }
  {
    json masked = json::object();
    bool held = true;
    // A path this kernel does not have needs no mask.
    const json exists = f.inside.value("exists", json::object());
    for (const char* p : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/kallsyms"}) {
      const bool m = top.count(p) != 0;
      const bool absent = exists.value(p, true) == false;
      masked[p] = m ? json(true) : absent ? json("absent") : json(false);
      held = held && (m || absent);
    }
    out.push_back(bound("filesystem.masked", held, {{"masked", masked}, {"read_by", by}}));
  }
}

void network(const BoundaryFacts& f, std::vector<Bound>& out) {
  json ev = {{"policy", std::string(to_string(f.spec.network))}, {"allow", f.spec.allow}};
  if (!has_inside(f)) {
    out.push_back(unknown("network", "no interfaces from inside", ev));
    return;
  }
  ev["interfaces"] = f.inside.value("interfaces", json::array());
  ev["read_by"] = read_by(f, "interfaces");
  if (f.spec.network == NetworkPolicy::kHost) {
    ev["why"] = "the spec asks for the host's network";
    out.push_back(bound("network", false, ev));
    return;
  }
  // none and proxy: loopback only; proxy's egress is the host's proxy, reached
  // through the runner's bridge on loopback.
  out.push_back(bound("network", ev["interfaces"] == json::array({"lo"}), ev));
}

void environment(const BoundaryFacts& f, std::vector<Bound>& out) {
  if (!has_inside(f) || !f.inside.contains("env_keys")) {
    out.push_back(unknown("environment", "no environment keys from inside"));
    return;
  }
  std::set<std::string> expected;
  for (const auto& [k, v] : base_environment(true)) expected.insert(k);
  for (const auto& [k, v] : f.spec.env) expected.insert(k);
  if (f.spec.network == NetworkPolicy::kProxy)
    for (const auto& [k, v] : proxy_environment()) expected.insert(k);
  if (f.spec.tls_intercept)
    for (const auto& [k, v] : trust_environment()) expected.insert(k);
  json keys = f.inside["env_keys"], unexpected = json::array();
  for (const auto& k : keys)
    if (k.is_string() && expected.count(k.get<std::string>()) == 0) unexpected.push_back(k);
  out.push_back(
      bound("environment", unexpected.empty(), {{"keys", keys}, {"unexpected", unexpected}}));
}

// Each call in a Landlock domain of its own (runner/call_domain.h): no call
// reads another's environment or memory, though all run as one uid. Known
// from a probe that ran in a fork (the command child that entered it).
void calls(const BoundaryFacts& f, std::vector<Bound>& out) {
  if (!has_inside(f) || !f.inside.contains("call_domain")) {
    out.push_back(unknown("calls.isolated", "no self-probe that ran in a call's own process"));
    return;
  }
  json ev = f.inside["call_domain"];
  const bool held = ev.value("entered", false) && ev.value("landlock_abi", 0) >= 2;
  if (!held) ev["why"] = "no Landlock (ABI 2 or later, with no_new_privs) in this sandbox";
  out.push_back(bound("calls.isolated", held, ev));
}

void attacks(const BoundaryFacts& f, std::vector<Bound>& out) {
  if (!has_inside(f) || !f.inside.contains("attacks")) {
    out.push_back(unknown("self_probe", "no self-probe"));
    return;
  }
  bool held = true;
  json succeeded = json::array(), untried = json::array();
  for (const auto& a : f.inside["attacks"]) {
    if (!a.value("tried", true)) {
      untried.push_back(a.value("attack", ""));
    } else if (!a.value("failed", false)) {
      held = false;
      succeeded.push_back(a.value("attack", ""));
    }
  }
  // An attack the probe could not even try (its mount needs a directory it
  // makes) proves nothing either way: unknown, unless another got through.
  if (held && !untried.empty()) {
    out.push_back(unknown("self_probe", "not every attack could be tried",
                          {{"attacks", f.inside["attacks"]}, {"untried", untried}}));
    return;
  }
  out.push_back(
      bound("self_probe", held, {{"attacks", f.inside["attacks"]}, {"succeeded", succeeded}}));
}

// The spec as the report shows it: environment names only.
json public_spec(const SandboxSpec& spec) {
  json j = spec_json(spec);
  json keys = json::array();
  for (const auto& [k, v] : spec.env) keys.push_back(k);
  j.erase("env");
  j["env_keys"] = keys;
  return j;
}

void judge_all(const BoundaryFacts& f, std::vector<Bound>& out);

}  // namespace

std::string_view to_string(BoundStatus s) {
  switch (s) {
    case BoundStatus::kHeld:
      return "held";
    case BoundStatus::kNotHeld:
      return "not_held";
    case BoundStatus::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::vector<Bound> judge_bounds(const BoundaryFacts& in) {
  // What the self-probe printed came out of the sandbox: anything of the
  // wrong shape is dropped, and the bounds it feeds are unknown.
  std::vector<Bound> out;
  try {
    judge_all(in, out);
  } catch (const nlohmann::json::exception& e) {
    BoundaryFacts blind = in;
    blind.inside = nlohmann::json::object();
    out.clear();
    judge_all(blind, out);
    for (Bound& b : out) {
      if (b.status == BoundStatus::kUnknown)
        b.evidence["why_unknown"] =
            std::string("the self-probe's output is malformed: ") + e.what();
    }
  }
  return out;
}

namespace {
void judge_all(const BoundaryFacts& f, std::vector<Bound>& out) {
  namespaces(f, out);
  identity(f, out);
  privileges(f, out);
  cgroups(f, out);
  rlimits(f, out);
  filesystem(f, out);
  network(f, out);
  environment(f, out);
  calls(f, out);
  attacks(f, out);
}
}  // namespace

json report_statement(const BoundaryFacts& f, std::vector<Bound> bounds) {
  json spec = public_spec(f.spec);
  json list = json::array();
  json summary = {{"held", 0}, {"not_held", 0}, {"unknown", 0}};
  for (Bound& b : bounds) {
    const std::string s(to_string(b.status));
    json entry = json::object();
    entry["bound"] = std::move(b.name);
    entry["status"] = s;
    entry["evidence"] = std::move(b.evidence);  // moved: the self-probe's attacks are in it
    list.push_back(std::move(entry));
    summary[s] = summary[s].get<int>() + 1;
  }
  const std::string spec_sha256 = sha256_hex(spec.dump());
  json predicate = {{"sandbox", f.spec.id},
                    {"backend", f.backend},
                    {"image", {{"name", f.image}, {"digest", f.image_digest}}},
                    {"runner", {{"version", f.runner_version}, {"sha256", f.runner_sha256}}},
                    {"made_at_ms", f.made_at_ms},
                    {"summary", summary}};
  // Moved in, not listed above: an initializer list copies what it holds.
  predicate["spec"] = std::move(spec);
  predicate["bounds"] = std::move(list);
  if (!f.sandbox_mode.empty()) predicate["sandbox_mode"] = f.sandbox_mode;
  json statement = {
      {"_type", "https://in-toto.io/Statement/v1"},
      {"subject",
       json::array({{{"name", "sandbox/" + f.spec.id}, {"digest", {{"sha256", spec_sha256}}}}})},
      {"predicateType", kReportPredicate}};
  statement["predicate"] = std::move(predicate);
  return statement;
}

Result<BoundSummary> summarize_report(const json& statement) {
  if (!statement.is_object()) return make_error("report", "not a JSON object");
  if (statement.value("predicateType", "") != kReportPredicate)
    return make_error("report", "its predicateType is not " + std::string(kReportPredicate));
  const auto p = statement.find("predicate");
  if (p == statement.end() || !p->is_object() || !p->contains("bounds") ||
      !(*p)["bounds"].is_array())
    return make_error("report", "it has no bounds");
  BoundSummary s;
  for (const auto& b : (*p)["bounds"]) {
    if (!b.is_object() || !b.contains("status") || !b["status"].is_string() ||
        !b.contains("bound") || !b["bound"].is_string())
      return make_error("report", "a bound without a name or a status");
    const std::string status = b["status"].get<std::string>(), name = b["bound"].get<std::string>();
    if (status == "held") {
      ++s.held;
    } else if (status == "not_held") {
      s.not_held.push_back(name);
    } else {
      s.unknown.push_back(name);
    }
  }
  return s;
}

}  // namespace rf::proof
