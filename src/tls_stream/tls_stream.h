// A blocking byte stream over a connected socket, plain or TLS, for the
// helpers that relay TLS (ringfence-egress-tls, ringfence-serve-tls): reads
// that never wait for a second record, so a relay polling both ends never
// blocks on one while the other has data; writes whole; close_notify then the
// write half. With OpenSSL's error queue and failures in words.
#pragma once

#include <openssl/ssl.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

namespace rf::tls {

class Side {
 public:
  explicit Side(int fd, SSL* ssl = nullptr) : fd_(fd), ssl_(ssl) {}
  ~Side();  // frees the TLS state; closes the socket only if it owns it (keep())
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }
  // Decrypted bytes already buffered (poll() does not see them).
  bool pending() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }
  // > 0: bytes; 0: the end of the stream; kAgain: a TLS record with no data
  // came (a session ticket, a key update): poll again; < 0 otherwise: an
  // error, said in *error. One call never waits for a second record, so a
  // relay polling both ends never blocks on one while the other has data.
  static constexpr ssize_t kAgain = -2;
  ssize_t read(char* buf, size_t n, std::string* error);
  // read() until data, the end or an error (never kAgain).
  ssize_t read_some(char* buf, size_t n, std::string* error);
  bool write_all(std::string_view data, std::string* error);
  // No more from this side: TLS close_notify, then the socket's write half.
  void close_write();
  // The side outlives the connection that brought its socket (an upstream
  // kept for the next request): it takes a duplicate of the socket, which it
  // owns from now on. False when the socket cannot be duplicated.
  bool keep();

 private:
  int fd_;
  SSL* ssl_;
  bool write_closed_ = false;
  bool owns_fd_ = false;
};

// OpenSSL's error queue as text ("error:0A000086:SSL routines::certificate
// verify failed"), emptied.
std::string openssl_errors();
// The result of a failed SSL call (rc), in words: timed out, closed by the
// peer, a certificate that did not verify, or OpenSSL's own errors.
std::string failure(SSL* ssl, int rc, const char* what);
// An ALPN select callback for a server that speaks HTTP/1.1 only: it picks
// "http/1.1", and a client that offers only h2 fails the handshake.
int select_http11(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                  const unsigned char* in, unsigned int inlen, void* arg);
// SO_RCVTIMEO and SO_SNDTIMEO of `fd` (0: none), for a blocking handshake.
void set_timeouts(int fd, std::chrono::milliseconds t);

}  // namespace rf::tls
