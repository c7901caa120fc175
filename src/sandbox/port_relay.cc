#include "sandbox/port_relay.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include "core/io.h"

namespace rf {

Status relay_port_answer(Sandbox& sandbox, int port, const std::string& request, bool head_request,
                         const PortAnswerSink& sink, bool* head_told) {
  *head_told = false;
  uint32_t id = 0;
  bool left = false;  // the client is gone, or the answer is whole: nothing more goes on
  auto close_port = [&] {
    if (left) return;
    left = true;
    if (id != 0) (void)sandbox.port_close(id);
  };
  bool client_gone = false;
  PortAnswerStream stream(
      [&](int status, HeaderList&& headers) {
        *head_told = true;
        if (!sink.head(status, std::move(headers))) {
          client_gone = true;
          close_port();
        }
      },
      [&](std::string_view bytes) {
        if (!left && !sink.body(bytes)) {
          client_gone = true;
          close_port();
        }
      },
      head_request);
  std::optional<Error> unreadable;
  Status s = sandbox.port_exchange(
      port, request,
      [&](std::string_view bytes) {
        if (left) return;
        if (auto fed = stream.feed(bytes); !fed) {
          unreadable = fed.error();
          close_port();
        } else if (stream.done()) {
          close_port();  // a port that keeps its connection open past its answer
        }
      },
      0, [&](uint32_t opened) { id = opened; });
  if (unreadable) return *unreadable;
  if (client_gone) return make_error("port " + std::to_string(port), "the client left");
  if (stream.done()) return ok_status();
  if (!s) return s;
  return stream.finish();
}

Status relay_port_upgrade(Sandbox& sandbox, int port, const std::string& request, int client_fd,
                          std::string early, int stop_fd, int write_timeout_ms) {
  std::atomic<bool> over{false};
  std::atomic<uint32_t> id{0};
  std::thread upstream;  // the client's bytes to the port
  Status s = sandbox.port_exchange(
      port, request,
      [&](std::string_view bytes) {
        if (over.load()) return;
        if (!send_all_within(client_fd, bytes, write_timeout_ms)) {
          over = true;
          (void)sandbox.port_close(id.load());
        }
      },
      0,
      [&](uint32_t opened) {
        id = opened;
        upstream = std::thread([&sandbox, &over, &early, client_fd, stop_fd, opened] {
          bool ok = early.empty() || sandbox.port_input(opened, early).ok();
          static constexpr size_t kPiece = 64 * 1024;
          std::string buf(kPiece, '\0');
          while (ok && !over.load()) {
            pollfd fds[2] = {{client_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
            const int r = ::poll(fds, stop_fd >= 0 ? 2 : 1, -1);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 || (stop_fd >= 0 && (fds[1].revents & POLLIN))) break;
            const ssize_t n = ::recv(client_fd, buf.data(), buf.size(), MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) break;
            ok = sandbox.port_input(opened, std::string_view(buf.data(), static_cast<size_t>(n)))
                     .ok();
          }
          // The client left (or the server stops): the port's connection closes,
          // and its port_end ends the exchange.
          if (!over.exchange(true)) (void)sandbox.port_close(opened);
        });
      });
  // The port closed (or never opened): the client's side ends too, which
  // wakes the thread reading it.
  over = true;
  ::shutdown(client_fd, SHUT_RDWR);
  if (upstream.joinable()) upstream.join();
  return s;
}

Result<std::vector<ListeningPort>> listening_ports(Sandbox& sandbox) {
  auto v4 = sandbox.read_file("/proc/net/tcp");
  if (!v4) return v4.take_error();
  std::vector<ListeningPort> all = parse_listening_ports(*v4, false);
  // No IPv6 in the sandbox's network: no tcp6 file, and nothing listens there.
  if (auto v6 = sandbox.read_file("/proc/net/tcp6")) {
    for (auto& p : parse_listening_ports(*v6, true)) {
      if (std::none_of(all.begin(), all.end(),
                       [&](const ListeningPort& l) { return l.port == p.port; })) {
        all.push_back(std::move(p));
      }
    }
  }
  std::sort(all.begin(), all.end(),
            [](const ListeningPort& a, const ListeningPort& b) { return a.port < b.port; });
  return all;
}

}  // namespace rf
