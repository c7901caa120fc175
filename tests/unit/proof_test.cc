// The proof's parts alone (issue 15): signing keys, DSSE, the Merkle tree
// against RFC 6962's published vectors and a brute-force check of every
// proof, signed checkpoints, the bounds judged from facts, and the receipt
// file verified offline, with one byte changed anywhere it must fail.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/base64.h"
#include "core/io.h"
#include "gtest/gtest.h"
#include "proof/boundary_report.h"
#include "proof/checkpoint.h"
#include "proof/digest.h"
#include "proof/dsse.h"
#include "proof/merkle.h"
#include "proof/mount_table.h"
#include "proof/proof_log.h"
#include "proof/signing_key.h"
#include "proof/verify.h"
#include "store/store.h"
#include "support/capture.h"
#include "support/fake_backend.h"
#include "support/store_target.h"

namespace rf::proof {
namespace {

using json = nlohmann::json;

std::string temp_dir() {
  char tmpl[] = "/tmp/rf-proof-XXXXXX";
  return ::mkdtemp(tmpl);
}

// OpenSSL's own Ed25519 verification: independent of libsodium.
bool openssl_verifies(const PublicKey& key, std::string_view msg, std::string_view sig) {
  const std::string pem = key.pem();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* pkey = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (pkey == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                             reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  return ok;
}

TEST(SigningKey, MadeOnceWithMode0600AndTheSameOnTheNextLoad) {
  const std::string dir = temp_dir();
  auto a = SigningKey::load_or_create(dir);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/keys/proof.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto b = SigningKey::load_or_create(dir);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->public_key().raw, b->public_key().raw);
  auto pem = read_public_key_file(public_key_path(dir));
  ASSERT_TRUE(pem.ok()) << pem.error().to_string();
  EXPECT_EQ(pem->raw, a->public_key().raw);
  const std::string sig = a->sign("hello");
  EXPECT_TRUE(verify_signature(a->public_key(), "hello", sig));
  EXPECT_TRUE(openssl_verifies(a->public_key(), "hello", sig));
  EXPECT_FALSE(verify_signature(a->public_key(), "hellp", sig));
  std::filesystem::remove_all(dir);
}

TEST(SigningKey, ATooOpenOrShortSeedFailsClosedNamingTheFile) {
  const std::string dir = temp_dir();
  ASSERT_TRUE(SigningKey::load_or_create(dir).ok());
  const std::string seed = dir + "/keys/proof.key";
  ::chmod(seed.c_str(), 0644);
  auto open = SigningKey::load_or_create(dir);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.error().to_string().find(seed), std::string::npos);
  EXPECT_NE(open.error().to_string().find("0644"), std::string::npos);
  ::chmod(seed.c_str(), 0600);
  { std::ofstream(seed, std::ios::trunc) << "short"; }
  auto shrt = SigningKey::load(dir);
  ASSERT_FALSE(shrt.ok());
  EXPECT_NE(shrt.error().to_string().find("corrupt"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(SigningKey, RotateRetiresTheOldPublicKey) {
  const std::string dir = temp_dir();
  auto a = SigningKey::load_or_create(dir);
  ASSERT_TRUE(a.ok());
  auto b = SigningKey::rotate(dir);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_NE(a->public_key().raw, b->public_key().raw);
  auto retired = read_public_key_file(dir + "/keys/retired/" +
                                      a->public_key().key_id().substr(0, 16) + ".pub");
  ASSERT_TRUE(retired.ok()) << retired.error().to_string();
  EXPECT_EQ(retired->raw, a->public_key().raw);
  auto now = read_public_key_file(public_key_path(dir));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->raw, b->public_key().raw);
  std::filesystem::remove_all(dir);
}

// Signing ahead (signing_key.h): each signature made with a prepared nonce
// is a valid Ed25519 signature to libsodium and to OpenSSL, a nonce signs
// once, and a key loaded from the same seed signs the same way.
TEST(SigningKey, SignaturesMadeAheadVerifyAndEachNonceSignsOnce) {
  const std::string dir = temp_dir();
  auto key = SigningKey::load_or_create(dir);
  ASSERT_TRUE(key.ok()) << key.error().to_string();
  EXPECT_EQ(key->prepared(), 0u);
  key->prepare(SigningKey::kMaxPrepared + 10);  // capped
  ASSERT_EQ(key->prepared(), SigningKey::kMaxPrepared);
  std::vector<std::string> rs;
  // 32 made ahead, then 8 the whole way (RFC 8032's deterministic nonce).
  for (size_t i = 0; i < SigningKey::kMaxPrepared + 8; ++i) {
    const std::string msg = "the same message " + std::string(i % 2 == 0 ? 0 : 1500, 'x');
    const std::string sig = key->sign(msg);
    ASSERT_TRUE(verify_signature(key->public_key(), msg, sig)) << i;
    ASSERT_TRUE(openssl_verifies(key->public_key(), msg, sig)) << i;
    std::string changed = msg;
    changed[0] ^= 1;
    ASSERT_FALSE(verify_signature(key->public_key(), changed, sig)) << i;
    ASSERT_FALSE(openssl_verifies(key->public_key(), changed, sig)) << i;
    if (i < SigningKey::kMaxPrepared) rs.push_back(sig.substr(0, 32));  // R
  }
  EXPECT_EQ(key->prepared(), 0u);
  std::sort(rs.begin(), rs.end());
  EXPECT_EQ(std::adjacent_find(rs.begin(), rs.end()), rs.end()) << "a nonce was used twice";
  // Without a prepared nonce the signature is RFC 8032's own: deterministic.
  EXPECT_EQ(key->sign("m"), key->sign("m"));
  key->prepare(1);
  const std::string ahead = key->sign("m");
  EXPECT_NE(ahead, key->sign("m"));
  auto again = SigningKey::load(dir);
  ASSERT_TRUE(again.ok());
  again->prepare(1);
  EXPECT_TRUE(openssl_verifies(key->public_key(), "m2", again->sign("m2")));
  std::filesystem::remove_all(dir);
}

TEST(SigningKey, AForkDropsTheNoncesItInherited) {
  SigningKey key = SigningKey::generate();
  key.prepare(4);
  ASSERT_EQ(key.prepared(), 4u);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A nonce used here and again in the parent would give the key away.
    const bool dropped = key.prepared() == 0;
    const std::string sig = key.sign("in the child");
    ::_exit(dropped && sig == key.sign("in the child") ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(key.prepared(), 4u);
  SigningKey moved(std::move(key));
  EXPECT_EQ(moved.prepared(), 4u);
  EXPECT_TRUE(openssl_verifies(moved.public_key(), "after", moved.sign("after")));
}

TEST(PublicKeyPem, RejectsWhatIsNotAnEd25519Key) {
  EXPECT_FALSE(
      parse_public_key_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").ok());
  EXPECT_FALSE(
      parse_public_key_pem("-----BEGIN PUBLIC KEY-----\n!!\n-----END PUBLIC KEY-----\n").ok());
  EXPECT_FALSE(parse_public_key_pem("-----BEGIN PUBLIC KEY-----\nMCow").ok());
}

TEST(Dsse, PaeIsTheSpecsEncoding) {
  // The DSSE spec's own example.
  EXPECT_EQ(pae("http://example.com/HelloWorld", "hello world"),
            "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
}

TEST(Dsse, SignedEnvelopesVerifyAndAnyChangeIsNamed) {
  const SigningKey key = SigningKey::generate();
  const Envelope e = sign_envelope(key, kInTotoPayloadType, R"({"_type":"x"})");
  ASSERT_TRUE(verify_envelope(e, key.public_key(), "report").ok());
  EXPECT_TRUE(openssl_verifies(key.public_key(), pae(e.payload_type, e.payload), e.sig));
  auto round = parse_envelope(envelope_json(e), "report");
  ASSERT_TRUE(round.ok());
  EXPECT_TRUE(verify_envelope(*round, key.public_key(), "report").ok());

  Envelope changed = e;
  changed.payload[3] ^= 1;
  auto bad = verify_envelope(changed, key.public_key(), "report");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().to_string().find("report: the signature does not match"),
            std::string::npos);
  Envelope retyped = e;
  retyped.payload_type = "text/plain";
  EXPECT_FALSE(verify_envelope(retyped, key.public_key(), "report").ok());
  const SigningKey other = SigningKey::generate();
  auto foreign = verify_envelope(e, other.public_key(), "receipt");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().to_string().find("another key"), std::string::npos);
}

std::vector<std::string> vector_leaves() {
  // RFC 6962's test leaves, as the certificate-transparency tests use them.
  const std::vector<std::string> data = {
      "",
      std::string(1, '\0'),
      "\x10",
      "\x20\x21",
      "\x30\x31",
      "\x40\x41\x42\x43",
      "\x50\x51\x52\x53\x54\x55\x56\x57",
      "\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f"};
  std::vector<std::string> out;
  for (const auto& d : data) out.push_back(leaf_hash(d));
  return out;
}

TEST(Merkle, RootsAreRfc6962s) {
  const auto leaves = vector_leaves();
  const char* roots[] = {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                         "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
                         "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
                         "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                         "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
                         "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
                         "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
                         "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
  EXPECT_EQ(to_hex(tree_root(leaves, 0)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  for (uint64_t n = 1; n <= 8; ++n) EXPECT_EQ(to_hex(tree_root(leaves, n)), roots[n - 1]) << n;
}

TEST(Merkle, EveryInclusionAndConsistencyProofVerifiesAndAChangedOneFails) {
  std::vector<std::string> leaves;
  for (int i = 0; i < 37; ++i) leaves.push_back(leaf_hash("event " + std::to_string(i)));
  for (uint64_t n = 1; n <= leaves.size(); ++n) {
    const std::string root = tree_root(leaves, n);
    for (uint64_t i = 0; i < n; ++i) {
      const auto path = inclusion_proof(leaves, i, n);
      ASSERT_TRUE(verify_inclusion(i, n, leaves[i], path, root).ok()) << i << "/" << n;
      if (!path.empty()) {
        auto bent = path;
        bent[0][5] ^= 1;
        EXPECT_FALSE(verify_inclusion(i, n, leaves[i], bent, root).ok());
      }
      EXPECT_FALSE(verify_inclusion(i, n, leaf_hash("forged"), path, root).ok());
      if (n > 1) {
        EXPECT_FALSE(verify_inclusion((i + 1) % n, n, leaves[i], path, root).ok());
      }
    }
    for (uint64_t m = 1; m <= n; ++m) {
      const auto proof = consistency_proof(leaves, m, n);
      const std::string old_root = tree_root(leaves, m);
      ASSERT_TRUE(verify_consistency(m, n, old_root, root, proof).ok()) << m << "->" << n;
      if (m < n) {
        EXPECT_FALSE(verify_consistency(m, n, leaf_hash("x"), root, proof).ok());
        auto bent = proof;
        bent.back()[0] ^= 1;
        EXPECT_FALSE(verify_consistency(m, n, old_root, root, bent).ok());
      }
    }
  }
}

// Kept nodes: every complete subtree's hash in a map, as a store keeps them.
// A root or a proof from them is the one from the leaves, and it reads only
// the nodes nodes_for_* name (a handful, not the leaves).
class KeptNodes final : public MerkleNodes {
 public:
  explicit KeptNodes(const std::vector<std::string>& leaves) {
    for (uint64_t i = 0; i < leaves.size(); ++i) kept[{0, i}] = leaves[i];
    for (unsigned l = 1; (uint64_t{1} << l) <= leaves.size(); ++l)
      for (uint64_t i = 0; (i + 1) << l <= leaves.size(); ++i)
        kept[{l, i}] = node_hash(kept.at({l - 1, 2 * i}), kept.at({l - 1, 2 * i + 1}));
  }
  std::string node(unsigned level, uint64_t index) override {
    read.push_back({level, index});
    return kept.at({level, index});
  }
  std::map<NodeRef, std::string> kept;
  std::vector<NodeRef> read;
};

bool same_refs(const std::vector<NodeRef>& a, const std::vector<NodeRef>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const NodeRef& x, const NodeRef& y) { return !(x < y) && !(y < x); });
}

TEST(Merkle, KeptNodesGiveTheLeavesRootsAndProofsReadingFewNodes) {
  std::vector<std::string> leaves;
  for (int i = 0; i < 70; ++i) leaves.push_back(leaf_hash("event " + std::to_string(i)));
  for (uint64_t n = 1; n <= leaves.size(); ++n) {
    std::vector<std::string> prefix(leaves.begin(), leaves.begin() + static_cast<long>(n));
    KeptNodes kept(prefix);
    kept.read.clear();
    EXPECT_EQ(tree_root(kept, n), tree_root(leaves, n)) << n;
    EXPECT_TRUE(same_refs(kept.read, nodes_for_root(n))) << n;
    EXPECT_LE(kept.read.size(), 7u) << n;  // one per set bit of n
    for (uint64_t i = 0; i < n; ++i) {
      kept.read.clear();
      EXPECT_EQ(inclusion_proof(kept, i, n), inclusion_proof(leaves, i, n)) << i << "/" << n;
      EXPECT_TRUE(same_refs(kept.read, nodes_for_inclusion(i, n))) << i << "/" << n;
      EXPECT_LE(kept.read.size(), 2u * 7u) << i << "/" << n;
    }
    for (uint64_t m = 1; m <= n; ++m) {
      kept.read.clear();
      EXPECT_EQ(consistency_proof(kept, m, n), consistency_proof(leaves, m, n)) << m << "->" << n;
      EXPECT_TRUE(same_refs(kept.read, nodes_for_consistency(m, n))) << m << "->" << n;
    }
  }
}

TEST(Checkpoint, SignedNoteVerifiesAndIsTheC2spFormat) {
  const SigningKey key = SigningKey::generate();
  const Checkpoint cp{"ringfence/test/audit", 12, sha256("root")};
  const std::string note = sign_checkpoint(cp, key);
  EXPECT_EQ(note.substr(0, note.find("\n\n") + 1),
            "ringfence/test/audit\n12\n" + base64_encode(sha256("root")) + "\n");
  EXPECT_NE(note.find("\n\n\xe2\x80\x94 ringfence/test/audit "), std::string::npos);
  auto v = verify_checkpoint(note, key.public_key());
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(v->size, 12u);
  EXPECT_EQ(v->root, cp.root);
  std::string bigger = note;
  bigger.replace(bigger.find("\n12\n"), 4, "\n13\n");
  auto b = verify_checkpoint(bigger, key.public_key());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().to_string().find("changed after it was signed"), std::string::npos);
  EXPECT_FALSE(verify_checkpoint(note, SigningKey::generate().public_key()).ok());
}

// Facts of a sandbox whose every bound held (shaped as native's self-probe says them).
BoundaryFacts strong_facts() {
  BoundaryFacts f;
  f.spec.id = "rf-000000000001";
  f.backend = "native";
  f.inside = json::parse(R"({
    "uid": 1000, "gid": 1000,
    "ns": {"user": 11, "mnt": 12, "pid": 13, "net": 14, "ipc": 15, "uts": 16, "cgroup": 17},
    "uid_map": "      1000     201000          1\n", "gid_map": "      1000     201000          1\n",
    "status": {"CapInh": "0000000000000000", "CapPrm": "0000000000000000",
               "CapEff": "0000000000000000", "CapAmb": "0000000000000000",
               "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
               "Seccomp_filters": "2"},
    "rlimits": {"core": [0, 0], "nofile": [1024, 1024]},
    "mountinfo": "1 0 0:1 / / ro,nosuid - tmpfs tmpfs ro\n2 1 0:2 / /workspace rw,nosuid,nodev - tmpfs tmpfs rw,size=1048576k\n3 1 0:3 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1048576k\n4 1 0:4 / /proc rw,nosuid - proc proc rw\n5 4 0:5 /null /proc/kcore ro master:1 - devtmpfs udev rw\n6 4 0:5 /null /proc/keys ro - devtmpfs udev rw\n7 4 0:5 /null /proc/timer_list ro - devtmpfs udev rw\n8 4 0:5 /null /proc/kallsyms ro - devtmpfs udev rw\n",
    "interfaces": ["lo"],
    "env_keys": ["HOME", "LANG", "PATH"],
    "call_domain": {"landlock_abi": 6, "entered": true},
    "attacks": [{"attack": "mount", "failed": true, "errno": 1, "error": "EPERM"}]})");
  f.host_ns = {{"user", 1}, {"mnt", 2}, {"pid", 3},   {"net", 4},
               {"ipc", 5},  {"uts", 6}, {"cgroup", 7}};
  // As the host reads them from the sandbox's PID 1.
  f.pid1_ns = {{"user", 11}, {"mnt", 12}, {"pid", 13},   {"net", 14},
               {"ipc", 15},  {"uts", 16}, {"cgroup", 17}};
  f.pid1_uid_map = f.pid1_gid_map = "      1000     201000          1\n";
  f.cgroup = {{"memory.max", "536870912"}, {"pids.max", "256"}, {"cpu.max", "100000 100000"}};
  f.seccomp_profile = {"aa", "bb"};
  f.seccomp_loaded = {"aa", "bb"};
  return f;
}

// Replaces `from` (which must be there) in the self-probe's mount table.
void edit_mounts(BoundaryFacts& f, const std::string& from, const std::string& to) {
  std::string table = f.inside["mountinfo"].get<std::string>();
  const size_t at = table.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  f.inside["mountinfo"] = table.replace(at, from.size(), to);
}

std::map<std::string, BoundStatus> by_name(const std::vector<Bound>& bounds) {
  std::map<std::string, BoundStatus> out;
  for (const auto& b : bounds) out[b.name] = b.status;
  return out;
}

// The receipt's statement as a json tree: what receipt_payload writes field
// by field must be exactly its dump.
json receipt_statement(const CallRecord& r) {
  json predicate = {{"call", r.call},
                    {"sandbox", r.sandbox},
                    {"report", {{"sha256", r.report_sha256}}},
                    {"argv", {{"sha256", argv_sha256(r.argv)}, {"count", r.argv.size()}}},
                    {"stdin", {{"sha256", r.stdin_sha256}, {"bytes", r.stdin_bytes}}},
                    {"stdout", {{"sha256", r.stdout_sha256}, {"bytes", r.stdout_bytes}}},
                    {"stderr", {{"sha256", r.stderr_sha256}, {"bytes", r.stderr_bytes}}},
                    {"exit", {{"code", r.exit_code}, {"signal", r.signal}}},
                    {"limits_hit", r.limit.empty() ? json::array() : json::array({r.limit})},
                    {"timed_out", r.timed_out},
                    {"oom_killed", r.oom_killed},
                    {"output_truncated", r.output_truncated},
                    {"egress", r.egress},
                    {"started_at_ms", r.started_ms},
                    {"ended_at_ms", r.ended_ms}};
  return {
      {"_type", kStatementType},
      {"subject", json::array({{{"name", "stdout"}, {"digest", {{"sha256", r.stdout_sha256}}}},
                               {{"name", "stderr"}, {"digest", {{"sha256", r.stderr_sha256}}}}})},
      {"predicateType", kReceiptPredicate},
      {"predicate", predicate}};
}

TEST(Receipt, ThePayloadIsTheStatementsJsonByteForByte) {
  CallRecord r;
  EXPECT_EQ(receipt_payload(r), receipt_statement(r).dump());
  r.call = "42";
  r.sandbox = "sb-\"quoted\"\\back\nline\x01\xc3\xa9";
  r.report_sha256 = sha256_hex("report");
  r.argv = {"sh", "-c", "echo \"hi\""};
  r.stdin_sha256 = sha256_hex("in");
  r.stdin_bytes = 2;
  r.stdout_sha256 = sha256_hex("out");
  r.stdout_bytes = 18446744073709551615ull;
  r.exit_code = -1;
  r.signal = 9;
  r.timed_out = true;
  r.oom_killed = true;
  r.output_truncated = true;
  r.limit = "memory \"512m\"";
  r.egress = {{"policy", "proxy"}, {"allow", {"a.example", "b.example:443"}}};
  r.started_ms = 1764140000000;
  r.ended_ms = -5;
  EXPECT_EQ(receipt_payload(r), receipt_statement(r).dump());
  EXPECT_TRUE(json::parse(receipt_payload(r)).is_object());
}

TEST(MountTable, ParsesTheKernelsLinesAndSkipsWhatIsNotOne) {
  const std::string text =
      "36 35 98:0 /root /mnt\\040dir rw,noatime master:1 shared:2 - ext3 /dev/root "
      "rw,errors=continue\n"
      "\n"
      "garbage\n"
      "1 2 3:4 / /no-dash rw ext4 /dev/x rw\n"
      "1 2 3:4 / /no-fstype rw -\n"
      "  7 1 0:5 / /proc   rw,nosuid - proc proc rw";  // no final newline, extra spaces
  const auto m = parse_mountinfo(text);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].root, "/root");
  EXPECT_EQ(m[0].mount_point, "/mnt\\040dir");  // the kernel's escape, kept
  EXPECT_EQ(m[0].options, "rw,noatime");
  EXPECT_EQ(m[0].fstype, "ext3");
  EXPECT_EQ(m[0].source, "/dev/root");
  EXPECT_EQ(m[0].super_options, "rw,errors=continue");
  EXPECT_EQ(m[1].mount_point, "/proc");
  EXPECT_EQ(m[1].options, "rw,nosuid");
  EXPECT_EQ(m[1].super_options, "rw");
  EXPECT_TRUE(parse_mountinfo("").empty());
}

// A backend without the runner protocol (the fake) starts a call on a thread
// of its own (Sandbox::start_exec's default): a self-probe started ahead is
// gathered all the same, and an ordinary call's output and result come back.
TEST(BoundaryFacts, AProbeStartedAheadIsGatheredOnAnyBackend) {
  auto script = std::make_shared<testing::FakeScript>();
  testing::FakeBackend backend(BackendKind::kNative, script);
  SandboxSpec spec;
  spec.backend = BackendKind::kNative;
  auto sb = backend.create(spec);
  ASSERT_TRUE(sb.ok()) << sb.error().to_string();
  StartedProbe probe = start_self_probe(**sb);
  ASSERT_NE(probe.call, nullptr);
  auto facts = gather_boundary_facts(**sb, std::move(probe));
  ASSERT_TRUE(facts.ok()) << facts.error().to_string();
  EXPECT_TRUE(facts->inside.is_object());
  testing::Captured out;
  ExecCall call;
  call.argv = {"echo", "hi"};
  auto started = (*sb)->start_exec(call, out);
  auto r = started->wait();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(out.out, "echo hi\n");
}

TEST(BoundaryReport, EveryBoundHeldWhenTheFactsSaySo) {
  const auto bounds = judge_bounds(strong_facts());
  for (const auto& b : bounds)
    EXPECT_EQ(b.status, BoundStatus::kHeld) << b.name << ": " << b.evidence.dump();
  EXPECT_EQ(bounds.size(), 24u);
}

TEST(BoundaryReport, EachWeakeningIsNotHeldForExactlyThatBound) {
  struct Case {
    const char* bound;
    std::function<void(BoundaryFacts&)> weaken;
  };
  const std::vector<Case> cases = {
      {"namespace.net", [](BoundaryFacts& f) { f.inside["ns"]["net"] = 4; }},
      {"namespace.user", [](BoundaryFacts& f) { f.inside["ns"]["user"] = 1; }},
      // The inside says otherwise, but the host reads PID 1's: an inside that
      // lies cannot hide a namespace shared with the host, or a map to root.
      {"namespace.pid", [](BoundaryFacts& f) { f.pid1_ns["pid"] = 3; }},
      {"uid", [](BoundaryFacts& f) { f.pid1_uid_map = "1000 0 1\n"; }},
      {"uid",
       [](BoundaryFacts& f) {
         f.inside["uid"] = 0;
         f.inside["uid_map"] = "0 0 4294967295\n";
       }},
      {"capabilities", [](BoundaryFacts& f) { f.inside["status"]["CapEff"] = "0000000000200000"; }},
      {"no_new_privs", [](BoundaryFacts& f) { f.inside["status"]["NoNewPrivs"] = "0"; }},
      {"seccomp", [](BoundaryFacts& f) { f.inside["status"]["Seccomp"] = "0"; }},
      {"seccomp.digest",
       [](BoundaryFacts& f) {
         f.seccomp_loaded = {"cc", "aa"};
       }},
      {"cgroup.memory", [](BoundaryFacts& f) { f.cgroup["memory.max"] = "max"; }},
      {"cgroup.pids", [](BoundaryFacts& f) { f.cgroup["pids.max"] = "4096"; }},
      {"cgroup.cpu", [](BoundaryFacts& f) { f.cgroup["cpu.max"] = "max 100000"; }},
      {"rlimits",
       [](BoundaryFacts& f) {
         f.inside["rlimits"]["nofile"] = {1024, 1048576};
       }},
      {"filesystem.root_readonly",
       [](BoundaryFacts& f) { edit_mounts(f, " / / ro,", " / / rw,"); }},
      {"filesystem.writable",
       [](BoundaryFacts& f) {
         f.inside["mountinfo"] =
             f.inside["mountinfo"].get<std::string>() + "9 1 8:1 /usr /usr rw - ext4 /dev/vda rw\n";
       }},
      {"filesystem.size",
       [](BoundaryFacts& f) {
         edit_mounts(f, "/tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1048576k",
                     "/tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=8388608k");
       }},
      {"filesystem.masked",
       [](BoundaryFacts& f) {
         edit_mounts(f, "5 4 0:5 /null /proc/kcore ro master:1 - devtmpfs udev rw\n", "");
       }},
      {"network",
       [](BoundaryFacts& f) {
         f.inside["interfaces"] = {"eth0", "lo"};
       }},
      {"environment", [](BoundaryFacts& f) { f.inside["env_keys"].push_back("AWS_SECRET"); }},
      {"calls.isolated", [](BoundaryFacts& f) { f.inside["call_domain"]["entered"] = false; }},
      {"calls.isolated", [](BoundaryFacts& f) { f.inside["call_domain"]["landlock_abi"] = 1; }},
      {"self_probe", [](BoundaryFacts& f) { f.inside["attacks"][0]["failed"] = false; }},
  };
  for (const auto& c : cases) {
    BoundaryFacts f = strong_facts();
    c.weaken(f);
    const auto status = by_name(judge_bounds(f));
    for (const auto& [name, s] : status) {
      EXPECT_EQ(s, name == c.bound ? BoundStatus::kNotHeld : BoundStatus::kHeld)
          << "weakened " << c.bound << ", bound " << name;
    }
  }
}

// The mount attack needs a directory of the probe's own; one it could not
// make leaves the attack untried, which proves nothing: unknown, not held.
// Another attack that got through still makes the bound not held.
TEST(BoundaryReport, AnAttackNotTriedLeavesTheSelfProbeUnknown) {
  BoundaryFacts f = strong_facts();
  f.inside["attacks"][0] = {
      {"attack", "mount"}, {"failed", false}, {"tried", false}, {"errno", 28}, {"error", "other"}};
  auto s = by_name(judge_bounds(f));
  EXPECT_EQ(s.at("self_probe"), BoundStatus::kUnknown);
  f.inside["attacks"].push_back({{"attack", "setuid_root"}, {"failed", false}});
  s = by_name(judge_bounds(f));
  EXPECT_EQ(s.at("self_probe"), BoundStatus::kNotHeld);
}

// Only a probe the runner forked is the command child that entered its
// call's Landlock domain; an exec'd one leaves the key out: unknown.
TEST(BoundaryReport, AProbeWithNoCallDomainLeavesCallsIsolatedUnknown) {
  BoundaryFacts f = strong_facts();
  f.inside.erase("call_domain");
  const auto s = by_name(judge_bounds(f));
  EXPECT_EQ(s.at("calls.isolated"), BoundStatus::kUnknown);
  EXPECT_EQ(s.at("self_probe"), BoundStatus::kHeld);
}

TEST(BoundaryReport, AskingForLessIsNotHeldNeverHidden) {
  BoundaryFacts f = strong_facts();
  f.spec.network = NetworkPolicy::kHost;
  f.inside["ns"]["net"] = 4;  // the host's
  f.inside["interfaces"] = {"eth0", "lo"};
  const auto s = by_name(judge_bounds(f));
  EXPECT_EQ(s.at("network"), BoundStatus::kNotHeld);
  EXPECT_EQ(s.at("namespace.net"), BoundStatus::kNotHeld);
  BoundaryFacts remote = strong_facts();
  remote.host_ns.clear();
  remote.pid1_ns.clear();
  remote.pid1_uid_map.clear();
  remote.pid1_gid_map.clear();
  remote.seccomp_loaded.clear();
  remote.seccomp_readback_error = "remote";
  const auto r = by_name(judge_bounds(remote));
  EXPECT_EQ(r.at("namespace.pid"), BoundStatus::kUnknown);
  EXPECT_EQ(r.at("seccomp.digest"), BoundStatus::kUnknown);
}

TEST(BoundaryReport, TheStatementNamesEnvironmentKeysNeverValues) {
  BoundaryFacts f = strong_facts();
  f.spec.env["API_TOKEN"] = "s3cr3t-value-never-in-a-report";
  const json st = report_statement(f, judge_bounds(f));
  EXPECT_EQ(st["_type"], "https://in-toto.io/Statement/v1");
  EXPECT_EQ(st["predicateType"], kReportPredicate);
  EXPECT_EQ(st.dump().find("s3cr3t"), std::string::npos);
  EXPECT_NE(st.dump().find("API_TOKEN"), std::string::npos);
}

// The receipt file, end to end through a store, and every byte that matters changed.
class ReceiptFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    target_ = rf::testing::fresh_store_target(dir_ + "/store.db");  // both engines
    auto st = store::Store::open(target_);
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    store_ = std::move(*st);
    for (int i = 0; i < 5; ++i) {  // events before ours: the proofs are not trivial
      store::AuditEvent e;
      e.kind = "test.filler";
      e.actor = "test";
      ASSERT_TRUE(store::AuditLog(*store_).append(e).ok());
    }
    ProofLog log(*store_, key_, "ringfence/test/audit");
    const BoundaryFacts facts = strong_facts();
    auto report = log.record_report(report_statement(facts, judge_bounds(facts)), {});
    ASSERT_TRUE(report.ok()) << report.error().to_string();
    CallRecord call;
    call.call = "exec";
    call.sandbox = facts.spec.id;
    call.report_sha256 = report->sha256;
    call.argv = {"echo", "hi"};
    call.stdout_sha256 = sha256_hex("hi\n");
    call.stdout_bytes = 3;
    auto receipt = log.record_receipt(call, report->seq, {});
    ASSERT_TRUE(receipt.ok()) << receipt.error().to_string();
    auto b = log.bundle(receipt->seq, report->seq);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    bundle_ = *b;
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string problem(const json& bundle) {
    auto v = verify_bundle(bundle, key_.public_key());
    return v.ok() ? std::string() : v.error().to_string();
  }

