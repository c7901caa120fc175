// A port's answer (issue 41 item 5) is what a process inside a sandbox wrote
// back: hostile bytes. The parser must not crash on any of them, and what it
// passes on must keep hop-by-hop headers and ringfence's own off the next hop
// and never carry a header the next hop could split (CR or LF in a name or
// value). Read piece by piece as it comes (PortAnswerStream, at a cut the
// input picks), it must give exactly what the whole read gives. And a Host
// header is hostile too: the host-name form must never yield a sandbox id
// that leaves one DNS label.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sandbox/port_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto answer = rf::parse_port_answer(bytes);
  if (answer) {
    if (answer->status < 0 || answer->status > 999) std::abort();
    for (const auto& [k, v] : answer->headers) {
      if (!rf::port_header_passes(k)) std::abort();
      if (k.find_first_of("\r\n") != std::string::npos) std::abort();
      if (v.find_first_of("\r\n") != std::string::npos) std::abort();
    }
  }
  // In two pieces, cut where the first byte says: the same answer.
  if (size > 0) {
    const size_t cut = data[0] % size;
    rf::PortAnswer streamed;
    rf::PortAnswerStream stream(
        [&](int status, rf::HeaderList&& h) {
          streamed.status = status;
          streamed.headers = std::move(h);
        },
        [&](std::string_view b) { streamed.body.append(b); });
    rf::Status s = stream.feed(bytes.substr(0, cut));
    if (s) s = stream.feed(bytes.substr(cut));
    if (s) s = stream.finish();
    if (s.ok() != answer.ok()) std::abort();
    if (answer && (streamed.status != answer->status || streamed.body != answer->body ||
                   streamed.headers != answer->headers)) {
      std::abort();
    }
  }
  if (auto host = rf::parse_port_host(bytes, "ports.example")) {
    if (host->port < 1 || host->port > 65535) std::abort();
    if (host->sandbox.find_first_of("./:\r\n ") != std::string::npos) std::abort();
  }
  // The same bytes as a client's header list must not split the request.
  rf::HeaderList headers = {
      {std::string(bytes.substr(0, size / 2)), std::string(bytes.substr(size / 2))}};
  const std::string text = rf::port_request_text("GET", "/", headers, "", 8000);
  if (text.find("\r\n\r\n") + 4 != text.size()) std::abort();
  return 0;
}
