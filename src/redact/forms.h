// The forms a secret value takes when a tool prints it (host side): raw,
// base64 and base64url at each of the three alignments it can have inside a
// longer encoded stream, hex in both cases, URL-encoded (RFC 3986 with upper
// and lower hex digits, Python's quote() that keeps '/', and a form's '+'
// for a space), JSON-escaped (as JSON needs, PHP's with '\/', Go's with
// \u0026 for &, < and >), and inside a shell's double quotes (`export -p`).
// Not known: any encoding a program makes of its own. (A form split by line
// breaks, as `base64` wraps one, is found through them by the stream:
// redact/stream_redactor.h, "Wrapped lines".)
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rf::redact {

enum class Form {
  raw,
  base64,
  base64url,
  base64_end,  // the value ends the encoded stream: its last partial character and padding
  base64url_end,
  hex_lower,
  hex_upper,
  url,
  json,
  url_lower,
  url_slash,
  url_plus,
  json_slash,
  json_html,
  shell
};

std::string_view to_string(Form f);

// A derived form shorter than this is dropped: it would match ordinary text
// (the raw value is always kept).
constexpr size_t kMinDerivedForm = 4;

// Every distinct form of `value`. The base64 forms hold only the characters
// fully determined by the value's own bytes (those around it depend on its
// neighbours), so they match wherever the value falls in an encoded stream.
std::vector<std::pair<Form, std::string>> forms_of(std::string_view value);

// Percent-encoding as RFC 3986 has it (ASCII letters and digits and -._~
// kept), with the hex digits given, and `keep` kept too (Python's quote()
// keeps '/'); `plus` writes a space as '+' (HTML forms, quote_plus).
std::string url_encoded(std::string_view value, const char* digits = "0123456789ABCDEF",
                        std::string_view keep = "", bool plus = false);

// Each distinct form of `from` with the same form of `to` (for base64, at the
// same alignment): what a stream swaps to put `to` wherever `from` shows, in
// any form. Forms equal for both are left out, and derived forms shorter than
// kMinDerivedForm, as in forms_of. Of one length, `from` and `to` give forms
// of one length but for the escaped ones (URL, JSON), where a byte only one
// of them holds is escaped.
std::vector<std::pair<std::string, std::string>> paired_forms(std::string_view from,
                                                              std::string_view to);

}  // namespace rf::redact
