// StopStrings: text is held back only while it may start a stop string; the first complete match
// ends the text and is not emitted.
#include "runtime/stop_strings.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(StopStrings, HoldsBackPossibleStartsOnly) {
  StopStrings s({"\n\n", "User:"});
  std::string out;
  EXPECT_FALSE(s.push("Hello\n", &out));
  EXPECT_EQ(out, "Hello");  // "\n" may start "\n\n"
  EXPECT_FALSE(s.push("Us", &out));
  EXPECT_EQ(out, "Hello\n");  // "\nUs": "Us" may start "User:", the "\n" cannot start anything now
  EXPECT_FALSE(s.push("ually", &out));
  EXPECT_EQ(out, "Hello\nUsually");
  s.flush(&out);
  EXPECT_EQ(out, "Hello\nUsually");
  EXPECT_FALSE(s.stopped());
}

TEST(StopStrings, MatchAcrossPiecesEndsTheText) {
  StopStrings s({"User:"});
  std::string out;
  EXPECT_FALSE(s.push("answer. Use", &out));
  EXPECT_EQ(out, "answer. ");
  EXPECT_TRUE(s.push("r: more", &out));
  EXPECT_EQ(out, "answer. ");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "User:");
  EXPECT_TRUE(s.push("ignored", &out));
  s.flush(&out);
  EXPECT_EQ(out, "answer. ");
}

TEST(StopStrings, EarliestMatchWinsAndFlushReleasesTheTail) {
  StopStrings s({"cd", "b"});
  std::string out;
  EXPECT_TRUE(s.push("abcd", &out));
  EXPECT_EQ(out, "a");
  EXPECT_EQ(s.matched(), "b");
  StopStrings t({"xyz", ""});  // empty stop strings are ignored
  out.clear();
  EXPECT_FALSE(t.push("abxy", &out));
  EXPECT_EQ(out, "ab");
  t.flush(&out);
  EXPECT_EQ(out, "abxy");
  StopStrings none({});
  out.clear();
  EXPECT_FALSE(none.push("anything\n", &out));
  EXPECT_EQ(out, "anything\n");
}

}  // namespace
}  // namespace strata
