#include "egress_tls/control.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/fd_passing.h"

namespace rf::egress_tls {

using namespace proxy::edge;

void Control::serve() {
  std::vector<char> buf(kMaxMessage + 1);
  for (;;) {
    auto got = receive_with_fds(fd_, buf, "ringfence-egress-tls: receive");
    if (!got || got->bytes == 0) break;  // the proxy is gone
    if (got->cut) {
      std::fprintf(stderr, "ringfence-egress-tls: a message was cut short; dropped\n");
      continue;
    }
    std::vector<UniqueFd> fds = std::move(got->fds);
    const size_t n = got->bytes;
    auto m = decode(std::string_view(buf.data(), n));
    if (!m) {
      std::fprintf(stderr, "ringfence-egress-tls: %s\n", m.error().to_string().c_str());
      continue;
    }
    on_message(std::move(*m), std::move(fds));
    reap(false);
  }
  end_connections_of("");
  reap(true);
}

void Control::on_message(Message message, std::vector<UniqueFd> fds) {
  if (auto* ca = std::get_if<CaRequest>(&message)) {
    std::shared_ptr<SandboxCa> made;
    {
      std::lock_guard lock(mu_);
      auto it = sandboxes_.find(ca->sandbox);
      if (it != sandboxes_.end() && it->second->ca) made = it->second->ca;
    }
    CaAnswer answer{ca->sandbox, "", ""};
    if (!made) {
      auto fresh = SandboxCa::make(ca->sandbox);
      if (!fresh) {
        answer.error = fresh.error().to_string();
      } else {
        made = std::move(*fresh);
        std::lock_guard lock(mu_);
        auto entry = std::make_shared<SandboxEntry>();
        if (auto it = sandboxes_.find(ca->sandbox); it != sandboxes_.end()) {
          entry->creds = it->second->creds;
        }
        entry->ca = made;
        sandboxes_[ca->sandbox] = std::move(entry);
      }
    }
    if (made) answer.pem = made->pem();
    send(answer);
    return;
  }
  if (auto* bind = std::get_if<Bind>(&message)) {
    std::lock_guard lock(mu_);
    auto entry = std::make_shared<SandboxEntry>();
    if (auto it = sandboxes_.find(bind->sandbox); it != sandboxes_.end()) {
      entry->ca = it->second->ca;
    }
    entry->creds = std::move(bind->creds);
    sandboxes_[bind->sandbox] = std::move(entry);
    return;
  }
  if (auto* forget = std::get_if<Forget>(&message)) {
    std::shared_ptr<UpstreamPool> pool;
    {
      std::lock_guard lock(mu_);
      sandboxes_.erase(forget->sandbox);
      if (auto it = pools_.find(forget->sandbox); it != pools_.end()) {
        pool = std::move(it->second);
        pools_.erase(it);
      }
    }
    if (pool) pool->close();
    end_connections_of(forget->sandbox);
    return;
  }
  if (auto* conn = std::get_if<Conn>(&message)) {
    if (fds.size() != 2) {
      std::fprintf(stderr, "ringfence-egress-tls: conn %llu came with %zu fds, not 2\n",
                   static_cast<unsigned long long>(conn->id), fds.size());
      Done d;
      d.id = conn->id;
      d.outcome = "bad_request";
      d.error = "handed over without its two connections";
      send(d);
      return;
    }
    start(std::move(*conn), std::move(fds[0]), std::move(fds[1]));
    return;
  }
  std::fprintf(stderr, "ringfence-egress-tls: a message only the proxy takes; dropped\n");
}

void Control::send(const Message& message) {
  const std::string bytes = encode(message);
  std::lock_guard lock(send_mu_);
  while (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void Control::start(Conn conn, UniqueFd client, UniqueFd upstream) {
  auto live = std::make_unique<Live>();
  live->sandbox = conn.sandbox;
  live->client = std::move(client);
  live->upstream = std::move(upstream);
  Live* l = live.get();
  const uint64_t id = conn.id;
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(conn.sandbox);
  EdgeConnectionInput in;
  in.sandbox = it == sandboxes_.end() ? nullptr : it->second;
  if (in.sandbox) {
    auto& pool = pools_[conn.sandbox];
    if (!pool) pool = std::make_shared<UpstreamPool>();
    in.pool = pool;
  }
  in.client_fd = l->client.get();
  in.upstream_fd = l->upstream.get();
  in.tls = tls_.get();
  in.conn = std::move(conn);
  try {
    l->thread = std::thread([this, l, in = std::move(in)] {
      bool kept = false;
      const Done d = run_edge_connection(in, &kept);
      // Shut down, not closed: the fd numbers stay ours until the join. An
      // upstream connection kept for the next request lives on in the pool.
      ::shutdown(in.client_fd, SHUT_RDWR);
      if (!kept) ::shutdown(in.upstream_fd, SHUT_RDWR);
      l->upstream_kept = kept;
      send(d);
      l->finished = true;
    });
  } catch (const std::system_error& e) {
    Done d;
    d.id = id;
    d.outcome = "upstream_failed";
    d.error = std::string("no thread for the connection: ") + e.what();
    send(d);
    return;
  }
  live_.push_back(std::move(live));
}

void Control::end_connections_of(const std::string& sandbox) {
  std::lock_guard lock(mu_);
  for (auto& l : live_) {
    if (!sandbox.empty() && l->sandbox != sandbox) continue;
    ::shutdown(l->client.get(), SHUT_RDWR);
    if (!l->upstream_kept) ::shutdown(l->upstream.get(), SHUT_RDWR);
  }
}

void Control::reap(bool all) {
  std::list<std::unique_ptr<Live>> done;
  {
    std::lock_guard lock(mu_);
    for (auto it = live_.begin(); it != live_.end();) {
      if (all || (*it)->finished) {
        done.push_back(std::move(*it));
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& l : done) {
    if (l->thread.joinable()) l->thread.join();
  }
}

}  // namespace rf::egress_tls
