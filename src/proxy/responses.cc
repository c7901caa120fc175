#include "proxy/responses.h"

namespace rf::proxy {

namespace {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 408:
      return "Request Timeout";
    case 429:
      return "Too Many Requests";
    case 502:
      return "Bad Gateway";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

}  // namespace

std::string http_response(int status, std::string_view body) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
  out.append(reason_phrase(status));
  out.append("\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ");
  out.append(std::to_string(body.size()));
  out.append("\r\nConnection: close\r\n\r\n");
  out.append(body);
  return out;
}

std::string format_authority(std::string_view host, uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out.append("[").append(host).append("]");
  } else {
    out.append(host);
  }
  return out + ":" + std::to_string(port);
}

std::string refusal_body(std::string_view host, uint16_t port, std::string_view reason) {
  std::string out = "ringfence egress proxy: refused " + format_authority(host, port) + ": ";
  out.append(reason).append("\n");
  return out;
}

}  // namespace rf::proxy