  std::string dir_, target_;
  std::unique_ptr<store::Store> store_;
  SigningKey key_ = SigningKey::generate();
  json bundle_;
};

TEST_F(ReceiptFile, VerifiesOfflineWithOnlyThePublicKey) {
  auto v = verify_bundle(bundle_, key_.public_key());
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(v->bounds.held, 24);
  EXPECT_TRUE(v->bounds.not_held.empty());
  EXPECT_EQ(v->log_size, 7u);
  EXPECT_EQ(v->receipt["predicate"]["stdout"]["sha256"], sha256_hex("hi\n"));
}

// A busy worker files its receipts several to a transaction: each still gets
// an event of its own, in order, naming its call, and each verifies.
TEST_F(ReceiptFile, ReceiptsFiledTogetherEachHaveTheirOwnEventAndVerify) {
  ProofLog log(*store_, key_, "ringfence/test/audit");
  const json first =
      json::parse(bundle_["log"]["report_entry"]["event"]["detail_json"].get<std::string>());
  const int64_t report_seq = bundle_["log"]["report_entry"]["event"]["seq"];
  std::vector<Signed> batch;
  for (int64_t call_id = 100; call_id < 103; ++call_id) {
    CallRecord call;
    call.call = std::to_string(call_id);
    call.sandbox = strong_facts().spec.id;
    call.report_sha256 = first["sha256"];
    call.argv = {"echo", std::to_string(call_id)};
    EventContext ctx;
    ctx.call_id = call_id;
    batch.push_back(log.sign_receipt(call, report_seq, ctx));
  }
  auto filed = log.file(batch);
  ASSERT_TRUE(filed.ok()) << filed.error().to_string();
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t call_id = 100 + static_cast<int64_t>(i);
    auto seq = log.receipt_of_call(call_id);
    ASSERT_TRUE(seq.ok() && *seq) << call_id;
    EXPECT_EQ(**seq, batch[i].recorded.seq) << call_id;
    if (i > 0) {
      EXPECT_EQ(batch[i].recorded.seq, batch[i - 1].recorded.seq + 1);
    }
    auto b = log.bundle_for_call(call_id);
    ASSERT_TRUE(b.ok() && *b) << call_id;
    EXPECT_EQ(problem(**b), "") << call_id;
    auto v = verify_bundle(**b, key_.public_key());
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->receipt["predicate"]["call"], std::to_string(call_id));
  }
  std::vector<Signed> none;
  EXPECT_TRUE(log.file(none).ok());
}

