#include "egress_tls/sandbox_ca.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

namespace rf::egress_tls {
namespace {

using std::chrono::hours;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

Error ssl_error(const std::string& where) { return make_error(where, openssl_errors()); }

Status set_serial(X509* x) {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) return ssl_error("serial");
  raw[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(raw, sizeof raw, nullptr);
  if (bn == nullptr) return ssl_error("serial");
  ASN1_INTEGER* serial = BN_to_ASN1_INTEGER(bn, nullptr);
  BN_free(bn);
  if (serial == nullptr) return ssl_error("serial");
  const int ok = X509_set_serialNumber(x, serial);
  ASN1_INTEGER_free(serial);
  return ok == 1 ? ok_status() : ssl_error("serial");
}

Status add_ext(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return ssl_error(std::string("extension ") + OBJ_nid2sn(nid));
  const int ok = X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? ok_status() : ssl_error(std::string("extension ") + OBJ_nid2sn(nid));
}

Result<Cert> new_cert(EVP_PKEY* pub, const std::string& cn, std::chrono::seconds valid_for) {
  Cert x(X509_new());
  if (!x || X509_set_version(x.get(), 2) != 1) return ssl_error("certificate");
  RF_TRY(set_serial(x.get()));
  if (X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(x.get()), static_cast<long>(valid_for.count())) ==
          nullptr ||
      X509_set_pubkey(x.get(), pub) != 1) {
    return ssl_error("certificate");
  }
  X509_NAME* name = X509_get_subject_name(x.get());
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("ringfence"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return ssl_error("certificate name");
  }
  return x;
}

}  // namespace

Result<std::unique_ptr<SandboxCa>> SandboxCa::make(const std::string& sandbox_id) {
  std::unique_ptr<SandboxCa> ca(new SandboxCa());
  ca->ca_key_.reset(EVP_EC_gen("P-256"));
  ca->leaf_key_.reset(EVP_EC_gen("P-256"));
  if (!ca->ca_key_ || !ca->leaf_key_) return ssl_error("CA key");
  auto cert =
      new_cert(ca->ca_key_.get(), "ringfence sandbox " + sandbox_id, std::chrono::hours(24 * 30));
  if (!cert) return cert.take_error();
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) return ssl_error("CA issuer");
  RF_TRY(add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  RF_TRY(add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign"));
  RF_TRY(add_ext(x, x, NID_subject_key_identifier, "hash"));
  if (X509_sign(x, ca->ca_key_.get(), EVP_sha256()) == 0) return ssl_error("CA sign");
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1) return ssl_error("CA PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  ca->pem_.assign(data, static_cast<size_t>(n));
  ca->ca_cert_ = std::move(*cert);
  return ca;
}

Result<std::shared_ptr<const Leaf>> SandboxCa::leaf_for(const std::string& host) {
  const auto now = std::chrono::system_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = leaves_.find(host);
    if (it != leaves_.end() && it->second->not_after - now > hours(24)) return it->second;
  }
  constexpr auto kValid = hours(24 * 7);
  auto cert = new_cert(leaf_key_.get(), host, kValid);
  if (!cert) return cert.take_error();
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(ca_cert_.get())) != 1) {
    return ssl_error("leaf issuer");
  }
  const bool ip = net::parse_ip_literal(host).has_value();
  const std::string san = (ip ? "IP:" : "DNS:") + host;
  RF_TRY(add_ext(x, ca_cert_.get(), NID_subject_alt_name, san.c_str()));
  RF_TRY(add_ext(x, ca_cert_.get(), NID_basic_constraints, "critical,CA:FALSE"));
  RF_TRY(add_ext(x, ca_cert_.get(), NID_key_usage, "critical,digitalSignature"));
  RF_TRY(add_ext(x, ca_cert_.get(), NID_ext_key_usage, "serverAuth"));
  RF_TRY(add_ext(x, ca_cert_.get(), NID_subject_key_identifier, "hash"));
  RF_TRY(add_ext(x, ca_cert_.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(x, ca_key_.get(), EVP_sha256()) == 0) return ssl_error("leaf sign");
  auto leaf = std::make_shared<Leaf>();
  leaf->cert = std::move(*cert);
  leaf->key = leaf_key_.get();
  leaf->not_after = now + kValid - hours(1);
  std::lock_guard lock(mu_);
  leaves_[host] = leaf;
  return std::shared_ptr<const Leaf>(std::move(leaf));
}

}  // namespace rf::egress_tls
