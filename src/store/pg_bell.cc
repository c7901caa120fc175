// The store's doorbell across hosts, on PostgreSQL: LISTEN/NOTIFY.
//
// Each process that opens a PostgreSQL store keeps a private bell
// (Doorbell::open_private) and one relay: publish() hands the slot to a
// sender thread, which sends NOTIFY rf_bell over a connection of its own, and
// a listener thread holds a second connection that LISTENs and rings the
// local bell for every slot it hears of (its own process's included).
// PostgreSQL delivers a NOTIFY to listeners only once the transaction that
// sent it commits; publish() is called after the store's commit.
//
// The sender coalesces: the slots published while it was sending go out
// together, as one notification whose payload lists them ("3,17,42"). Every
// NOTIFY wakes every listening backend and, through it, every process's
// listener, so a burst of rings (a worker claiming eight calls, executors
// ending theirs) costs one or two notifications, not one each; and the writer,
// which rings holding the store's lock, never waits for the round trip. A
// relay being destroyed sends what is pending first: a process that ends
// without destroying its store (_exit) may lose its last rings, which costs
// their waiters a timeout.
//
// A lost connection is opened again with backoff (50 ms doubling to 2 s);
// notifications sent meanwhile are lost, so after reconnecting every slot is
// rung once: waiters look at the database again. Waiters always have a
// timeout, so a relay that cannot reach the database costs latency only.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "core/unique_fd.h"
#include "store/db.h"
#include "store/doorbell.h"
#include "store/pg_connect.h"

namespace rf::store {
namespace {

constexpr const char* kChannel = kBellChannel;

// A working connection, or null.
PGconn* connect(const std::string& uri) {
  PGconn* conn = engine::pg_connect(uri);
  if (conn != nullptr && PQstatus(conn) != CONNECTION_OK) {
    PQfinish(conn);
    return nullptr;
  }
  return conn;
}

bool listen_on(PGconn* conn) {
  PGresult* r = PQexec(conn, (std::string("LISTEN ") + kChannel).c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return ok;
}

class PgBellRelay final : public BellRelay {
 public:
  PgBellRelay(std::string uri, Doorbell& bell, UniqueFd stop)
      : uri_(std::move(uri)), bell_(bell), stop_(std::move(stop)) {}

  ~PgBellRelay() override {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    pending_cv_.notify_one();
    if (sender_thread_.joinable()) sender_thread_.join();
    const uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    if (thread_.joinable()) thread_.join();
    PQfinish(listener_);
    PQfinish(sender_);
  }
  PgBellRelay(const PgBellRelay&) = delete;
  PgBellRelay& operator=(const PgBellRelay&) = delete;

  Status start() {
    listener_ = connect(uri_);
    if (listener_ == nullptr || !listen_on(listener_)) {
      return make_error("listen for the store's rings on " + engine::redact_uri(uri_),
                        listener_ != nullptr ? PQerrorMessage(listener_) : "cannot connect");
    }
    thread_ = std::thread([this] { listen_loop(); });
    sender_thread_ = std::thread([this] { send_loop(); });
    return ok_status();
  }

  void publish(uint32_t slot) override {
    {
      std::lock_guard lock(mu_);
      pending_.insert(slot);
    }
    pending_cv_.notify_one();
  }

 private:
  bool stopping(int timeout_ms) {
    pollfd p{stop_.get(), POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
  }

  void listen_loop() {
    auto backoff = std::chrono::milliseconds(50);
    while (true) {
      if (listener_ == nullptr || PQstatus(listener_) != CONNECTION_OK) {
        PQfinish(listener_);
        listener_ = connect(uri_);
        if (listener_ == nullptr || !listen_on(listener_)) {
          if (stopping(static_cast<int>(backoff.count()))) return;
          backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
          continue;
        }
        backoff = std::chrono::milliseconds(50);
        bell_.ring_all();  // what was rung while we were away
      }
      pollfd fds[2] = {{PQsocket(listener_), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
      if (::poll(fds, 2, 1000) < 0) continue;
      if ((fds[1].revents & POLLIN) != 0) return;
      if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      if (PQconsumeInput(listener_) == 0) {
        PQfinish(listener_);
        listener_ = nullptr;
        continue;
      }
      while (PGnotify* n = PQnotifies(listener_)) {
        ring_listed(n->extra);
        PQfreemem(n);
      }
    }
  }

  // Rings each slot of a payload "3,17,42" (slots out of range are the
  // bell's to ignore).
  void ring_listed(std::string_view payload) {
    while (!payload.empty()) {
      const size_t comma = payload.find(',');
      const std::string number(payload.substr(0, comma));
      bell_.ring(static_cast<uint32_t>(std::strtoul(number.c_str(), nullptr, 10)));
      if (comma == std::string_view::npos) break;
      payload.remove_prefix(comma + 1);
    }
  }

  // Sends what was published, coalesced, until the relay closes (and then
  // what is still pending).
  void send_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      pending_cv_.wait(lock, [&] { return closing_ || !pending_.empty(); });
      if (pending_.empty()) return;  // closing, nothing left
      std::string payload;
      for (uint32_t slot : pending_) {
        if (!payload.empty()) payload += ',';
        payload += std::to_string(slot);
      }
      pending_.clear();
      const bool closing = closing_;
      lock.unlock();
      send(payload, /*reconnect=*/!closing);
      lock.lock();
    }
  }

  // The sender thread's: one NOTIFY, on a connection opened again if lost
  // (a notification that cannot be sent is dropped: waiters time out). A
  // relay closing does not reconnect: the process would wait up to the
  // connect timeout to exit, for a ring that only saves a waiter its timeout.
  void send(const std::string& payload, bool reconnect) {
    if (sender_ == nullptr || PQstatus(sender_) != CONNECTION_OK) {
      if (!reconnect && sender_ != nullptr) return;
      PQfinish(sender_);
      sender_ = connect(uri_);
      if (sender_ == nullptr) return;
    }
    const char* values[] = {kChannel, payload.c_str()};
    PQclear(
        PQexecParams(sender_, "SELECT pg_notify($1, $2)", 2, nullptr, values, nullptr, nullptr, 0));
  }

  std::string uri_;
  Doorbell& bell_;
  UniqueFd stop_;
  PGconn* listener_ = nullptr;  // the listener thread's
  PGconn* sender_ = nullptr;    // the sender thread's
  std::mutex mu_;
  std::condition_variable pending_cv_;
  std::set<uint32_t> pending_;  // under mu_: published, not sent yet
  bool closing_ = false;        // under mu_
  std::thread thread_;          // the listener
  std::thread sender_thread_;
};

}  // namespace

Result<std::unique_ptr<BellRelay>> start_pg_bell_relay(const std::string& uri, Doorbell& bell) {
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  if (!stop) return sys_error("eventfd for the store's bell relay", errno);
  auto relay = std::make_unique<PgBellRelay>(uri, bell, std::move(stop));
  RF_TRY(relay->start());
  return std::unique_ptr<BellRelay>(std::move(relay));
}

}  // namespace rf::store