// The log's tree is kept in the store and extended as the log grows: each
// checkpoint and proof is the one the leaves give, whichever store handle
// extended it last, and a kept node changed by hand makes proofs fail to
// verify rather than pass.
TEST_F(ReceiptFile, TheKeptTreeGrowsWithTheLogAndIsTheLeavesTree) {
  ProofLog log(*store_, key_, "ringfence/test/audit");
  auto other = store::Store::open(target_);  // another writer of the same store
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  ProofLog other_log(**other, key_, "ringfence/test/audit");
  const int64_t receipt_seq = bundle_["log"]["receipt_entry"]["event"]["seq"];
  const int64_t report_seq = bundle_["log"]["report_entry"]["event"]["seq"];
  for (int round = 0; round < 6; ++round) {
    std::vector<store::AuditEvent> more(static_cast<size_t>(round * 7 + 1));
    for (auto& e : more) {
      e.kind = "test.filler";
      e.actor = "test";
    }
    ASSERT_TRUE(store::AuditLog(round % 2 ? **other : *store_).append_all(more).ok());
    ProofLog& by = round % 2 ? other_log : log;
    auto b = by.bundle(receipt_seq, report_seq);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    EXPECT_EQ(problem(*b), "") << round;
    // The checkpoint's root is the leaves' root.
    store::AuditLog audit(*store_);
    auto hashes = audit.hashes_between(0, *audit.size());
    ASSERT_TRUE(hashes.ok());
    std::vector<std::string> leaves;
    for (const auto& h : *hashes) leaves.push_back(leaf_hash(*from_hex(h)));
    auto cp = verify_checkpoint((*b)["log"]["checkpoint"].get<std::string>(), key_.public_key());
    ASSERT_TRUE(cp.ok()) << cp.error().to_string();
    EXPECT_EQ(cp->size, leaves.size());
    EXPECT_EQ(cp->root, tree_root(leaves, leaves.size())) << round;
    auto c = by.consistency(7, 0);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    std::vector<std::string> proof;
    for (const auto& h : (*c)["consistency"]) proof.push_back(*from_hex(h.get<std::string>()));
    EXPECT_TRUE(verify_consistency(7, leaves.size(), tree_root(leaves, 7), cp->root, proof).ok());
  }
  auto kept = store::AuditLog(*store_).merkle_leaves();
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, *store::AuditLog(*store_).size());
  // A kept node changed in the file, as someone with write access could:
  // what is built from it no longer verifies against the leaves' proof path.
  auto s = store_->locked([&](store::Db& db) {
    // The largest complete subtree: the checkpoint's root reads it.
    return db.exec(
        "UPDATE audit_merkle SET hash = CASE WHEN substr(hash, 1, 1) = 'f' THEN 'e' ELSE 'f' END "
        "|| substr(hash, 2) WHERE level = (SELECT MAX(level) FROM audit_merkle)");
  });
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto b = log.bundle(receipt_seq, report_seq);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_NE(problem(*b), "");
}

