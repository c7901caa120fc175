// The web console `ringfence serve` answers at / (issue 14): one page of
// plain HTML, CSS and JavaScript, no external resources. It asks for a
// token (or takes one from the URL's #token=), then follows
// /v1/console/events: live sandboxes, runs with their steps and modes,
// pending approvals with approve and deny buttons, the audit chain's state.
#pragma once

#include <string_view>

namespace rf::api {

std::string_view console_page();

}  // namespace rf::api
