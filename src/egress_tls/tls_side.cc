#include "egress_tls/tls_side.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rf::egress_tls {

using tls::failure;
using tls::set_timeouts;
namespace {

constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// Where an SSL's upstream key ("host:port") and its contexts are kept.
struct SessionKey {
  TlsContexts* owner;
  std::string key;
};
void free_session_key(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<SessionKey*>(ptr);
}
// The SSL owns its key: TLS 1.3 tickets arrive after the handshake, while the
// connection is read.
int session_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &free_session_key);
  return index;
}

// A BIO that reads `prefix` first, then the socket; writes go to the socket.
struct PrefixBio {
  int fd;
  std::string prefix;
  size_t off = 0;
};

int prefix_read(BIO* b, char* out, int n) {
  auto* p = static_cast<PrefixBio*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  if (p->off < p->prefix.size()) {
    const size_t k = std::min(static_cast<size_t>(n), p->prefix.size() - p->off);
    std::memcpy(out, p->prefix.data() + p->off, k);
    p->off += k;
    return static_cast<int>(k);
  }
  for (;;) {
    const ssize_t r = ::read(p->fd, out, static_cast<size_t>(n));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
    return static_cast<int>(r);
  }
}

int prefix_write(BIO* b, const char* in, int n) {
  auto* p = static_cast<PrefixBio*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t w = ::send(p->fd, in, static_cast<size_t>(n), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
    return static_cast<int>(w);
  }
}

long prefix_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int prefix_destroy(BIO* b) {
  delete static_cast<PrefixBio*>(BIO_get_data(b));
  BIO_set_data(b, nullptr);
  return 1;
}

BIO* prefix_bio(int fd, std::string_view prefix) {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rf prefix fd");
    BIO_meth_set_read(m, prefix_read);
    BIO_meth_set_write(m, prefix_write);
    BIO_meth_set_ctrl(m, prefix_ctrl);
    BIO_meth_set_destroy(m, prefix_destroy);
    return m;
  }();
  BIO* b = BIO_new(method);
  if (b == nullptr) return nullptr;
  BIO_set_data(b, new PrefixBio{fd, std::string(prefix)});
  BIO_set_init(b, 1);
  return b;
}

}  // namespace

Result<std::unique_ptr<TlsContexts>> TlsContexts::make(const std::string& ca_file) {
  std::unique_ptr<TlsContexts> t(new TlsContexts());
  t->client_ = SSL_CTX_new(TLS_client_method());
  t->server_ = SSL_CTX_new(TLS_server_method());
  if (t->client_ == nullptr || t->server_ == nullptr) {
    return make_error("TLS", openssl_errors());
  }
  for (SSL_CTX* ctx : {t->client_, t->server_}) {
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // SSL_read returns after a record with no data instead of waiting for
    // the next one: a relay that polled one end must not block on it.
    SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
    // HTTP/1.x closed without close_notify is the end of the stream, as
    // curl and browsers read it (the response's framing says if it is whole).
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  }
  SSL_CTX_set_verify(t->client_, SSL_VERIFY_PEER, nullptr);
  const int loaded = ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(t->client_)
                         : SSL_CTX_load_verify_locations(t->client_, ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return make_error(ca_file.empty() ? "the system's CAs" : ca_file,
                      "cannot load the CAs upstreams are verified against: " + openssl_errors());
  }
  SSL_CTX_set_alpn_protos(t->client_, kAlpn, sizeof kAlpn);
  SSL_CTX_set_session_cache_mode(t->client_,
                                 SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(t->client_, &TlsContexts::on_new_session);
  // Toward sandboxes: no session to resume (nothing of one sandbox's
  // handshakes carries over to another), HTTP/1.1 only.
  SSL_CTX_set_options(t->server_, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(t->server_, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(t->server_, 0);
  // HTTP/1.1 or nothing: the proxy reads heads.
  SSL_CTX_set_alpn_select_cb(t->server_, &tls::select_http11, nullptr);
  return t;
}

TlsContexts::~TlsContexts() {
  for (auto& [_, s] : sessions_) SSL_SESSION_free(s);
  if (client_ != nullptr) SSL_CTX_free(client_);
  if (server_ != nullptr) SSL_CTX_free(server_);
}

int TlsContexts::on_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* key = static_cast<SessionKey*>(SSL_get_ex_data(ssl, session_index()));
  if (key == nullptr) return 0;
  std::lock_guard lock(key->owner->mu_);
  SSL_SESSION*& slot = key->owner->sessions_[key->key];
  if (slot != nullptr) SSL_SESSION_free(slot);
  slot = session;
  return 1;  // the reference is ours now
}

Result<std::unique_ptr<Side>> TlsContexts::connect(int fd, const net::Authority& target,
                                                   std::chrono::milliseconds timeout) {
  SSL* ssl = SSL_new(client_);
  if (ssl == nullptr) return make_error("TLS", openssl_errors());
  auto side = std::make_unique<Side>(fd, ssl);
  const std::string key = target.host + ":" + std::to_string(target.port);
  SSL_set_ex_data(ssl, session_index(), new SessionKey{this, key});
  const bool ip = net::parse_ip_literal(target.host).has_value();
  if (ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), target.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, target.host.c_str());
    SSL_set1_host(ssl, target.host.c_str());
  }
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(key);
    if (it != sessions_.end()) SSL_set_session(ssl, it->second);
  }
  SSL_set_fd(ssl, fd);
  set_timeouts(fd, timeout);
  ERR_clear_error();
  const int rc = SSL_connect(ssl);
  if (rc != 1) return make_error(key, failure(ssl, rc, "TLS to the upstream"));
  set_timeouts(fd, std::chrono::milliseconds(0));
  return side;
}

Result<std::unique_ptr<Side>> TlsContexts::accept(int fd, std::string_view prefix, const Leaf& leaf,
                                                  std::chrono::milliseconds timeout,
                                                  std::string* sni) {
  SSL* ssl = SSL_new(server_);
  if (ssl == nullptr) return make_error("TLS", openssl_errors());
  auto side = std::make_unique<Side>(fd, ssl);
  if (SSL_use_certificate(ssl, leaf.cert.get()) != 1 || SSL_use_PrivateKey(ssl, leaf.key) != 1) {
    return make_error("TLS", openssl_errors());
  }
  if (prefix.empty()) {
    SSL_set_fd(ssl, fd);
  } else {
    BIO* bio = prefix_bio(fd, prefix);
    if (bio == nullptr) return make_error("TLS", openssl_errors());
    SSL_set_bio(ssl, bio, bio);  // one BIO both ways: one reference taken
  }
  set_timeouts(fd, timeout);
  ERR_clear_error();
  const int rc = SSL_accept(ssl);
  if (rc != 1) return make_error("TLS from the sandbox", failure(ssl, rc, "handshake"));
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  *sni = name != nullptr ? name : "";
  set_timeouts(fd, std::chrono::milliseconds(0));
  return side;
}

}  // namespace rf::egress_tls
