// A DeepSeek-V4.1 checkpoint directory with a tokenizer.json (fixtures-v41's sparse model plus a
// hand-written byte-level tokenizer with DeepSeek's control tokens) used as text: `tokenize -m DIR`,
// `run -m DIR -p`, `--tokenizer FILE` (its errors name the file), and `serve -m DIR`, whose chat
// format is the DeepSeek-V4 one (architecture default) in /apply-template, /tokenize and
// /v1/chat/completions (thinking on and off).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/cli.h"
#include "common/fixtures.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using strata::testing::Proc;

// ids 0..5: DeepSeek's control tokens; 6..99: the printable ASCII characters '!'..'~'; 100 "Ġ"
// (space), 101 "Ċ" (newline), 102 <unk>, 103 "Hi" (the one merge).
std::string tokenizer_json() {
  nlohmann::json vocab = {{"<｜begin▁of▁sentence｜>", 0},
                          {"<｜end▁of▁sentence｜>", 1},
                          {"<｜User｜>", 2},
                          {"<｜Assistant｜>", 3},
                          {"<think>", 4},
                          {"</think>", 5}};
  for (char c = '!'; c <= '~'; ++c) vocab[std::string(1, c)] = 6 + (c - '!');
  vocab["\u0120"] = 100;
  vocab["\u010a"] = 101;
  vocab["<unk>"] = 102;
  vocab["Hi"] = 103;
  nlohmann::json added = nlohmann::json::array();
  const char* names[] = {"<｜begin▁of▁sentence｜>",
                         "<｜end▁of▁sentence｜>",
                         "<｜User｜>",
                         "<｜Assistant｜>",
                         "<think>",
                         "</think>"};
  for (int i = 0; i < 6; ++i) added.push_back({{"id", i}, {"content", names[i]}, {"special", i < 2}});
  const nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"vocab", vocab},
        {"merges", nlohmann::json::array({"H i"})}}}};
  return j.dump();
}

class CheckpointText : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_ckpt_text_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    ckpt_ = dir_ / "ckpt";
    fs::create_directories(ckpt_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // The sparse fixture model's files, linked into ckpt_, plus the tokenizer files.
  void make_checkpoint(const std::string& v41) {
    for (const char* f : {"config.json", "model.safetensors", "engram_meta.json"})
      fs::create_symlink(fs::path(v41) / "sparse" / f, ckpt_ / f);
    std::ofstream(ckpt_ / "tokenizer.json") << tokenizer_json();
    std::ofstream(ckpt_ / "tokenizer_config.json")
        << R"({"add_bos_token": true, "bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"})";
  }
  Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  fs::path dir_, ckpt_;
};

TEST_F(CheckpointText, TokenizeAndRunUseTheDirectorysTokenizer) {
  STRATA_REQUIRE_FIXTURES_V41(v41);
  make_checkpoint(v41);
  Proc t = strata("tokenize -m " + ckpt_.string() + " -p Hi --ids --add-special");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(t.out, "[0, 103]\n");  // BOS, "Hi"
  Proc r = strata("run -m " + ckpt_.string() + " -p Hi -n 3 --temp 0 -t 1 --verbose-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("prompt is 2 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/    2 tokens"), std::string::npos) << r.err;
  // --tokenizer: a missing or broken file is named.
  strata::testing::expect_one_line_error(
      strata("run -m " + ckpt_.string() + " -p Hi -n 1 --tokenizer " + (dir_ / "none.json").string()),
      "none.json", true);
  std::ofstream(dir_ / "bad.json") << R"({"model": {"type": "WordPiece"}})";
  strata::testing::expect_one_line_error(
      strata("run -m " + ckpt_.string() + " -p Hi -n 1 --tokenizer " + (dir_ / "bad.json").string()),
      "bad.json", true);
  // A tokenizer with more ids than the model's vocabulary (256) is refused, naming both sizes.
  auto big = nlohmann::json::parse(tokenizer_json());
  for (int i = 0; i < 200; ++i) big["model"]["vocab"]["t" + std::to_string(i)] = 104 + i;
  std::ofstream(dir_ / "big.json") << big.dump();
  strata::testing::expect_one_line_error(
      strata("run -m " + ckpt_.string() + " -p Hi -n 1 --tokenizer " + (dir_ / "big.json").string()),
      "has 304 tokens, the model's vocabulary only 256", true);
  // Without tokenizer.json the directory has no tokenizer: the error says what to give.
  fs::remove(ckpt_ / "tokenizer.json");
  strata::testing::expect_one_line_error(strata("run -m " + ckpt_.string() + " -p Hi -n 1"), "--tokenizer",
                                         true);
}

TEST_F(CheckpointText, ServeChatsWithTheDeepseekV4Format) {
  STRATA_REQUIRE_FIXTURES_V41(v41);
  make_checkpoint(v41);
  const std::string bin = strata::testing::strata_binary(), log = (dir_ / "serve.log").string();
  std::vector<std::string> args = {bin,   "serve", "-m", ckpt_.string(), "--port", "0",
                                   "-np", "1",     "-c", "64",           "-t",     "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  int port = 0;
  const std::string mark = "listening on http://127.0.0.1:";
  for (int i = 0; i < 600 && port == 0; ++i) {
    const std::string text = strata::testing::slurp(log);
    const size_t at = text.find(mark);
    if (at != std::string::npos && text.find('\n', at) != std::string::npos)
      port = std::atoi(text.c_str() + at + mark.size());
    else if (text.find("error") != std::string::npos)
      break;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (port == 0) kill(pid, SIGKILL);
  ASSERT_GT(port, 0) << strata::testing::slurp(log);
  EXPECT_NE(strata::testing::slurp(log).find("chat format deepseek4"), std::string::npos)
      << strata::testing::slurp(log);
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const std::string msgs =
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}])";
  auto a = c.Post("/apply-template", msgs + "}", "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200) << a->body;
  EXPECT_EQ(nlohmann::json::parse(a->body)["prompt"], "S<｜User｜>Hi<｜Assistant｜></think>");
  // Thinking on (chat_template_kwargs, as vLLM / llama-server take it): the reply opens <think>.
  a = c.Post("/apply-template", msgs + R"(, "chat_template_kwargs": {"enable_thinking": true}})",
             "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(nlohmann::json::parse(a->body)["prompt"], "S<｜User｜>Hi<｜Assistant｜><think>") << a->body;
  a = c.Post("/apply-template", msgs + R"(, "chat_template_kwargs": {"enable_thinking": 1}})",
             "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 400) << a->body;
  auto t = c.Post("/tokenize", msgs + R"(, "add_special_tokens": true})", "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(nlohmann::json::parse(t->body)["tokens"], nlohmann::json({0, 56, 2, 103, 3, 5}));
  auto r =
      c.Post("/v1/chat/completions", msgs + R"(, "max_tokens": 2, "temperature": 0})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["usage"]["prompt_tokens"], 6) << r->body;
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << strata::testing::slurp(log);
}

}  // namespace
