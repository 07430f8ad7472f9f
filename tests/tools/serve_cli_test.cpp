// `strata serve` as a user starts it: bad flags are one-line errors; a live server on a free port
// answers a completion, writes --expert-profile and exits 0 on SIGTERM.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <thread>

#include "common/cli.h"
#include "common/fixtures.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using strata::testing::Proc;

class ServeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_serve_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  static std::string model() { return strata::testing::source_dir() + "/tests/data/bundled_smoke.gguf"; }
  fs::path dir_;
};

TEST_F(ServeCli, BadFlagsAreOneLineErrors) {
  strata::testing::expect_one_line_error(strata("serve -m " + (dir_ / "none.gguf").string()), "none.gguf",
                                         true);
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " --parallel 0"), "--parallel 0",
                                         true);
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " --port 70000"), "--port", true);
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " --chat-template nope"),
                                         "--chat-template", true);
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " -c 12x"), "-c", true);
  const std::string pem = (dir_ / "missing.pem").string();  // TLS files: the error names the file
  strata::testing::expect_one_line_error(
      strata("serve -m " + model() + " --port 0 --ssl-key-file " + pem + " --ssl-cert-file " + pem), pem,
      true);
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " --kv-budget 12Q"), "--kv-budget",
                                         true);
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " --block-size 0"), "--block-size",
                                         true);
  // --jinja with a template file that does not parse: the file, line and column.
  const fs::path bad = dir_ / "bad.jinja";
  std::ofstream(bad) << "{% for m in messages %}\n{{ m.content | }}{% endfor %}";
  strata::testing::expect_one_line_error(
      strata("serve -m " + model() + " --jinja --chat-template-file " + bad.string()),
      bad.string() + ": chat template: line 2, column 16: expected a filter name", true);
  // A budget without room for one block of the model's KV (after loading it).
  strata::testing::expect_one_line_error(strata("serve -m " + model() + " --kv-budget 1K"),
                                         "holds no KV block", true);
}

TEST_F(ServeCli, ServesAndStopsOnSigterm) {
  const std::string bin = strata::testing::strata_binary(), log = (dir_ / "serve.log").string();
  const std::string profile = (dir_ / "prof.csv").string();
  std::vector<std::string> args = {
      bin,  "serve", "-m",      model(), "--port",           "0",    "-np", "2", "-c", "128",
      "-t", "1",     "--alias", "tiny",  "--expert-profile", profile};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // The server says where it listens once it is up.
  int port = 0;
  const std::string mark = "listening on http://127.0.0.1:";
  for (int i = 0; i < 600 && port == 0; ++i) {
    const std::string text = strata::testing::slurp(log);
    const size_t at = text.find(mark);
    if (at != std::string::npos && text.find('\n', at) != std::string::npos)
      port = std::atoi(text.c_str() + at + mark.size());
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << strata::testing::slurp(log);
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto r = c.Post("/v1/completions", R"({"prompt": "The", "max_tokens": 4, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto b = nlohmann::json::parse(r->body);
  EXPECT_EQ(b["model"], "tiny");
  EXPECT_EQ(b["usage"]["completion_tokens"], 4);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(nlohmann::json::parse(m->body)["data"][0]["meta"]["n_slots"], 2);
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << strata::testing::slurp(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << strata::testing::slurp(log);
  EXPECT_NE(strata::testing::slurp(log).find("SIGTERM, stopping"), std::string::npos);
  EXPECT_TRUE(fs::exists(profile)) << strata::testing::slurp(
      log);  // the expert profile is saved on the way out
}

}  // namespace

namespace {

TEST_F(ServeCli, LoadtestInProcessReportsPercentiles) {
  const std::string json = (dir_ / "lt.json").string();
  Proc p = strata("loadtest -m " + model() + " --parallel 2 -c 128 -t 1 --concurrency 2 --requests 4 -n 3 " +
                  "--classes a:3,b:20 --json " + json);
  ASSERT_EQ(p.code, 0) << p.err << p.out;
  EXPECT_NE(p.out.find("ttft50"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("server: 2 slots x 128 context"), std::string::npos) << p.out;
  auto j = nlohmann::json::parse(strata::testing::slurp(json));
  EXPECT_EQ(j["classes"][2]["gen_tokens"], 12);
  EXPECT_EQ(j["server"]["slots"], 2);
  strata::testing::expect_one_line_error(strata("loadtest"), "give either --url", true);
  strata::testing::expect_one_line_error(strata("loadtest --url ftp://x:1"), "is not http://HOST:PORT", true);
  strata::testing::expect_one_line_error(strata("loadtest -m " + model() + " --classes short"), "--classes",
                                         true);
}

}  // namespace
