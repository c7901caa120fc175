#include "proto/frame.h"

namespace rf::proto {
namespace {

constexpr size_t kKeptCapacity = 4096;

void put_be32(std::string* out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out->append(b, 4);
}

uint32_t get_be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

}  // namespace

bool known_type(uint8_t t) {
  switch (static_cast<MsgType>(t)) {
    case MsgType::kHello:
    case MsgType::kExec:
    case MsgType::kStdin:
    case MsgType::kStdinClose:
    case MsgType::kSignal:
    case MsgType::kResize:
    case MsgType::kStarted:
    case MsgType::kStdout:
    case MsgType::kStderr:
    case MsgType::kExit:
    case MsgType::kFileRead:
    case MsgType::kFileData:
    case MsgType::kFileWrite:
    case MsgType::kFileList:
    case MsgType::kFileEntries:
    case MsgType::kFileStat:
    case MsgType::kFileInfo:
    case MsgType::kFileMkdir:
    case MsgType::kFileRemove:
    case MsgType::kFileMove:
    case MsgType::kSetEnv:
    case MsgType::kProbe:
    case MsgType::kProbeResult:
    case MsgType::kFileWatch:
    case MsgType::kFileUnwatch:
    case MsgType::kWatchEvents:
    case MsgType::kWatchEnd:
    case MsgType::kPortExchange:
    case MsgType::kPortData:
    case MsgType::kPortEnd:
    case MsgType::kPortInput:
    case MsgType::kPortClose:
    case MsgType::kOk:
    case MsgType::kError:
    case MsgType::kShutdown:
    case MsgType::kCredRequest:
    case MsgType::kCredAnswer:
    case MsgType::kCredWithdrawn:
      return true;
  }
  return false;
}

const char* type_name(MsgType t) {
  switch (t) {
    case MsgType::kHello:
      return "hello";
    case MsgType::kExec:
      return "exec";
    case MsgType::kStdin:
      return "stdin";
    case MsgType::kStdinClose:
      return "stdin_close";
    case MsgType::kSignal:
      return "signal";
    case MsgType::kResize:
      return "resize";
    case MsgType::kStarted:
      return "started";
    case MsgType::kStdout:
      return "stdout";
    case MsgType::kStderr:
      return "stderr";
    case MsgType::kExit:
      return "exit";
    case MsgType::kFileRead:
      return "file_read";
    case MsgType::kFileData:
      return "file_data";
    case MsgType::kFileWrite:
      return "file_write";
    case MsgType::kFileList:
      return "file_list";
    case MsgType::kFileEntries:
      return "file_entries";
    case MsgType::kFileStat:
      return "file_stat";
    case MsgType::kFileInfo:
      return "file_info";
    case MsgType::kFileMkdir:
      return "file_mkdir";
    case MsgType::kFileRemove:
      return "file_remove";
    case MsgType::kFileMove:
      return "file_move";
    case MsgType::kSetEnv:
      return "set_env";
    case MsgType::kProbe:
      return "probe";
    case MsgType::kProbeResult:
      return "probe_result";
    case MsgType::kFileWatch:
      return "file_watch";
    case MsgType::kFileUnwatch:
      return "file_unwatch";
    case MsgType::kWatchEvents:
      return "watch_events";
    case MsgType::kWatchEnd:
      return "watch_end";
    case MsgType::kPortExchange:
      return "port_exchange";
    case MsgType::kPortData:
      return "port_data";
    case MsgType::kPortEnd:
      return "port_end";
    case MsgType::kPortInput:
      return "port_input";
    case MsgType::kPortClose:
      return "port_close";
    case MsgType::kOk:
      return "ok";
    case MsgType::kError:
      return "error";
    case MsgType::kShutdown:
      return "shutdown";
    case MsgType::kCredRequest:
      return "cred_request";
    case MsgType::kCredAnswer:
      return "cred_answer";
    case MsgType::kCredWithdrawn:
      return "cred_withdrawn";
  }
  return "unknown";
}

void append_frame(std::string* out, MsgType type, uint32_t call_id, std::string_view json,
                  std::string_view data, uint8_t flags) {
  out->reserve(out->size() + kHeaderSize + json.size() + data.size());
  out->push_back('R');
  out->push_back('F');
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  put_be32(out, call_id);
  put_be32(out, static_cast<uint32_t>(json.size()));
  put_be32(out, static_cast<uint32_t>(data.size()));
  out->append(json);
  out->append(data);
}

std::string encode_frame(const Frame& f) {
  std::string out;
  append_frame(&out, f.type, f.call_id, f.json, f.data, f.flags);
  return out;
}

Result<size_t> FrameDecoder::decode(std::string_view src, uint64_t offset) {
  size_t pos = 0;
  while (src.size() - pos >= kHeaderSize) {
    const char* h = src.data() + pos;
    auto at = [&] { return "protocol frame at byte " + std::to_string(offset + pos); };
    if (h[0] != 'R' || h[1] != 'F') {
      failed_ = true;
      return make_error(at(), "bad magic (expected \"RF\")");
    }
    const auto type = static_cast<uint8_t>(h[2]);
    if (!known_type(type)) {
      failed_ = true;
      return make_error(at(), "unknown message type " + std::to_string(type));
    }
    const uint32_t json_len = get_be32(h + 8);
    const uint32_t data_len = get_be32(h + 12);
    if (json_len > kMaxJson) {
      failed_ = true;
      return make_error(
          at(), "json length " + std::to_string(json_len) + " exceeds " + std::to_string(kMaxJson));
    }
    if (data_len > kMaxData) {
      failed_ = true;
      return make_error(
          at(), "data length " + std::to_string(data_len) + " exceeds " + std::to_string(kMaxData));
    }
    const size_t total = kHeaderSize + json_len + data_len;
    if (src.size() - pos < total) break;
    Frame f;
    f.type = static_cast<MsgType>(type);
    f.flags = static_cast<uint8_t>(h[3]);
    f.call_id = get_be32(h + 4);
    f.json.assign(h + kHeaderSize, json_len);
    f.data.assign(h + kHeaderSize + json_len, data_len);
    frames_.push_back(std::move(f));
    pos += total;
  }
  return pos;
}

Status FrameDecoder::feed(std::string_view bytes) {
  if (failed_) return make_error("protocol", "stream already failed");
  if (pos_ == buf_.size()) {
    // Nothing partial is waiting: whole frames are decoded straight from
    // `bytes` (a stream of large data frames is copied once, not twice), and
    // only a partial frame at their end is kept.
    offset_ += pos_;
    pos_ = 0;
    buf_.clear();
    auto used = decode(bytes, offset_);
    if (!used) return used.take_error();
    offset_ += *used;
    bytes.remove_prefix(*used);
    if (bytes.empty() && buf_.capacity() > kKeptCapacity) std::string().swap(buf_);
    buf_.assign(bytes);
    return ok_status();
  }
  if (pos_ > (1u << 16) && pos_ * 2 > buf_.size()) {
    offset_ += pos_;
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
  auto used = decode(std::string_view(buf_).substr(pos_), offset_ + pos_);
  if (!used) return used.take_error();
  pos_ += *used;
  if (pos_ == buf_.size()) {
    // All decoded: an idle stream holds no buffer (a worker has one stream per
    // live sandbox, and one large output would otherwise stay reserved).
    offset_ += pos_;
    pos_ = 0;
    if (buf_.capacity() > kKeptCapacity) {
      std::string().swap(buf_);
    } else {
      buf_.clear();
    }
  }
  return ok_status();
}

Frame FrameDecoder::pop() {
  Frame f = std::move(frames_.front());
  frames_.pop_front();
  return f;
}

}  // namespace rf::proto