TEST_F(ReceiptFile, OneByteChangedAnywhereFailsAndSaysWhat) {
  auto flip_payload = [](json& env) {
    std::string p = *base64_decode(env["payload"].get<std::string>());
    p[p.find("\"exit\"") + 2] ^= 1;
    env["payload"] = base64_encode(p);
  };
  {
    json b = bundle_;
    std::string p = *base64_decode(b["receipt"]["payload"].get<std::string>());
    p.replace(p.find(sha256_hex("hi\n")), 1, p[p.find(sha256_hex("hi\n"))] == '0' ? "1" : "0");
    b["receipt"]["payload"] = base64_encode(p);
    EXPECT_NE(problem(b).find("receipt: the signature does not match"), std::string::npos)
        << problem(b);
  }
  {
    json b = bundle_;
    std::string p = *base64_decode(b["report"]["payload"].get<std::string>());
    p.replace(p.find("\"held\""), 6, "\"hald\"");
    b["report"]["payload"] = base64_encode(p);
    EXPECT_NE(problem(b).find("report: the signature does not match"), std::string::npos)
        << problem(b);
  }
  {
    json b = bundle_;
    std::string note = b["log"]["checkpoint"];
    note.replace(note.find("\n7\n"), 3, "\n8\n");
    b["log"]["checkpoint"] = note;
    EXPECT_NE(problem(b).find("log checkpoint"), std::string::npos) << problem(b);
  }
  {
    json b = bundle_;
    std::string d = b["log"]["receipt_entry"]["event"]["detail_json"];
    d[d.size() - 2] ^= 1;
    b["log"]["receipt_entry"]["event"]["detail_json"] = d;
    EXPECT_NE(problem(b).find("its hash does not match its fields"), std::string::npos)
        << problem(b);
  }
  {
    json b = bundle_;
    std::string h = b["log"]["report_entry"]["inclusion"][0];
    h[0] = h[0] == 'a' ? 'b' : 'a';
    b["log"]["report_entry"]["inclusion"][0] = h;
    EXPECT_NE(problem(b).find("does not lead to the checkpoint's root"), std::string::npos)
        << problem(b);
  }
  {
    json b = bundle_;
    b["log"]["receipt_entry"]["index"] = 2;
    EXPECT_NE(problem(b).find("index"), std::string::npos) << problem(b);
  }
  {
    json b = bundle_;
    flip_payload(b["receipt"]);
    EXPECT_NE(problem(b), "");
  }
  // Another worker's key: nothing verifies.
  auto other = verify_bundle(bundle_, SigningKey::generate().public_key());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().to_string().find("another key"), std::string::npos);
}

TEST_F(ReceiptFile, AReportSwappedForAnotherSignedOneIsNamed) {
  ProofLog log(*store_, key_, "ringfence/test/audit");
  BoundaryFacts weak = strong_facts();
  weak.spec.network = NetworkPolicy::kHost;
  auto other = log.record_report(report_statement(weak, judge_bounds(weak)), {});
  ASSERT_TRUE(other.ok());
  json b = bundle_;
  b["report"] = envelope_json(other->envelope);
  EXPECT_NE(problem(b).find("receipt: it names report"), std::string::npos) << problem(b);
}

}  // namespace
}  // namespace rf::proof
