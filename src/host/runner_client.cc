#include "host/runner_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>

#include "core/json_input.h"
#include "core/units.h"

namespace rf::host {
namespace {

using proto::Frame;
using proto::MsgType;

constexpr size_t kReadChunk = 256u << 10;

// One read buffer per thread, not per client: a worker holds thousands of
// idle clients (one per live sandbox) but reads with a few threads at a time.
// Only the thread holding a client's reader role reads into it.
char* thread_read_buffer() {
  static thread_local std::unique_ptr<char[]> buf;
  if (!buf) buf.reset(new char[kReadChunk]);
  return buf.get();
}

Error from_error_frame(const Frame& f) {
  auto m = proto::parse_error(f.json);
  if (!m) return make_error("tool runner", "unreadable error reply: " + m.error().to_string());
  return Error{m->where, m->message, m->sys_errno};
}

Error unexpected(const Frame& f, const char* request) {
  return make_error("tool runner",
                    std::string("unexpected reply ") + proto::type_name(f.type) + " to " + request);
}

}  // namespace

// One call waiting for frames. The reader thread queues frames here; the
// owning thread handles them outside the lock (so a sink may call back into
// the client) until `handle` says the last one came.
struct RunnerClient::Pending {
  uint32_t id = 0;
  std::deque<Frame> frames;
  std::function<bool(Frame&)> handle;  // true: this was the final frame
  // Its own wake-up, so a read wakes only the calls it brought frames for
  // (one condition variable for all woke every waiting call per read).
  std::condition_variable cv;
  bool asleep = false;  // waiting on cv for frames or the reader role
  size_t queued = 0;    // data bytes in `frames`
};

namespace {
// Data queued for one waiting call past which no other call reads on: the
// runner's output waits in the socket (and the runner stops reading its
// sources) until that call's thread catches up. A port streamed to a slow
// client so costs the host this much, not the whole stream.
constexpr size_t kQueueBound = 16u << 20;
}  // namespace

RunnerClient::RunnerClient(UniqueFd fd) : fd_(std::move(fd)) {}

RunnerClient::~RunnerClient() = default;

Error RunnerClient::closed_error(int err) {
  Error e{"tool runner connection closed", "", err};
  std::lock_guard lock(mu_);  // the reader sets last_error_ while others send
  if (last_error_) e.message = "last error: " + last_error_->to_string();
  return e;
}

void RunnerClient::set_liveness_check(std::function<std::optional<Error>()> check,
                                      std::chrono::milliseconds every) {
  liveness_ = std::move(check);
  liveness_every_ = every;
}

Status RunnerClient::handshake(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];  // the hello is small; more comes on later reads
  while (!decoder_.has_frame()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd_.get(), POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return sys_error("handshake: poll");
    if (r == 0) {
      return make_error("handshake", "tool runner did not say hello within " +
                                         std::to_string(timeout.count()) + " ms");
    }
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return closed_error(n < 0 ? errno : 0);
    RF_TRY(decoder_.feed(std::string_view(buf, static_cast<size_t>(n))));
  }
  Frame f = decoder_.pop();
  if (f.type == MsgType::kError) return from_error_frame(f);
  if (f.type != MsgType::kHello) {
    return make_error("handshake", std::string("expected hello, got ") + proto::type_name(f.type));
  }
  auto hello = proto::parse_hello(f.json);
  if (!hello) return hello.take_error();
  if (auto s = proto::check_compatible(hello->protocol); !s) {
    // Tell the runner too, so it exits instead of waiting for our hello.
    (void)send(MsgType::kError, 0,
               proto::to_json(proto::ErrorMsg{s.error().where, s.error().message, 0}));
    return s;
  }
  runner_version_ = hello->runner_version;
  runner_protocol_ = hello->protocol;
  if (auto v = proto::parse_version(hello->protocol)) runner_minor_ = v->minor;
  proto::Hello ours;
  ours.role = "host";
  return send(MsgType::kHello, 0, proto::to_json(ours));
}

