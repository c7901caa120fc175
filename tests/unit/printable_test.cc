#include "core/printable.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace rf {
namespace {

using namespace std::string_literals;

TEST(Printable, OrdinaryUtf8TextIsLeftAsItIs) {
  for (const std::string s : {"", "push the site", "caf\u00e9 na\u00efve", "\u65e5\u672c\u8a9e",
                              "\U0001F600 ok", "a/b:c;d|e {f} [g] 'h' \"i\" ~`!@#$%^&*()"}) {
    EXPECT_EQ(printable(s), s);
  }
}

// The attack: a reason that would retitle and clear the operator's terminal
// arrives as text to read, with no ESC or BEL byte left.
TEST(Printable, EscapeSequencesBecomeVisibleEscapes) {
  const std::string attack = "\033]0;pwned\007\033[2J";
  const std::string shown = printable(attack);
  EXPECT_EQ(shown, "\\x1b]0;pwned\\x07\\x1b[2J");
  EXPECT_EQ(shown.find('\033'), std::string::npos);
  EXPECT_EQ(shown.find('\007'), std::string::npos);
}

TEST(Printable, EveryC0ControlAndDelIsEscaped) {
  EXPECT_EQ(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(printable("\0x"s), "\\x00x");
  EXPECT_EQ(printable("\x01\x08\x0b\x0c\x1f\x7f"), "\\x01\\x08\\x0b\\x0c\\x1f\\x7f");
  for (int c = 0; c < 0x20; ++c) {
    const std::string shown = printable(std::string(1, static_cast<char>(c)));
    EXPECT_EQ(shown.front(), '\\') << c;
    for (char b : shown) EXPECT_GE(static_cast<unsigned char>(b), 0x20) << c;
  }
}

// A backslash is doubled, so text that spells an escape cannot pass for one.
TEST(Printable, ABackslashIsDoubled) {
  EXPECT_EQ(printable("\\x1b"), "\\\\x1b");
  EXPECT_EQ(printable("C:\\dir"), "C:\\\\dir");
}

TEST(Printable, C1ControlsAreEscaped) {
  EXPECT_EQ(printable("\u0080"), "\\u0080");
  EXPECT_EQ(printable("x\u009b2Jy"), "x\\u009b2Jy");  // CSI, as some terminals read it
  EXPECT_EQ(printable("\u009f"), "\\u009f");
  EXPECT_EQ(printable("\u00a0"), "\u00a0");  // the first character past C1 is text
}

// Trojan Source: a bidi override shows "deny" where the bytes say "allow".
TEST(Printable, BidiControlsAndLineSeparatorsAreEscaped) {
  EXPECT_EQ(printable("a\u202eb"), "a\\u202eb");
  for (const auto& [in, out] :
       std::vector<std::pair<std::string, std::string>>{{"\u202a", "\\u202a"},
                                                        {"\u202b", "\\u202b"},
                                                        {"\u202c", "\\u202c"},
                                                        {"\u202d", "\\u202d"},
                                                        {"\u2066", "\\u2066"},
                                                        {"\u2067", "\\u2067"},
                                                        {"\u2068", "\\u2068"},
                                                        {"\u2069", "\\u2069"},
                                                        {"\u200e", "\\u200e"},
                                                        {"\u200f", "\\u200f"},
                                                        {"\u061c", "\\u061c"},
                                                        {"\u2028", "\\u2028"},
                                                        {"\u2029", "\\u2029"}}) {
    EXPECT_EQ(printable(in), out);
  }
  EXPECT_EQ(printable("\u2065\u206a\u2027\u202f"), "\u2065\u206a\u2027\u202f");  // neighbours
}

TEST(Printable, BytesThatAreNotUtf8AreShownAsHex) {
  EXPECT_EQ(printable("\xff"), "\\xff");
  EXPECT_EQ(printable("a\x80z"), "a\\x80z");                         // a stray continuation byte
  EXPECT_EQ(printable("\xc3"), "\\xc3");                             // cut short at the end
  EXPECT_EQ(printable("\xc3x"), "\\xc3x");                           // cut short in the middle
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(printable("\xc2\x9b"), "\\u009b");                       // C1 CSI, well formed
  EXPECT_EQ(printable("\xe0\x80\x9b"), "\\xe0\\x80\\x9b");           // overlong ESC-ish
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(printable("\xf0\x9f\x98\x80"), "\U0001F600");
}

// Cut to a width: between units, never in an escape or a character.
TEST(Printable, AWidthCutsBetweenUnits) {
  EXPECT_EQ(printable("abcdef", 4), "abcd...");
  EXPECT_EQ(printable("abcd", 4), "abcd");
  EXPECT_EQ(printable("ab\033cd", 4), "ab...");    // \x1b would pass 4
  EXPECT_EQ(printable("ab\u00e9cd", 3), "ab...");  // é is two bytes
  EXPECT_EQ(printable("ab\u00e9cd", 4), "ab\u00e9...");
  EXPECT_EQ(printable("\033\033\033", 9), "\\x1b\\x1b...");
}

// --json: still JSON, the same value, and nothing a terminal acts on.
TEST(Printable, JsonTextKeepsItsValueAndLosesTerminalControls) {
  const nlohmann::json j = {{"reason", "\033]0;pwned\007 a\u202eb c\u009bd \u00e9 \x7f"}, {"n", 1}};
  const std::string shown = printable_json(j);
  EXPECT_EQ(nlohmann::json::parse(shown), j);
  for (char c : shown) {
    const auto b = static_cast<unsigned char>(c);
    EXPECT_TRUE(b >= 0x20 && b != 0x7f) << static_cast<int>(b);
  }
  EXPECT_NE(shown.find("\\u001b]0;pwned\\u0007"), std::string::npos) << shown;
  EXPECT_NE(shown.find("a\\u202eb"), std::string::npos) << shown;
  EXPECT_NE(shown.find("c\\u009bd"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\u00e9 \\u007f"), std::string::npos) << shown;
  // An indented dump keeps its line breaks (whitespace between tokens).
  EXPECT_EQ(printable_json_text(j.dump(2)).find("\\u000a"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(printable_json_text(j.dump(2))), j);
}

TEST(Printable, JsonOfStringsThatAreNotUtf8IsStillShown) {
  const nlohmann::json j = {{"x", "a\xff"}};  // dump() alone would throw
  const std::string shown = printable_json(j);
  EXPECT_EQ(nlohmann::json::parse(shown)["x"], "a\ufffd");
  EXPECT_EQ(printable_json_text("\"\xff\""), "\"\\ufffd\"");
  EXPECT_EQ(printable_json_text("\"\033\""), "\"\\u001b\"");  // raw C0 in a text
}

}  // namespace
}  // namespace rf
