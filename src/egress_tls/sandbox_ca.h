// A sandbox's own certificate authority (issue 13, the `proxy` delivery). Made
// when the sandbox starts (spec tls_intercept); its key never leaves this
// process's memory. It signs a certificate for each host the proxy terminates
// TLS for, on first use, kept for the sandbox's life.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/result.h"
#include "net/egress_policy.h"
#include "tls_stream/tls_stream.h"

namespace rf::egress_tls {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const { X509_free(x); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

// A certificate and its key for one host (shared: a connection holds it while
// it handshakes).
struct Leaf {
  Cert cert;
  EVP_PKEY* key = nullptr;  // the CA's leaf key, which outlives every leaf
  std::chrono::system_clock::time_point not_after;
};

class SandboxCa {
 public:
  // ECDSA P-256, valid from an hour ago for 30 days; named after the sandbox.
  static Result<std::unique_ptr<SandboxCa>> make(const std::string& sandbox_id);
  const std::string& pem() const { return pem_; }
  // The certificate for `host` (a name or an IP literal), signed by this CA,
  // made on first use and again when it is within a day of expiring.
  Result<std::shared_ptr<const Leaf>> leaf_for(const std::string& host);

 private:
  SandboxCa() = default;
  Key ca_key_, leaf_key_;
  Cert ca_cert_;
  std::string pem_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Leaf>> leaves_;
};

using tls::openssl_errors;

}  // namespace rf::egress_tls
