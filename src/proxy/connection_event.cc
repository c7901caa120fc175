#include "proxy/connection_event.h"

#include <nlohmann/json.hpp>

namespace rf::proxy {

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::completed:
      return "completed";
    case Outcome::refused:
      return "refused";
    case Outcome::over_capacity:
      return "over_capacity";
    case Outcome::bad_request:
      return "bad_request";
    case Outcome::head_timeout:
      return "head_timeout";
    case Outcome::upstream_failed:
      return "upstream_failed";
    case Outcome::upstream_timeout:
      return "upstream_timeout";
    case Outcome::byte_cap:
      return "byte_cap";
    case Outcome::idle_timeout:
      return "idle_timeout";
    case Outcome::closed_by_owner:
      return "closed_by_owner";
  }
  return "unknown";
}

std::optional<Outcome> outcome_from(std::string_view name) {
  for (Outcome o :
       {Outcome::completed, Outcome::refused, Outcome::over_capacity, Outcome::bad_request,
        Outcome::head_timeout, Outcome::upstream_failed, Outcome::upstream_timeout,
        Outcome::byte_cap, Outcome::idle_timeout, Outcome::closed_by_owner}) {
    if (to_string(o) == name) return o;
  }
  return std::nullopt;
}

std::string to_json(const ConnectionEvent& e) {
  nlohmann::json j = {
      {"sandbox", e.sandbox_id},
      {"protocol", e.protocol},
      {"host", e.host},
      {"port", e.port},
      {"address", e.address},
      {"allowed", e.allowed},
      {"reason", e.reason},
      {"status", e.status},
      {"outcome", std::string(to_string(e.outcome))},
      {"error", e.error},
      {"bytes_sent", e.bytes_sent},
      {"bytes_received", e.bytes_received},
      {"duration_us", e.duration.count()},
  };
  if (!e.credential.empty()) {
    j["credential"] = e.credential;
    j["delivery"] = e.delivery;
    j["placeholder_refused"] = e.placeholder_refused;
    j["substitutions"] = e.substitutions;
    j["restored"] = e.restored;
  }
  // Hosts and reasons come from untrusted requests: never throw on bad UTF-8.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rf::proxy
