// strata tokenize: print the token ids (and pieces) of a text with a model's tokenizer, in the
// output format of llama.cpp's llama-tokenize:
//   default / --pieces:  one line per token, "%6d -> '<piece>'" (control tokens show their text)
//   --ids:               one line, "[id, id, ...]"
// Only the vocabulary is read (any GGUF with tokenizer.ggml.* metadata works, weights or not).
// -p text has its escapes processed (\n \r \t \' \" \\ \xHH) unless --no-escape, as llama.cpp does;
// -f files are tokenized byte for byte (a trailing newline is a token too).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "format/gguf.h"
#include "runtime/perplexity.h"
#include "text/tokenizer.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata tokenize: error: %s\n", msg.c_str());
  return code;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Unknown escapes (and a lone trailing backslash) are kept as written.
std::string process_escapes(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      default:
        if (c == 'x' && i + 2 < in.size() && hex_digit(in[i + 1]) >= 0 && hex_digit(in[i + 2]) >= 0) {
          out += static_cast<char>(hex_digit(in[i + 1]) * 16 + hex_digit(in[i + 2]));
          i += 2;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

int cmd_tokenize(int argc, char** argv) {
  std::string model_path, prompt, file;
  bool add_special = false, parse_special = false, ids = false, pieces = false, no_escape = false,
       show_count = false;
  CLI::App app{"Print the tokens of a text (like llama.cpp's llama-tokenize)", "strata tokenize"};
  app.add_option("-m,--model", model_path, "GGUF model (only its vocabulary is read)")->required();
  auto* p = app.add_option("-p,--prompt", prompt, "text to tokenize (escapes like \\n are processed)");
  auto* f = app.add_option("-f,--file", file, "tokenize the bytes of this file");
  p->excludes(f);
  app.add_flag("--add-special", add_special, "add BOS/EOS as the vocabulary's metadata says");
  app.add_flag("--parse-special", parse_special, "text like <|im_start|> becomes its control token");
  auto* fi = app.add_flag("--ids", ids, "print only the ids, as [1, 2, 3]");
  auto* fp = app.add_flag("--pieces", pieces, "print 'id -> piece' per token (the default)");
  fi->excludes(fp);
  app.add_flag("--no-escape", no_escape, "take -p text literally");
  app.add_flag("--show-count", show_count, "print the number of tokens at the end");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), 2);
  }
  if (p->count() == 0 && f->count() == 0) return fail("give the text with -p TEXT or -f FILE", 2);

  std::string text;
  if (f->count()) {
    auto t = strata::read_text_file(file);
    if (!t.ok()) return fail(t.message());
    text = std::move(*t);
  } else {
    text = no_escape ? prompt : process_escapes(prompt);
  }

  auto gguf = strata::GgufFile::open(model_path);
  if (!gguf.ok()) return fail(gguf.message());
  auto tok = strata::Tokenizer::from_gguf(**gguf);
  if (!tok.ok()) return fail(tok.message());

  const std::vector<int32_t> out = (*tok)->encode(text, add_special, parse_special);
  std::string line;
  if (ids) {
    line = "[";
    for (size_t i = 0; i < out.size(); ++i) line += (i ? ", " : "") + std::to_string(out[i]);
    line += "]\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  } else {
    for (int32_t id : out) {
      char head[32];
      std::snprintf(head, sizeof head, "%6d -> '", id);
      line = head + (*tok)->token_to_piece(id, /*special=*/true) + "'\n";
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
  }
  if (show_count) std::printf("Total number of tokens: %zu\n", out.size());
  if (std::fflush(stdout) != 0) return fail("cannot write the output");
  return 0;
}

const strata::cli::Registrar reg{"tokenize", "print the token ids (and pieces) of a text", &cmd_tokenize};

}  // namespace