Status RunnerClient::send(MsgType type, uint32_t id, std::string_view json, std::string_view data,
                          uint8_t flags) {
  {
    std::lock_guard lock(mu_);
    if (broken_) return *broken_;
  }
  std::string frame;
  proto::append_frame(&frame, type, id, json, data, flags);
  // A granted credential is in the frame: wiped however the send ends.
  struct Wipe {
    std::string& s;
    bool on;
    ~Wipe() {
      if (on && !s.empty()) ::explicit_bzero(s.data(), s.size());
    }
  } wipe{frame, type == MsgType::kCredAnswer};
  std::lock_guard lock(send_mu_);  // frames from several threads must not interleave
  size_t off = 0;
  while (off < frame.size()) {
    // MSG_NOSIGNAL: a runner that died is an error to return, not a SIGPIPE.
    const ssize_t n = ::send(fd_.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return closed_error(errno);
    off += static_cast<size_t>(n);
  }
  return ok_status();
}

void RunnerClient::add_pending(Pending& p) {
  std::lock_guard lock(mu_);
  do {
    p.id = next_id_++;
  } while (p.id == 0 || pending_.count(p.id) != 0);
  pending_[p.id] = &p;
}

void RunnerClient::remove_pending(Pending& p) {
  std::lock_guard lock(mu_);
  pending_.erase(p.id);
}

void RunnerClient::set_cred_handler(CredHandler handler) {
  std::lock_guard lock(mu_);
  cred_handler_ = std::move(handler);
}

void RunnerClient::set_cred_withdrawn_handler(CredWithdrawnHandler handler) {
  std::lock_guard lock(mu_);
  cred_withdrawn_handler_ = std::move(handler);
}

Status RunnerClient::answer_credential(const proto::CredAnswer& answer, std::string_view value) {
  return send(MsgType::kCredAnswer, 0, proto::to_json(answer), answer.granted ? value : "");
}

void RunnerClient::on_cred_request(const Frame& f) {
  auto req = proto::parse_cred_request(f.json);
  if (!req) {
    last_error_ = make_error("cred_request from the runner", req.error().to_string());
    return;
  }
  if (cred_handler_) return cred_handler_(*req);
  cred_refusals_.push_back({req->request, false,
                            "refused: this sandbox takes no credential requests; only "
                            "`ringfence call --jit` calls and cli_agent_jit steps may ask"});
}

void RunnerClient::on_cred_withdrawn(const Frame& f) {
  auto w = proto::parse_cred_withdrawn(f.json);
  if (!w) {
    last_error_ = make_error("cred_withdrawn from the runner", w.error().to_string());
    return;
  }
  // No handler: no request of it waits here, so there is nothing to withdraw.
  if (cred_withdrawn_handler_) cred_withdrawn_handler_(*w);
}

void RunnerClient::send_cred_refusals() {
  std::vector<proto::CredAnswer> out;
  {
    std::lock_guard lock(mu_);
    out.swap(cred_refusals_);
  }
  for (const auto& a : out) (void)send(MsgType::kCredAnswer, 0, proto::to_json(a));
}

void RunnerClient::dispatch(Frame&& f) {
  if (f.type == MsgType::kCredRequest) return on_cred_request(f);
  if (f.type == MsgType::kCredWithdrawn) return on_cred_withdrawn(f);
  auto it = pending_.find(f.call_id);
  if (it == pending_.end()) {
    // Errors about no waiting call (a running call's stdin/signal, the stream):
    // kept to explain a later close.
    if (f.type == MsgType::kError) last_error_ = from_error_frame(f);
    return;  // output of a call whose waiter gave up
  }
  it->second->queued += f.data.size();
  it->second->frames.push_back(std::move(f));
}

Status RunnerClient::read_some() {
  bool dispatched = false;
  {
    std::lock_guard lock(mu_);
    if (decoder_.has_frame()) {
      while (decoder_.has_frame()) dispatch(decoder_.pop());
      dispatched = true;
    }
  }
  if (dispatched) {
    send_cred_refusals();
    return ok_status();
  }
  char* buf = thread_read_buffer();
  pollfd p{fd_.get(), POLLIN, 0};
  const int wait_ms = liveness_ ? static_cast<int>(liveness_every_.count()) : -1;
  const int ready = ::poll(&p, 1, wait_ms);
  if (ready < 0) return errno == EINTR ? ok_status() : closed_error(errno);
  if (ready == 0) {
    // Silence while someone waits: is the runner's side still there at all?
    if (auto gone = liveness_()) return *gone;
    return ok_status();
  }
  const ssize_t n = ::read(fd_.get(), buf, kReadChunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return ok_status();
  if (n <= 0) return closed_error(n < 0 ? errno : 0);
  {
    std::lock_guard lock(mu_);
    RF_TRY(decoder_.feed(std::string_view(buf, static_cast<size_t>(n))));
    while (decoder_.has_frame()) dispatch(decoder_.pop());
  }
  send_cred_refusals();
  return ok_status();
}

Status RunnerClient::wait(Pending& p) {
  std::unique_lock lock(mu_);
  for (;;) {
    while (!p.frames.empty()) {
      Frame f = std::move(p.frames.front());
      p.frames.pop_front();
      p.queued -= f.data.size();
      lock.unlock();
      const bool last = p.handle(f);  // sink callbacks run here, on the call's own thread
      lock.lock();
      if (last) return ok_status();
    }
    if (broken_) return *broken_;
    if (reading_) {
      p.asleep = true;
      p.cv.wait(lock);
      p.asleep = false;
      continue;
    }
    if (another_is_full(p)) {
      // Its thread reads on once it has handled what it has.
      p.asleep = true;
      p.cv.wait_for(lock, std::chrono::milliseconds(10));
      p.asleep = false;
      continue;
    }
    reading_ = true;
    lock.unlock();
    Status s = read_some();
    lock.lock();
    reading_ = false;
    if (!s && !broken_) broken_ = s.error();
    wake_after_read(p);
  }
}

bool RunnerClient::another_is_full(const Pending& p) const {
  for (const auto& [id, q] : pending_) {
    if (q != &p && q->queued > kQueueBound) return true;
  }
  return false;
}

void RunnerClient::wake_after_read(const Pending& reader) {
  // Every sleeping call this read brought frames for (all, once broken); and
  // if the reader has frames of its own to handle first, one more to read on.
  bool reader_wanted = !reader.frames.empty();
  for (auto& [id, q] : pending_) {
    if (q == &reader || !q->asleep) continue;
    if (broken_ || !q->frames.empty()) {
      q->cv.notify_one();
    } else if (reader_wanted) {
      q->cv.notify_one();
      reader_wanted = false;
    }
  }
}

// A call from its exec frame to its end (exec(), start_exec()).
struct RunnerClient::StartedExec {
  StartedExec(RunnerClient& c, OutputSink& s) : client(c), sink(s) {}
  // One dropped unfinished is forgotten: its later frames go nowhere.
  ~StartedExec() {
    if (!finished) client.remove_pending(p);
  }
  RunnerClient& client;
  OutputSink& sink;
  bool finished = false;
  Pending p;
  Status sent;
  std::optional<proto::ExitStatus> exit;
  std::optional<Error> error;
};

void RunnerClient::take_exec_frames(StartedExec& c) {
  c.p.handle = [&c](Frame& f) {
    switch (f.type) {
      case MsgType::kStarted:
        if (auto s = proto::parse_started(f.json)) c.sink.on_started(c.p.id, s->pid);
        return false;
      case MsgType::kStdout:
        c.sink.on_stdout(f.data);
        return false;
      case MsgType::kStderr:
        c.sink.on_stderr(f.data);
        return false;
      case MsgType::kExit:
        if (auto e = proto::parse_exit(f.json)) {
          c.exit = std::move(*e);
        } else {
          c.error = e.take_error();
        }
        return true;
      case MsgType::kError:
        c.error = from_error_frame(f);
        return true;
      default:
        return false;
    }
  };
}

Status RunnerClient::send_exec(StartedExec& c, const proto::ExecRequest& req,
                               std::string_view stdin_data, bool stdin_complete) {
  take_exec_frames(c);
  add_pending(c.p);
  // The runner refuses a frame whose JSON is over the protocol's bound and
  // ends (the sandbox with it): said here, before anything starts.
  const std::string json = proto::to_json(req);
  if (json.size() > proto::kMaxJson) {
    return make_error("exec", "the command's argv, environment and working directory take " +
                                  std::to_string(json.size()) +
                                  " bytes as the runner's protocol carries them, over its limit "
                                  "of " +
                                  format_size(proto::kMaxJson) + " (" +
                                  std::to_string(proto::kMaxJson) +
                                  " bytes): pass large input on stdin or in a file");
  }
  // Stdin that fits goes inside the exec frame; more follows as stdin frames.
  const bool fits = stdin_data.size() <= proto::kMaxData;
  Status s = send(MsgType::kExec, c.p.id, json, fits ? stdin_data : std::string_view{},
                  fits && stdin_complete ? proto::kFlagStdinComplete : 0);
  if (s && !fits) s = write_stdin(c.p.id, stdin_data);
  if (s && !fits && stdin_complete) s = close_stdin(c.p.id);
  return s;
}

Result<proto::ExitStatus> RunnerClient::finish(StartedExec& c) {
  Status s = c.sent;
  if (s) s = wait(c.p);
  remove_pending(c.p);
  c.finished = true;
  if (!s) return s.take_error();
  if (c.error) return *c.error;
  return *c.exit;
}

Result<proto::ExitStatus> RunnerClient::exec(const proto::ExecRequest& req,
                                             std::string_view stdin_data, bool stdin_complete,
                                             OutputSink& sink) {
  StartedExec c(*this, sink);
  c.sent = send_exec(c, req, stdin_data, stdin_complete);
  return finish(c);
}

std::shared_ptr<RunnerClient::StartedExec> RunnerClient::start_exec(const proto::ExecRequest& req,
                                                                    std::string_view stdin_data,
                                                                    OutputSink& sink) {
  auto c = std::make_shared<StartedExec>(*this, sink);
  c->sent = send_exec(*c, req, stdin_data, /*stdin_complete=*/true);
  return c;
}

std::shared_ptr<RunnerClient::StartedExec> RunnerClient::expect_exec(uint32_t id,
                                                                     OutputSink& sink) {
  auto c = std::make_shared<StartedExec>(*this, sink);
  take_exec_frames(*c);
  std::lock_guard lock(mu_);
  if (id == 0 || pending_.count(id) != 0) {
    c->sent = make_error("expect call " + std::to_string(id), "the id is taken");
    c->finished = true;  // never registered
    return c;
  }
  c->p.id = id;
  pending_[id] = &c->p;
  return c;
}

Result<proto::ExitStatus> RunnerClient::finish_exec(StartedExec& started) {
  return finish(started);
}

Status RunnerClient::write_stdin(uint32_t call_id, std::string_view data) {
  while (!data.empty()) {
    const size_t n = std::min<size_t>(data.size(), proto::kMaxData);
    RF_TRY(send(MsgType::kStdin, call_id, {}, data.substr(0, n)));
    data.remove_prefix(n);
  }
  return ok_status();
}

Status RunnerClient::close_stdin(uint32_t call_id) {
  return send(MsgType::kStdinClose, call_id, {});
}

Status RunnerClient::send_signal(uint32_t call_id, int sig) {
  return send(MsgType::kSignal, call_id, proto::to_json(proto::Signal{sig}));
}

Status RunnerClient::resize(uint32_t call_id, int rows, int cols) {
  return send(MsgType::kResize, call_id, proto::to_json(proto::Resize{rows, cols}));
}

Result<Frame> RunnerClient::request(MsgType type, std::string_view json, std::string_view data) {
  Pending p;
  add_pending(p);
  std::optional<Frame> reply;
  p.handle = [&](Frame& f) {
    reply = std::move(f);
    return true;
  };
  Status s = send(type, p.id, json, data);
  if (s) s = wait(p);
  remove_pending(p);
  if (!s) return s.take_error();
  if (reply->type == MsgType::kError) return from_error_frame(*reply);
  return std::move(*reply);
}

Result<std::string> RunnerClient::read_file(const std::string& path, int64_t max_bytes) {
  proto::FileRequest req;
  req.path = path;
  req.max_bytes = max_bytes;
  auto f = request(MsgType::kFileRead, proto::to_json(req), {});
  if (!f) return f.take_error();
  if (f->type != MsgType::kFileData) return unexpected(*f, "file_read");
  return std::move(f->data);
}

Status RunnerClient::write_file(const std::string& path, std::string_view data, uint32_t mode) {
  if (data.size() > proto::kMaxData) return make_error("file_write " + path, "file too large");
  proto::FileRequest req;
  req.path = path;
  req.mode = mode;
  req.parents = true;  // like an editor's save-as: missing directories are made
  auto f = request(MsgType::kFileWrite, proto::to_json(req), data);
  if (!f) return f.take_error();
  if (f->type != MsgType::kOk) return unexpected(*f, "file_write");
  return ok_status();
}

Result<std::vector<proto::FileInfo>> RunnerClient::list_dir(const std::string& path) {
  proto::FileRequest req;
  req.path = path;
  auto f = request(MsgType::kFileList, proto::to_json(req), {});
  if (!f) return f.take_error();
  if (f->type != MsgType::kFileEntries) return unexpected(*f, "file_list");
  return proto::parse_file_entries(f->json);
}

Status RunnerClient::file_op(MsgType type, const proto::FileRequest& req) {
  const std::string what = std::string(proto::type_name(type)) + " " + req.path;
  if (runner_minor_ < proto::kFileOpsMinor) {
    return make_error(what, "the sandbox's tool runner speaks protocol " + runner_protocol_ +
                                ", which has no " + proto::type_name(type) + " (0.4 has)");
  }
  auto f = request(type, proto::to_json(req), {});
  if (!f) return f.take_error();
  if (f->type != MsgType::kOk) return unexpected(*f, proto::type_name(type));
  return ok_status();
}

Result<std::string> RunnerClient::watch(
    const std::string& path, bool recursive, const std::function<void(uint32_t)>& on_watching,
    const std::function<void(std::vector<proto::FileEvent>&&)>& on_events) {
  const std::string what = "file_watch " + path;
  if (runner_minor_ < proto::kWatchMinor) {
    return make_error(what, "the sandbox's tool runner speaks protocol " + runner_protocol_ +
                                ", which has no file_watch (0.5 has)");
  }
  proto::FileRequest req;
  req.path = path;
  req.recursive = recursive;
  Pending p;
  add_pending(p);
  std::optional<Error> refused;
  std::string why;
  p.handle = [&](Frame& f) {
    switch (f.type) {
      case MsgType::kOk:
        if (on_watching) on_watching(p.id);
        return false;
      case MsgType::kWatchEvents: {
        auto events = proto::parse_watch_events(f.json);
        if (events) on_events(std::move(*events));
        return false;
      }
      case MsgType::kWatchEnd: {
        const auto j = parse_json_or_discarded(f.json);
        why = j.is_object() ? j.value("reason", std::string("ended")) : "ended";
        return true;
      }
      case MsgType::kError:
        refused = from_error_frame(f);
        return true;
      default:
        refused = unexpected(f, "file_watch");
        return true;
    }
  };
  Status s = send(MsgType::kFileWatch, p.id, proto::to_json(req));
  if (s) s = wait(p);
  remove_pending(p);
  if (!s) return s.take_error();
  if (refused) return *refused;
  return why;
}

Status RunnerClient::unwatch(uint32_t id) { return send(MsgType::kFileUnwatch, id, "{}"); }

Status RunnerClient::port_exchange(int port, std::string_view request,
                                   const std::function<void(std::string_view)>& on_data, size_t max,
                                   const std::function<void(uint32_t)>& on_open) {
  const std::string what = "port " + std::to_string(port);
  if (runner_minor_ < proto::kPortMinor) {
    return make_error(what, "the sandbox's tool runner speaks protocol " + runner_protocol_ +
                                ", which has no port_exchange (0.5 has)");
  }
  if (request.size() > proto::kMaxData) return make_error(what, "the request is too large");
  const bool streams = runner_minor_ >= proto::kPortStreamMinor;
  if (!streams && (max == 0 || max > kPortAnswerMax || on_open)) {
    return make_error(what, "the sandbox's tool runner speaks protocol " + runner_protocol_ +
                                ", which bounds a port's answer and has no port_input (0.6 has)");
  }
  Pending p;
  add_pending(p);
  std::optional<Error> failed;
  p.handle = [&](Frame& f) {
    switch (f.type) {
      case MsgType::kPortData:
        on_data(f.data);
        return false;
      case MsgType::kPortEnd: {
        const auto j = parse_json_or_discarded(f.json);
        const std::string error = j.is_object() ? j.value("error", std::string()) : "";
        if (!error.empty()) failed = make_error(what, error);
        return true;
      }
      case MsgType::kError:
        failed = from_error_frame(f);
        return true;
      default:
        failed = unexpected(f, "port_exchange");
        return true;
    }
  };
  nlohmann::json head{{"port", port}};
  if (streams) head["max"] = max;
  Status s = send(MsgType::kPortExchange, p.id, head.dump(), request);
  if (s && on_open) on_open(p.id);
  if (s) s = wait(p);
  remove_pending(p);
  if (!s) return s;
  if (failed) return *failed;
  return ok_status();
}

Status RunnerClient::port_input(uint32_t id, std::string_view bytes) {
  if (bytes.empty()) return ok_status();
  // In pieces a frame holds; a piece at most 1 MiB keeps other calls' frames moving.
  constexpr size_t kPiece = 1u << 20;
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), kPiece);
    RF_TRY(send(MsgType::kPortInput, id, "", bytes.substr(0, n)));
    bytes.remove_prefix(n);
  }
  return ok_status();
}

