// The framing of the host <-> tool runner protocol (see docs/protocol.md).
//
// Every frame is a 16-byte header followed by a JSON object and raw bytes:
//
//   0  2  magic "RF"
//   2  1  type (MsgType)
//   3  1  flags (kFlag*)
//   4  4  call id, big-endian (0 for messages about the whole sandbox)
//   8  4  json length, big-endian  (<= kMaxJson)
//  12  4  data length, big-endian  (<= kMaxData)
//
// This file only splits bytes into frames; messages.h gives them meaning. It
// reads untrusted bytes and is fuzzed (fuzz/proto_frame_fuzz.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::proto {

inline constexpr size_t kHeaderSize = 16;
inline constexpr uint32_t kMaxJson = 1u << 20;   // 1 MiB
inline constexpr uint32_t kMaxData = 32u << 20;  // 32 MiB

enum class MsgType : uint8_t {
  kHello = 1,
  kExec = 2,
  kStdin = 3,
  kStdinClose = 4,
  kSignal = 5,
  kResize = 6,
  kStarted = 10,
  kStdout = 11,
  kStderr = 12,
  kExit = 13,
  kFileRead = 20,
  kFileData = 21,
  kFileWrite = 22,
  kFileMkdir = 23,  // protocol 0.4: a directory (with parents when asked)
  kFileList = 24,
  kFileEntries = 25,
  kFileStat = 26,
  kFileInfo = 27,
  kFileRemove = 28,  // protocol 0.4: a file, a symlink, or a directory (recursive when asked)
  kFileMove = 29,    // protocol 0.4: a rename inside the sandbox
  kSetEnv = 30,
  kProbe = 31,
  kProbeResult = 32,
  kFileWatch = 33,     // H→R, protocol 0.5: watch a directory (recursive when asked)
  kFileUnwatch = 34,   // H→R, protocol 0.5: stop a watch (answered by its watch_end)
  kWatchEvents = 35,   // R→H, protocol 0.5: what happened under a watched directory
  kWatchEnd = 36,      // R→H, protocol 0.5: a watch ended, and why
  kPortExchange = 37,  // H→R, protocol 0.5: a request's bytes for a port inside
  kPortData = 38,      // R→H, protocol 0.5: what the port answered
  kPortEnd = 39,       // R→H, protocol 0.5: the port's connection closed (or failed: why)
  kOk = 40,
  kError = 41,
  kShutdown = 42,
  kPortInput = 43,      // H→R, protocol 0.6: more bytes for an open port_exchange
  kPortClose = 44,      // H→R, protocol 0.6: the client left: close it (port_end follows)
  kCredRequest = 50,    // R→H, protocol 0.2: a process in the sandbox asks for a credential
  kCredAnswer = 51,     // H→R, protocol 0.2: the answer; a granted value is the data
  kCredWithdrawn = 52,  // R→H, protocol 0.3: a request's asker left before its answer
};

// True for the type values this version knows.
bool known_type(uint8_t type);
const char* type_name(MsgType type);

struct Frame {
  MsgType type = MsgType::kOk;
  uint8_t flags = 0;
  uint32_t call_id = 0;
  std::string json;  // a JSON object, or empty
  std::string data;  // raw bytes (output chunks, file contents)
};

// Serialises a frame, header included.
std::string encode_frame(const Frame& frame);
void append_frame(std::string* out, MsgType type, uint32_t call_id, std::string_view json,
                  std::string_view data = {}, uint8_t flags = 0);

// Incremental decoder: feed bytes as they arrive, take whole frames out. After an
// error the decoder stays failed (the stream cannot be resynchronised).
class FrameDecoder {
 public:
  // Appends bytes and decodes every whole frame in them.
  Status feed(std::string_view bytes);
  bool has_frame() const { return !frames_.empty(); }
  Frame pop();
  // Bytes of a partial frame still waiting for the rest.
  size_t pending_bytes() const { return buf_.size() - pos_; }

 private:
  // Decodes the whole frames at the start of `src` (at stream offset
  // `offset`, for errors); how many bytes they took.
  Result<size_t> decode(std::string_view src, uint64_t offset);
  std::string buf_;
  size_t pos_ = 0;
  std::deque<Frame> frames_;
  bool failed_ = false;
  uint64_t offset_ = 0;  // stream offset of buf_[0], for error messages
};

}  // namespace rf::proto
