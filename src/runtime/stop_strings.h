// Stop sequences over streamed text (OpenAI `stop`): text is released only once it cannot be the
// start of a stop string, and generation ends at the first complete match, which is not emitted.
//
//   StopStrings s({"\n\n", "User:"});
//   std::string out;
//   bool hit = s.push("Hello\n", &out);   // out = "Hello" ("\n" held back: may start "\n\n")
//   hit = s.push("\nMore", &out);         // hit = true, out unchanged: the match ends the text
//   s.flush(&out);                        // at the end of generation: release what was held
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);  // empty strings are ignored

  // Appends text that is safe to emit to *out; true when a stop string completed (everything from
  // the match on is dropped, and later pushes are ignored).
  bool push(std::string_view text, std::string* out);
  void flush(std::string* out);  // releases held-back text (no match can complete any more)
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that ended the text

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace strata