Status RunnerClient::port_close(uint32_t id) { return send(MsgType::kPortClose, id, ""); }

Status RunnerClient::make_dir(const std::string& path, bool parents) {
  proto::FileRequest req;
  req.path = path;
  req.parents = parents;
  return file_op(MsgType::kFileMkdir, req);
}

Status RunnerClient::remove(const std::string& path, bool recursive) {
  proto::FileRequest req;
  req.path = path;
  req.recursive = recursive;
  return file_op(MsgType::kFileRemove, req);
}

Status RunnerClient::move(const std::string& from, const std::string& to) {
  proto::FileRequest req;
  req.path = from;
  req.to = to;
  return file_op(MsgType::kFileMove, req);
}

Result<proto::FileInfo> RunnerClient::stat(const std::string& path) {
  proto::FileRequest req;
  req.path = path;
  auto f = request(MsgType::kFileStat, proto::to_json(req), {});
  if (!f) return f.take_error();
  if (f->type != MsgType::kFileInfo) return unexpected(*f, "file_stat");
  return proto::parse_file_info(f->json);
}

Status RunnerClient::set_env(const proto::SetEnv& vars) {
  auto f = request(MsgType::kSetEnv, proto::to_json(vars), {});
  if (!f) return f.take_error();
  if (f->type != MsgType::kOk) return unexpected(*f, "set_env");
  return ok_status();
}

Result<proto::ProbeResult> RunnerClient::probe() {
  auto f = request(MsgType::kProbe, "{}", {});
  if (!f) return f.take_error();
  if (f->type != MsgType::kProbeResult) return unexpected(*f, "probe");
  return proto::parse_probe_result(f->json);
}

Status RunnerClient::shutdown() { return send(MsgType::kShutdown, 0, "{}"); }

void RunnerClient::fail_all(const Error& reason) {
  {
    std::lock_guard lock(mu_);
    if (!broken_) broken_ = reason;
    for (auto& [id, q] : pending_) q->cv.notify_one();
  }
  // Wakes a reader blocked in poll; the runner sees EOF and ends its calls.
  ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace rf::host
