// libFuzzer target for the bytes a runner or host reads from its peer: the
// frame decoder, fed in pieces of fuzzer-chosen sizes, and the JSON parser of
// every message type it yields. Nothing here may crash, leak or hang.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   make -C build-fuzz proto_frame_fuzz && build-fuzz/fuzz/proto_frame_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json_input.h"
#include "proto/frame.h"
#include "proto/messages.h"

namespace {

using rf::proto::Frame;
using rf::proto::MsgType;

// Parses the JSON of `f` as the message its type says; results are discarded.
void parse_frame(const Frame& f) {
  switch (f.type) {
    case MsgType::kHello:
      (void)rf::proto::parse_hello(f.json);
      break;
    case MsgType::kExec:
      (void)rf::proto::parse_exec(f.json);
      break;
    case MsgType::kStarted:
      (void)rf::proto::parse_started(f.json);
      break;
    case MsgType::kExit:
      (void)rf::proto::parse_exit(f.json);
      break;
    case MsgType::kFileRead:
    case MsgType::kFileWrite:
    case MsgType::kFileList:
    case MsgType::kFileStat:
    case MsgType::kFileMkdir:
    case MsgType::kFileRemove:
    case MsgType::kFileMove:
    case MsgType::kFileWatch:
      (void)rf::proto::parse_file_request(f.json);
      break;
    case MsgType::kWatchEvents:
      (void)rf::proto::parse_watch_events(f.json);
      break;
    case MsgType::kFileUnwatch:
    case MsgType::kWatchEnd:
    case MsgType::kPortExchange:
    case MsgType::kPortData:
    case MsgType::kPortEnd:
    case MsgType::kPortInput:
    case MsgType::kPortClose:
      (void)rf::parse_json_or_discarded(f.json);
      break;
    case MsgType::kFileData:
    case MsgType::kFileInfo:
      (void)rf::proto::parse_file_info(f.json);
      break;
    case MsgType::kFileEntries:
      (void)rf::proto::parse_file_entries(f.json);
      break;
    case MsgType::kSetEnv:
      (void)rf::proto::parse_set_env(f.json);
      break;
    case MsgType::kSignal:
      (void)rf::proto::parse_signal(f.json);
      break;
    case MsgType::kResize:
      (void)rf::proto::parse_resize(f.json);
      break;
    case MsgType::kError:
      (void)rf::proto::parse_error(f.json);
      break;
    case MsgType::kProbeResult:
      (void)rf::proto::parse_probe_result(f.json);
      break;
    case MsgType::kCredRequest:
      (void)rf::proto::parse_cred_request(f.json);
      break;
    case MsgType::kCredAnswer:
      (void)rf::proto::parse_cred_answer(f.json);
      break;
    case MsgType::kCredWithdrawn:
      (void)rf::proto::parse_cred_withdrawn(f.json);
      break;
    case MsgType::kStdin:
    case MsgType::kStdinClose:
    case MsgType::kStdout:
    case MsgType::kStderr:
    case MsgType::kProbe:
    case MsgType::kOk:
    case MsgType::kShutdown:
      break;  // no JSON body to speak of
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte seeds the piece sizes, so one input explores one chunking.
  if (size == 0) return 0;
  uint32_t state = data[0] | 1u;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  rf::proto::FrameDecoder decoder;
  while (!rest.empty()) {
    state = state * 1103515245u + 12345u;
    const size_t piece = std::min<size_t>(rest.size(), 1 + (state >> 16) % 64);
    const bool ok = decoder.feed(rest.substr(0, piece)).ok();
    rest.remove_prefix(piece);
    while (decoder.has_frame()) {
      const Frame f = decoder.pop();
      parse_frame(f);
      // A decoded frame must encode back to the bytes it came from.
      if (rf::proto::encode_frame(f).size() !=
          rf::proto::kHeaderSize + f.json.size() + f.data.size()) {
        __builtin_trap();
      }
    }
    if (!ok) break;  // the stream stays failed; nothing more to learn from it
  }
  return 0;
}
