// strata tokenize: print the token ids (and pieces) of a text with a model's tokenizer, in the
// output format of llama.cpp's llama-tokenize:
//   default / --pieces:  one line per token, "%6d -> '<piece>'" (control tokens show their text)
//   --ids:               one line, "[id, id, ...]"
//   --lines:             -f FILE holds one text per line (escapes processed as for -p); one
//                        "[id, ...]" line is printed per input line
//   --export-tokenizer-json OUT: write the GGUF's byte-level BPE vocab as a Hugging Face
//                        tokenizer.json (no text needed)
// Only the vocabulary is read (any GGUF with tokenizer.ggml.* metadata works, weights or not), or
// a Hugging Face tokenizer.json given with --tokenizer or found in a checkpoint directory -m DIR.
// -p text has its escapes processed (\n \r \t \' \" \\ \xHH) unless --no-escape, as llama.cpp does;
// -f files are tokenized byte for byte (a trailing newline is a token too).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "command.h"
#include "format/gguf.h"
#include "runtime/perplexity.h"
#include "text/tokenizer.h"
#include "text/tokenizer_json_writer.h"

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

int export_tokenizer_json(const std::string& model_path, const std::string& out_path) {
  auto gguf = strata::GgufFile::open(model_path);
  if (!gguf.ok()) return fail(gguf.message());
  auto data = strata::read_vocab_data(**gguf);
  if (!data.ok()) return fail(model_path + ": " + data.message());
  auto json = strata::text::to_tokenizer_json(*data);
  if (!json.ok()) return fail(model_path + ": " + json.message());
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (!out) return fail("cannot create " + out_path);
  const bool ok = std::fwrite(json->data(), 1, json->size(), out) == json->size();
  if (std::fclose(out) != 0 || !ok) return fail("cannot write " + out_path);
  return 0;
}

int cmd_tokenize(int argc, char** argv) {
  std::string model_path, tokenizer_path, prompt, file, export_json;
  bool add_special = false, parse_special = false, ids = false, pieces = false, no_escape = false,
       show_count = false, lines = false;
  CLI::App app{"Print the tokens of a text (like llama.cpp's llama-tokenize)", "strata tokenize"};
  auto* m =
      app.add_option("-m,--model", model_path,
                     "GGUF model (only its vocabulary is read) or checkpoint directory (its tokenizer.json)");
  auto* t =
      app.add_option("--tokenizer", tokenizer_path,
                     "Hugging Face tokenizer.json instead of a GGUF (a tokenizer_config.json beside it is "
                     "read too)");
  m->excludes(t);
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
  auto* fx =
      app.add_option("--export-tokenizer-json", export_json,
                     "write the -m GGUF's vocab as a Hugging Face tokenizer.json to this file and exit");
  fx->needs(m);
  auto* fl = app.add_flag("--lines", lines, "-f FILE has one text per line: print one [ids] line per text");
  fl->needs(f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), 2);
  }
  if (fx->count()) return export_tokenizer_json(model_path, export_json);
  if (p->count() == 0 && f->count() == 0) return fail("give the text with -p TEXT or -f FILE", 2);
  if (m->count() == 0 && t->count() == 0)
    return fail("give the model with -m MODEL.gguf (or a tokenizer.json with --tokenizer FILE)", 2);

  std::string text;
  if (f->count()) {
    auto t = strata::read_text_file(file);
    if (!t.ok()) return fail(t.message());
    text = std::move(*t);
  } else {
    text = no_escape ? prompt : process_escapes(prompt);
  }

  strata::Result<std::unique_ptr<strata::Tokenizer>> tok = strata::err("no tokenizer");
  if (t->count()) {
    tok = strata::Tokenizer::from_json_file(tokenizer_path);
  } else if (std::filesystem::is_directory(model_path)) {  // a checkpoint directory: its tokenizer.json
    const std::string json = (std::filesystem::path(model_path) / "tokenizer.json").string();
    if (!std::filesystem::exists(json))
      return fail(model_path + " is a directory without tokenizer.json (give --tokenizer FILE)", 2);
    tok = strata::Tokenizer::from_json_file(json);
  } else {
    auto gguf = strata::GgufFile::open(model_path);
    if (!gguf.ok()) return fail(gguf.message());
    tok = strata::Tokenizer::from_gguf(**gguf);
  }
  if (!tok.ok()) return fail(tok.message());

  auto id_list = [](const std::vector<int32_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]\n";
  };
  std::string line;
  if (lines) {
    size_t n = 0;
    for (size_t pos = 0; pos < text.size(); ++n) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string one = text.substr(pos, end - pos);
      line = id_list((*tok)->encode(no_escape ? one : process_escapes(one), add_special, parse_special));
      std::fwrite(line.data(), 1, line.size(), stdout);
      pos = end + 1;
    }
    if (show_count) std::printf("Total number of texts: %zu\n", n);
    if (std::fflush(stdout) != 0) return fail("cannot write the output");
    return 0;
  }
  const std::vector<int32_t> out = (*tok)->encode(text, add_special, parse_special);
  if (ids) {
    line = id_list(out);
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
