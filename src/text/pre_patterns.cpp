// The pre-tokenizer regex lists, keyed by `tokenizer.ggml.pre`. The patterns are the ones
// llama.cpp (de3ff81, src/llama-vocab.cpp) evaluates, so token ids match its tokenizer; they are
// spelled here with \x{...} escapes so no editor can normalise the non-ASCII ranges.
#include <initializer_list>

#include "text/pre_tokenizer.h"

namespace strata::text {
namespace {

// 's|'t|... then letters / numbers / other runs each with an optional leading space.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Case-insensitive contractions; a letter run may take one leading non-letter/non-digit; digits
// in groups of up to 3; punctuation runs swallow trailing newlines.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// As llama3, but every digit is its own word.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen3.5: letter runs also take combining marks.
constexpr const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// o200k (gpt-4o): "upper* lower+" / "upper+ lower*" letter runs. llama.cpp spells \p{Lu}-style
// classes as "letter that is not ASCII a-z / A-Z", so only ASCII case is distinguished.
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// deepseek-llm: Latin/Greek/Cyrillic/... letter runs, ASCII + fullwidth punctuation runs,
// trailing whitespace, CJK + Hangul runs, digit runs.
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// deepseek-v3 / joyai-llm: digits by 3, CJK + kana runs, then the main split.
constexpr const char* kDeepseek3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
constexpr const char* kDeepseek3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Family {
  const char* family;
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges;
  bool add_bos;
  bool clean_spaces;
};

// clang-format off
const Family kFamilies[] = {
    {"default", {"default", ""},
     {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false, false, true},
    {"gpt2", {"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "gigachat", "jina-v2-es",
              "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4", "roberta-bpe", "jina-v1-en",
              "jina-v2-code", "trillion"},
     {kGpt2}, false, false, true},
    {"llama3", {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
     {kLlama3}, true, true, true},
    {"dbrx", {"dbrx", "smaug-bpe"}, {kLlama3}, false, false, true},
    {"qwen2", {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"}, {kQwen2}, false, false, false},
    {"stablelm2", {"stablelm2", "megrez"}, {kQwen2}, false, false, true},
    {"qwen35", {"qwen35"}, {kQwen35}, false, false, false},
    {"deepseek-llm", {"deepseek-llm"},
     {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}, false, false, false},
    {"deepseek-coder", {"deepseek-coder"},
     {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}, false, false, false},
    {"deepseek-v3", {"deepseek-v3", "joyai-llm", "hunyuan-dense", "hy_v4"},
     {R"(\p{N}{1,3})", kDeepseek3Cjk, kDeepseek3Main}, false, false, false},
    {"gpt-4o", {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}, false, false, false},
    {"tekken", {"tekken"}, {kTekken}, true, true, false},
    {"starcoder", {"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
     {R"(\p{N})", kGpt2}, false, false, true},
    {"command-r", {"command-r", "smollm"}, {R"(\p{N})", kGpt2}, false, false, false},
    {"falcon", {"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, false, false, true},
};
// clang-format on

}  // namespace

Result<PreTokenizerInfo> pre_tokenizer_info(std::string_view pre_name) {
  for (const Family& f : kFamilies) {
    for (const char* n : f.names) {
      if (pre_name != n) continue;
      PreTokenizerInfo info;
      info.name = f.family;
      for (const char* r : f.regexes) info.regexes.emplace_back(r);
      info.ignore_merges = f.ignore_merges;
      info.add_bos = f.add_bos;
      info.clean_spaces = f.clean_spaces;
      return info;
    }
  }
  return err("unknown pre-tokenizer '%.*s' (tokenizer.ggml.pre)", static_cast<int>(pre_name.size()),
             pre_name.data());
}

}  // namespace strata::text
