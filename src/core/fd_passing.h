// Descriptors sent and received beside bytes on a unix socket (SCM_RIGHTS):
// the runner handing a call to its supervisor, the egress proxy handing a
// connection to ringfence-egress-tls.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf {

// The most descriptors one message carries.
constexpr size_t kMaxPassedFds = 8;

// One sendmsg of `data` with `fds` attached (at most kMaxPassedFds), retried
// on EINTR, with MSG_NOSIGNAL. Returns the bytes sent: on a stream socket
// possibly fewer than data.size(), the descriptors going with the first.
Result<size_t> send_with_fds(int sock, std::string_view data, std::span<const int> fds,
                             const char* where);

struct ReceivedBytes {
  size_t bytes = 0;           // 0: the peer closed
  bool cut = false;           // bytes or descriptors were dropped (MSG_TRUNC, MSG_CTRUNC)
  std::vector<UniqueFd> fds;  // close-on-exec
};

// One recvmsg into `buf`, retried on EINTR, with the descriptors that came
// with those bytes.
Result<ReceivedBytes> receive_with_fds(int sock, std::span<char> buf, const char* where);

}  // namespace rf
