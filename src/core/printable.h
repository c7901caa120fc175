// Text that someone else wrote, made safe to show on an operator's terminal.
//
// A sandbox writes the reason of `rf-cred get`, its commands' errors and its
// output; a tenant writes run, step and workflow names. Shown raw, an escape
// sequence in them retitles or clears the terminal of whoever reads `approvals
// list`, and a bidi override makes a line read differently from what it holds.
// So every such text goes through printable() on its way to a terminal: what
// a terminal would act on becomes a visible escape, and ordinary UTF-8 text
// (accents, CJK, emoji) is left as it is.
#pragma once

#include <string>
#include <string_view>

namespace rf {

// `text` as one line, every control shown as an escape:
//   a backslash           \\   (so a written "\x1b" cannot pass for an escape)
//   newline, CR, tab      \n \r \t
//   other C0, DEL         \x00 .. \x1f, \x7f (ESC is \x1b, BEL \x07)
//   C1 (U+0080..U+009F)   \u0080 .. \u009f (U+009B is a CSI to some terminals)
//   bidi controls         \u202a .. \u202e, \u2066 .. \u2069, \u200e \u200f \u061c
//   line separators       \u2028 \u2029
//   bytes not UTF-8       \xNN each
// With `max_bytes`, the shown form stops before the unit (a character or an
// escape) that would pass it, and ends in "..." then: never half an escape.
std::string printable(std::string_view text, size_t max_bytes = std::string_view::npos);

// A JSON text (a dump) as it may be printed: JSON escapes C0 itself but
// carries DEL, C1, bidi controls and line separators raw, so those become
// \uXXXX (raw C0 too, should a text hold any), and bytes that are not UTF-8
// become \ufffd. Every other byte is kept: a valid JSON text stays valid and
// parses to the same value, with ordinary UTF-8 unchanged.
std::string printable_json_text(std::string_view json_text);

// `j` (an nlohmann::json) dumped for a terminal: strings that are not UTF-8
// are replaced, never thrown on, then printable_json_text().
template <class Json>
std::string printable_json(const Json& j) {
  return printable_json_text(j.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace rf
