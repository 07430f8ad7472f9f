#include <gtest/gtest.h>

#include <string>

#include "runtime/utf8_stream.h"

namespace strata {
namespace {

TEST(Utf8Stream, HoldsSplitCharacters) {
  const std::string euro = "\xE2\x82\xAC";       // U+20AC, 3 bytes
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, 4 bytes
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xE2"), "a");
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC"
                   "b"),
            euro + "b");
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80"), emoji);
  EXPECT_FALSE(s.pending());
}

TEST(Utf8Stream, EveryByteSplitReassembles) {
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Utf8Stream s;
    std::string out = s.push(text.substr(0, cut));
    EXPECT_EQ(utf8_complete_prefix(out), out.size());
    out += s.push(text.substr(cut));
    out += s.flush();
    EXPECT_EQ(out, text);
  }
}

TEST(Utf8Stream, InvalidBytesPassThrough) {
  Utf8Stream s;
  EXPECT_EQ(s.push("\xFF"
                   "x"),
            "\xFF"
            "x");
  EXPECT_EQ(s.push("\x80"), "\x80");  // stray continuation byte
  EXPECT_EQ(s.push("\xE2\x82"), "");
  EXPECT_EQ(s.flush(), "\xE2\x82");  // incomplete tail still comes out at the end
}

}  // namespace
}  // namespace strata
