// The streaming redactor (issue 11): every form of every value, wherever it
// falls, in every chunking; text without a secret passes byte for byte; only
// a live partial match is held back.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "calls/redacting_sink.h"
#include "redact/forms.h"
#include "redact/patterns.h"
#include "redact/stream_redactor.h"

namespace rf::redact {
namespace {

constexpr char kSecret[] = "sk-test-4f2a9c1e7b3d5a8f";

std::string b64(std::string_view in, bool url = false) {
  const char* a = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(a[(v >> s) & 63]);
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {a[(v >> 18) & 63], a[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {a[(v >> 18) & 63], a[(v >> 12) & 63], a[(v >> 6) & 63], '='};
  }
  return out;
}

std::string hex(std::string_view in, bool upper) {
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : in) out += {d[c >> 4], d[c & 15]};
  return out;
}

std::string feed_in_chunks(StreamRedactor& r, const std::string& text,
                           const std::vector<size_t>& cuts) {
  std::string out;
  size_t at = 0;
  for (size_t cut : cuts) {
    out += r.feed(std::string_view(text).substr(at, cut - at));
    at = cut;
  }
  out += r.feed(std::string_view(text).substr(at));
  out += r.finish();
  return out;
}

std::shared_ptr<const Patterns> one(const std::string& key, const std::string& value) {
  return compile_patterns({{key, value}});
}

TEST(RedactForms, EveryFormOfAKnownValue) {
  auto forms = forms_of("a\"b/c d");
  std::vector<std::string> texts;
  for (const auto& [f, t] : forms) texts.push_back(std::string(to_string(f)) + "=" + t);
  EXPECT_EQ(texts, (std::vector<std::string>{
                       "raw=a\"b/c d", "base64=YSJiL2MgZ", "base64=EiYi9jIG", "base64=hImIvYyBk",
                       "base64=YSJiL2MgZA==", "base64url=YSJiL2MgZA",
                       "base64=EiYi9jIGQ=", "base64url=EiYi9jIGQ", "hex=6122622f632064",
                       "HEX=6122622F632064", "url=a%22b%2Fc%20d", "json=a\\\"b/c d",
                       "url_lower=a%22b%2fc%20d", "url_slash=a%22b/c%20d", "url_plus=a%22b%2Fc+d",
                       "json_slash=a\\\"b\\/c d"}));
  // The aligned forms are substrings of any base64 stream holding the value.
  for (size_t pad = 0; pad < 3; ++pad) {
    const std::string encoded = b64(std::string(pad, 'x') + kSecret + "tail");
    bool found = false;
    for (const auto& [f, t] : forms_of(kSecret)) {
      if (f == Form::base64 && encoded.find(t) != std::string::npos) found = true;
    }
    EXPECT_TRUE(found) << "alignment " << pad;
  }
}

// Issue 40: `printf %s "$TOKEN" | base64` ends the stream with the value's
// last bits in a partial character and padding; none of it is left beside
// the marker ("[REDACTED:K]g==" kept two bits of the last byte).
TEST(Redact, AValueEndingABase64StreamLeavesNoPartOfItsLastByte) {
  for (const std::string value :
       {"sk-4f2a9c1e7b3d5a8f0", "sk-4f2a9c1e7b3d5a8f01", "sk-4f2a9c1e7b3d5a8f012"}) {
    auto p = one("K", value);
    for (const std::string before : {"", "x", "yz", "head-of-it"}) {
      const std::string encoded = b64(before + value);
      const std::string out = redact_all(*p, encoded + "\n");
      EXPECT_TRUE(out.ends_with("[REDACTED:K]\n")) << before << "|" << value << " -> " << out;
      // base64url without padding, as a JWT's segments are.
      std::string url = b64(before + value, true);
      while (!url.empty() && url.back() == '=') url.pop_back();
      const std::string out_url = redact_all(*p, url + " ");
      EXPECT_TRUE(out_url.ends_with("[REDACTED:K] ")) << url << " -> " << out_url;
    }
  }
}

TEST(Redact, EachFormIsReplacedByItsKey) {
  auto p = one("TOKEN", kSecret);
  const std::string s = kSecret;
  for (const std::string& form :
       {s, b64(s), b64(s, true), b64("x" + s), b64("yz" + s), hex(s, false), hex(s, true),
        std::string("sk-test-4f2a9c1e7b3d5a8f")}) {
    const std::string out = redact_all(*p, "<" + form + ">");
    EXPECT_NE(out.find("[REDACTED:TOKEN]"), std::string::npos) << form << " -> " << out;
    EXPECT_EQ(out.find(s.substr(0, 12)), std::string::npos) << out;
  }
  RedactionCounts counts;
  EXPECT_EQ(redact_all(*p, std::string("a ") + kSecret + " b " + hex(kSecret, true), &counts),
            "a [REDACTED:TOKEN] b [REDACTED:TOKEN]");
  EXPECT_EQ(counts, (RedactionCounts{{{"TOKEN", "raw"}, 1}, {{"TOKEN", "HEX"}, 1}}));
  // URL-encoded and JSON-escaped forms of a value that has characters to escape.
  auto q = one("PW", "p@ss w\"rd/1234");
  EXPECT_EQ(redact_all(*q, "u=p%40ss%20w%22rd%2F1234&x"), "u=[REDACTED:PW]&x");
  EXPECT_EQ(redact_all(*q, "{\"pw\":\"p@ss w\\\"rd/1234\"}"), "{\"pw\":\"[REDACTED:PW]\"}");
}

// Encodings that tools write beyond the usual ones, of a value holding the
// bytes they treat otherwise (an AWS secret key holds '/' and '+'). Each text
// below is what the real encoder printed for it: Python's urllib.parse.quote
// and quote_plus, json.dumps with PHP's '\/' and Go's \u0026 escapes, and
// bash's `export -p`; the first is RFC 3986 with lowercase hex digits.
TEST(Redact, FormsOtherEncodersWriteAreRedactedToo) {
  const std::string v = "wJal/rXUt+nFEMI&K7MD$ENG bPxRfi<CY>";
  auto p = one("KEY", v);
  for (const char* form : {
           "wJal%2frXUt%2bnFEMI%26K7MD%24ENG%20bPxRfi%3cCY%3e",
           "wJal/rXUt%2BnFEMI%26K7MD%24ENG%20bPxRfi%3CCY%3E",
           "wJal%2FrXUt%2BnFEMI%26K7MD%24ENG+bPxRfi%3CCY%3E",
           "wJal\\/rXUt+nFEMI&K7MD$ENG bPxRfi<CY>",
           "wJal/rXUt+nFEMI\\u0026K7MD$ENG bPxRfi\\u003cCY\\u003e",
           "declare -x RFV=\"wJal/rXUt+nFEMI&K7MD\\$ENG bPxRfi<CY>\"",
       }) {
    const std::string out = redact_all(*p, std::string("<") + form + ">");
    EXPECT_NE(out.find("[REDACTED:KEY]"), std::string::npos) << form << " -> " << out;
    EXPECT_EQ(out.find("K7MD"), std::string::npos) << form << " -> " << out;
  }
}

TEST(Redact, TextWithoutASecretPassesByteForByteAndNothingIsHeldWithoutAPartial) {
  auto p = one("K", kSecret);
  StreamRedactor r(p);
  const std::string text = "hello, world\n\x00\xff binary\n";
  EXPECT_EQ(r.feed(text), text);
  EXPECT_EQ(r.held(), 0u);
  // A start of the secret is held; what follows that cannot continue it goes at once.
  EXPECT_EQ(r.feed("abc sk-test-4f"), "abc ");
  EXPECT_EQ(r.held(), 10u);
  EXPECT_EQ(r.feed("X rest"), "sk-test-4fX rest");
  EXPECT_EQ(r.held(), 0u);
  EXPECT_EQ(r.feed("sk-"), "");
  EXPECT_EQ(r.finish(), "sk-");
  // An empty set redacts nothing.
  StreamRedactor none(compile_patterns({}));
  EXPECT_EQ(none.feed(kSecret), kSecret);
}

TEST(Redact, LeftmostThenLongestWhenPatternsOverlap) {
  auto p =
      compile_patterns({{"SHORT", "abcdefgh"}, {"LONG", "abcdefghijkl"}, {"MID", "efghijklmn"}});
  EXPECT_EQ(redact_all(*p, "xabcdefghijklmnz"), "x[REDACTED:LONG]mnz");
  StreamRedactor r(p);
  EXPECT_EQ(feed_in_chunks(r, "xabcdefghijklmnz", {5, 9, 10}), "x[REDACTED:LONG]mnz");
  EXPECT_EQ(redact_all(*p, "xabcdefghz"), "x[REDACTED:SHORT]z");
}

// The property: random text with secrets embedded in every form, cut into
// random chunkings, never lets a form through; and the output does not depend
// on the chunking.
TEST(Redact, PropertyNoFormSurvivesAnyChunking) {
  std::mt19937_64 rng(20261124);
  auto rand_text = [&](size_t n) {
    static const char chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n=+/-_%\"";
    std::string s;
    for (size_t i = 0; i < n; ++i) s.push_back(chars[rng() % (sizeof chars - 1)]);
    return s;
  };
  for (int iter = 0; iter < 1500; ++iter) {
    std::vector<SecretToRedact> secrets;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      std::string v = rand_text(8 + rng() % 40);
      secrets.push_back({"K" + std::to_string(i), v});
    }
    auto p = compile_patterns(secrets);
    std::string text;
    for (int part = 0; part < 6; ++part) {
      text += rand_text(rng() % 60);
      const std::string& v = secrets[rng() % secrets.size()].value;
      switch (rng() % 7) {
        case 0:
          text += v;
          break;
        case 1:
          text += b64(rand_text(rng() % 3) + v + rand_text(rng() % 3));
          break;
        case 2:
          text += b64(rand_text(rng() % 3) + v, true);
          break;
        case 3:
          text += hex(v, rng() % 2);
          break;
        case 4:
          text += b64("A=1\nKEY=" + v + "\nB=2\n");  // a tool printing its env in base64
          break;
        default:
          text += v.substr(0, v.size() / 2);  // a partial: must pass through
      }
    }
    const std::string whole = redact_all(*p, text);
    std::vector<size_t> cuts;
    for (size_t at = 0; at < text.size();) {
      at += 1 + rng() % (iter % 3 == 0 ? 2 : 64);
      if (at < text.size()) cuts.push_back(at);
    }
    StreamRedactor r(p);
    const std::string chunked = feed_in_chunks(r, text, cuts);
    ASSERT_EQ(chunked, whole) << "iteration " << iter;
    for (const auto& pat : p->patterns()) {
      ASSERT_EQ(chunked.find(pat.bytes), std::string::npos)
          << "iteration " << iter << ": form " << to_string(pat.form) << " survived";
    }
  }
  // No secret in the text: byte for byte, whatever the chunking.
  auto p = compile_patterns({{"K", "zzzz-not-in-the-text-zzzz"}});
  for (int iter = 0; iter < 200; ++iter) {
    const std::string text = rand_text(rng() % 500);
    std::vector<size_t> cuts;
    for (size_t at = 0; at < text.size();) {
      at += 1 + rng() % 17;
      if (at < text.size()) cuts.push_back(at);
    }
    StreamRedactor r(p);
    ASSERT_EQ(feed_in_chunks(r, text, cuts), text);
  }
}

// Found by redact_fuzz: a match that runs into the held-back part moves the
// cursor past it, and the matches between there and the new live partial
// must still be redacted ("5c" at 2 was let through).
TEST(Redact, MatchesAfterAMatchThatRanIntoTheHeldPartAreRedacted) {
  auto p = compile_patterns({{"A", "5c"}, {"B", "c5c753"}});
  StreamRedactor r(p);
  std::string out = r.feed("5c5");
  out += r.feed("c5c75x");
  out += r.finish();
  EXPECT_EQ(out, "[REDACTED:A][REDACTED:A][REDACTED:A]75x");
  EXPECT_EQ(out, redact_all(*p, "5c5c5c75x"));
}

TEST(Redact, ShortValuesAreStillMatched) {
  auto p = compile_patterns({{"PIN", "42"}});
  EXPECT_EQ(redact_all(*p, "a42b4 2"), "a[REDACTED:PIN]b4 2");
  StreamRedactor r(p);
  EXPECT_EQ(feed_in_chunks(r, "x4242y4", {2, 3, 6}), "x[REDACTED:PIN][REDACTED:PIN]y4");
}

// A stream cut short (a process killed, output cut at its cap) ends inside a
// value: the held start of it is not let go as it was, only a mark is.
TEST(Redact, AStreamCutShortInsideAValueReleasesNoLongPrefixOfIt) {
  auto p = one("TOKEN", kSecret);
  const std::string s = kSecret;
  for (size_t n = 8; n < s.size(); ++n) {
    StreamRedactor r(p);
    std::string out = r.feed("log: " + s.substr(0, n));
    out += r.finish();
    EXPECT_EQ(out, "log: [REDACTED:TOKEN]") << n;
    EXPECT_EQ(out.find(s.substr(0, 8)), std::string::npos) << n;
  }
  // Short starts that are no more than half of the value are ordinary text.
  StreamRedactor short_start(p);
  EXPECT_EQ(short_start.feed("x sk-te"), "x ");
  EXPECT_EQ(short_start.finish(), "sk-te");
  // More than half of a short value is marked, though under 8 bytes.
  auto pin = one("PIN", "123456");
  StreamRedactor r(pin);
  std::string out = r.feed("pin 1234");
  out += r.finish();
  EXPECT_EQ(out, "pin [REDACTED:PIN]");
  EXPECT_EQ(redact_all(*p, "cut: " + s.substr(0, s.size() - 1)), "cut: [REDACTED:TOKEN]");
}

// What the host receives when the runner cuts a call's output at its cap:
// the output up to the cap, then the runner's mark on the same stream. The
// value cut by the cap does not go out as a prefix (an audit probe got 39 of
// a 40-character token).
TEST(Redact, OutputCutAtItsCapInsideAValueReleasesNoPrefixOfIt) {
  struct Collect : OutputSink {
    void on_stdout(std::string_view d) override { out.append(d); }
    void on_stderr(std::string_view d) override { err.append(d); }
    std::string out, err;
  } next;
  const std::string token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
  calls::RedactingSink sink(next, one("GH", token));
  sink.on_stdout("token=" + token.substr(0, 39));
  sink.on_stdout("\n[ringfence: output truncated at 45 bytes]\n");
  sink.finish();
  EXPECT_EQ(next.out.find(token.substr(0, 8)), std::string::npos) << next.out;
  EXPECT_NE(next.out.find("[REDACTED:GH]"), std::string::npos) << next.out;
  EXPECT_NE(next.out.find("[ringfence: output truncated at 45 bytes]"), std::string::npos)
      << next.out;
}

// `base64` wraps at 76 characters, PEM and `openssl base64` at 64, MIME with
// "\r\n": a value's base64 form split by those breaks is still redacted,
// break and all, fed whole or cut at every byte (the start of the form held
// back until its rest shows), and `fold` splitting the raw value too. What
// leaves holds no 8 characters of any form of the value, breaks taken out.
TEST(Redact, AValueWrappedAcrossLinesIsRedactedWhereverTheStreamIsCut) {
  const std::string value = "sk-live-" + std::string("0a1b2c3d4e5f6a7b8c9d") + "ZyXwVuTsRqPoNm";
  auto p = one("TOKEN", value);
  const auto wrap = [](const std::string& text, size_t width, const std::string& brk) {
    std::string out;
    for (size_t i = 0; i < text.size(); i += width) out += text.substr(i, width) + brk;
    return out;
  };
  const auto unwrapped = [](std::string text) {
    std::erase(text, '\n');
    std::erase(text, '\r');
    return text;
  };
  const std::string env = "A=1\nPATH=/usr/bin:/bin\nTOKEN=" + value + "\nB=2\n";
  const std::vector<std::string> texts = {
      "$ env | base64\n" + wrap(b64(env), 76, "\n") + "$ done\n",
      "-----BEGIN DATA-----\n" + wrap(b64(env + env), 64, "\n") + "-----END DATA-----\n",
      "Content-Transfer-Encoding: base64\r\n\r\n" + wrap(b64("x" + env), 76, "\r\n"),
      wrap(b64("yz" + env, true), 20, "\n"),
      "folded: " + wrap(value, 10, "\n"),
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::string whole = redact_all(*p, text);
    EXPECT_NE(whole.find("[REDACTED:TOKEN]"), std::string::npos) << whole;
    for (const auto& pat : p->patterns()) {
      ASSERT_EQ(unwrapped(whole).find(pat.bytes.substr(0, 8)), std::string::npos)
          << to_string(pat.form) << " in " << whole;
    }
    // Cut once at every byte, and byte by byte: the same output.
    for (size_t cut = 1; cut < text.size(); ++cut) {
      StreamRedactor r(p);
      ASSERT_EQ(feed_in_chunks(r, text, {cut}), whole) << "cut at " << cut;
    }
    std::vector<size_t> every;
    for (size_t at = 1; at < text.size(); ++at) every.push_back(at);
    StreamRedactor r(p);
    EXPECT_EQ(feed_in_chunks(r, text, every), whole);
    EXPECT_EQ(r.held(), 0u);
  }
  // Lines of ordinary text, and a break between base64 characters that
  // hides no value, pass byte for byte.
  const std::string plain = "first line\nsecond line\r\nAbCdEfGh\nIjKlMnOp\nend\n";
  EXPECT_EQ(redact_all(*p, plain), plain);
  StreamRedactor r(p);
  std::vector<size_t> every;
  for (size_t at = 1; at < plain.size(); ++at) every.push_back(at);
  EXPECT_EQ(feed_in_chunks(r, plain, every), plain);
}

// A stream that ends with a value and a line break ended there: the break
// is no wrap of the value into a longer one that starts with it (a JIT test
// caught "[REDACTED:LONGER]" for "[REDACTED:TOKEN]\n").
TEST(Redact, AValueThenALineBreakAtTheEndIsThatValue) {
  const std::string value = "ghp_0123456789abcdefghij";
  auto p = compile_patterns({{"TOKEN", value}, {"LONGER", value + "XYZ0123456789"}});
  for (const std::string& text : {value + "\n", value + "\r\n", "x\n" + value + "\n"}) {
    const std::string want = std::string(text.substr(0, text.find(value))) + "[REDACTED:TOKEN]" +
                             text.substr(text.find(value) + value.size());
    EXPECT_EQ(redact_all(*p, text), want);
    for (size_t cut = 1; cut < text.size(); ++cut) {
      StreamRedactor r(p);
      EXPECT_EQ(feed_in_chunks(r, text, {cut}), want) << "cut at " << cut;
    }
  }
  // Cut right after the break, with more to come: the rest decides.
  StreamRedactor r(p);
  std::string out = r.feed(value + "\n");
  out += r.feed("XYZ0123456789 tail\n");
  out += r.finish();
  EXPECT_EQ(out, "[REDACTED:LONGER] tail\n");
}

// A stream cut short inside a wrapped form: its start is not let go.
TEST(Redact, AStreamCutShortInsideAWrappedValueReleasesNoLongPrefixOfIt) {
  const std::string value = "sk-test-4f2a9c1e7b3d5a8f";
  auto p = one("TOKEN", value);
  StreamRedactor r(p);
  std::string out = r.feed("data: " + value.substr(0, 6) + "\n");
  out += r.feed(value.substr(6, 6));
  out += r.finish();
  EXPECT_EQ(out, "data: [REDACTED:TOKEN]");
}

}  // namespace
}  // namespace rf::redact
