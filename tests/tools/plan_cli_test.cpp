// `strata plan`, `strata replay`, `strata pack` end to end: outputs, JSON keys, exit codes and
// one-line errors on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/cli.h"
#include "common/fixtures.h"

namespace {

namespace fs = std::filesystem;

using strata::testing::Proc;
using strata::testing::slurp;

class PlanCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_plan_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    model_ = path("m.gguf");
    Proc r = strata(
        "synth --arch qwen3moe --layers 2 --embd 64 --heads 4 --kv-heads 2 --experts 8 --top-k 2 "
        "--expert-ffn 64 "
        "--vocab 300 --type q8_0 --router-skew 1 -o " +
        model_);
    ASSERT_EQ(r.code, 0) << r.err;
    // A routing trace over the model's grid: 60 tokens, skewed.
    std::ofstream t(path("t.jsonl"));
    t << "{\"strata_routing_trace\":1,\"n_layers\":2,\"n_experts\":8,\"top_k\":2}\n";
    for (int tok = 0; tok < 60; ++tok)
      for (int l = 0; l < 2; ++l)
        t << "{\"token_idx\":" << tok << ",\"layer\":" << l << ",\"experts\":[" << (tok % 3 == 0 ? 5 : 1)
          << "," << (2 + tok % 3) << "],\"weights\":[0.6,0.4]}\n";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  static std::string path(const std::string& n) { return (dir_ / n).string(); }
  static void expect_one_line_error(const Proc& p, const std::string& needle) {
    strata::testing::expect_one_line_error(p, needle, false);
  }
  static inline fs::path dir_;
  static inline std::string model_;
};

TEST_F(PlanCli, PlanModelTextAndJson) {
  Proc p = strata("plan -m " + model_);
  ASSERT_EQ(p.code, 0) << p.err;
  for (const char* k :
       {"dense_weights", "expert_weights_resident", "kv_cache", "scratch", "io_buffers", "total"})
    EXPECT_NE(p.out.find(k), std::string::npos) << k << "\n" << p.out;
  p = strata("plan -m " + model_ + " --json -c 1K --batch 2");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  for (const char* k :
       {"dense_weights", "expert_weights_resident", "kv_cache", "scratch", "io_buffers", "total"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["kv_cache"].get<uint64_t>(),
            2u * 2 * 2 * 2 * 16 * 2 * 1024);  // batch x layers x K,V x heads x dim x f16 (default) x ctx
  EXPECT_EQ(j["n_ctx"].get<int64_t>(), 1024);
}

// serve's spill tiers priced from the command line: -cram and --prefix-cache-dir(-size).
TEST_F(PlanCli, PlanPricesTheSpillTiers) {
  Proc p = strata("plan -m " + model_ +
                  " --json -c 1K --batch 2 -cram 3M --prefix-cache-dir x --prefix-cache-dir-size 1G");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j["kv_ram_tier"].get<uint64_t>(), 3u << 20);
  const uint64_t block = 16u * 2 * 2 * 2 * 16 * 2;  // positions x layers x K,V x heads x dim x f16
  EXPECT_EQ(j["kv_spill_queue"].get<uint64_t>(), 1024 * (block + 16 * 4));  // 32 MiB / 4 KiB: 1024 at most
  EXPECT_EQ(j["kv_ssd_budget"].get<uint64_t>(), uint64_t{1} << 30);
  EXPECT_EQ(j["kv_ssd_file_bytes"].get<uint64_t>(), 128 + 16 * 4 + block);
  p = strata("plan -m " + model_ + " -c 1K --prefix-cache-dir x");  // -cram: serve's default
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("kv_ram_tier"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("prefix_cache_dir"), std::string::npos) << p.out;
  expect_one_line_error(strata("plan -m " + model_ + " --prefix-cache-dir-size 1G"),
                        "needs --prefix-cache-dir");
}

TEST_F(PlanCli, PlanRamBudgetAndTooSmall) {
  Proc p = strata("plan -m " + model_ + " --ram 1G");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("everything fits"), std::string::npos) << p.out;
  p = strata("plan -m " + model_ + " --ram 1M --margin 64K");
  expect_one_line_error(p, "minimum RAM");
  EXPECT_NE(p.out.find("DOES NOT FIT"), std::string::npos) << p.out;
}

// The I/O engine is priced as given: a thread pool by its stacks, sync (the compute thread reads) at
// nothing; the rest of the bill does not move.
TEST_F(PlanCli, PlanPricesTheIoBackend) {
  auto plan = [&](const std::string& backend) {
    Proc p =
        strata("plan -m " + model_ + " --json --expert-budget 1M --io-threads 3 --io-backend " + backend);
    EXPECT_EQ(p.code, 0) << p.err;
    return nlohmann::json::parse(p.out);
  };
  const auto threads = plan("threads"), sync = plan("sync");
  EXPECT_EQ(threads["io_backend"], "threads");
  EXPECT_EQ(sync["io_backend"], "sync");
  EXPECT_EQ(threads["io_buffers"].get<uint64_t>(), 3u * 64 * 1024);
  EXPECT_EQ(sync["io_buffers"].get<uint64_t>(), 0u);
  EXPECT_EQ(threads["total"].get<uint64_t>() - sync["total"].get<uint64_t>(), 3u * 64 * 1024);
  Proc t = strata("plan -m " + model_ + " --expert-budget 1M --io-backend sync");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("sync reads by the compute thread"), std::string::npos) << t.out;
  expect_one_line_error(strata("plan -m " + model_ + " --io-backend aio"), "--io-backend");
}

TEST_F(PlanCli, PlanConfigs) {
  const std::string d = std::string(STRATA_SOURCE_DIR) + "/tests/data/";
  Proc p = strata("plan --config " + d + "deepseek-v4-flash.config.json --ram 64G -c 64K --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j["arch"], "deepseek_v4");
  EXPECT_GT(j["recommended_expert_budget"].get<uint64_t>(), 40ull << 30);
  EXPECT_TRUE(j["fits"].get<bool>());
  p = strata("plan --config " + d + "plan/qwen3-30b-a3b.config.json --expert-type q4_k");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("routed experts q4_K"), std::string::npos) << p.out;
}

TEST_F(PlanCli, PlanBadInput) {
  expect_one_line_error(strata("plan"), "-m MODEL or --config");
  expect_one_line_error(strata("plan -m " + model_ + " --kv-type f8"), "unknown KV type 'f8'");
  expect_one_line_error(strata("plan -m " + model_ + " --ram lots"), "--ram");
  expect_one_line_error(strata("plan -m /nonexistent.gguf"), "/nonexistent.gguf");
  expect_one_line_error(strata("plan --config /nonexistent.json"), "/nonexistent.json");
  expect_one_line_error(strata("plan -m " + model_ + " --batch 0"), "--batch");
}

// --miss-policy: experts that miss the GPU get miss slots, billed in the routed experts' bytes as
// run allocates them (auto, copy; none under cpu, none when nothing misses); a bad value names the
// flag and the allowed values.
TEST_F(PlanCli, PlanMissSlots) {
  Proc p = strata("plan -m " + model_ + " -c 256 --gpu-budget 1G --n-cpu-moe 1");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find(" miss slots ("), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("--miss-policy auto)"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("routed experts 102.0 KiB:"), std::string::npos) << p.out;  // + the slots
  p = strata("plan -m " + model_ + " -c 256 --gpu-budget 1G --n-cpu-moe 1 --miss-policy cpu");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out.find("miss slots"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("routed experts 102.0 KiB:"), std::string::npos) << p.out;
  p = strata("plan -m " + model_ + " -c 256 --gpu-budget 1G --miss-policy copy");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out.find("miss slots"), std::string::npos) << p.out;  // every expert fits
  expect_one_line_error(strata("plan -m " + model_ + " --gpu-budget 1G --miss-policy foo"),
                        "--miss-policy 'foo': expected auto, cpu or copy");
}

// --gpu-budget: the device line (what run --device places on a GPU, + KV); over the budget: exit 1
// naming the bytes and the budget.
TEST_F(PlanCli, PlanGpuBudget) {
  Proc p = strata("plan -m " + model_ + " -c 256 --gpu-budget 1G");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("gpu: dense weights "), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("of --gpu-budget 1.0 GiB: fits"), std::string::npos) << p.out;
  // The routed experts fill the rest (2 layers of 8 experts: the plan's 12.8 KiB each), as
  // run places them; --n-cpu-moe / -ot keep layers on the host.
  EXPECT_NE(p.out.find("routed experts 204.0 KiB: 16 of 16 experts (204.0 KiB) on the GPU"),
            std::string::npos)
      << p.out;
  p = strata("plan -m " + model_ + " -c 256 --gpu-budget 1G --n-cpu-moe 1");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("8 of 16 experts (102.0 KiB) on the GPU; layers with every expert on the host: 0"),
            std::string::npos)
      << p.out;
  p = strata("plan -m " + model_ + " -c 256 --gpu-budget 1G -ot exps=CPU");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("0 of 16 experts"), std::string::npos) << p.out;
  expect_one_line_error(strata("plan -m " + model_ + " --gpu-budget 1G -ot 'exps=GPU7'"),
                        "buffer type GPU7 is neither CPU nor the device");
  Proc over = strata("plan -m " + model_ + " -c 256 --gpu-budget 1K");
  EXPECT_EQ(over.code, 1);
  EXPECT_NE(over.err.find("over --gpu-budget 1.0 KiB"), std::string::npos) << over.err;
  expect_one_line_error(strata("plan --config " + strata::testing::source_dir() +
                               "/tests/data/deepseek-v4-flash.config.json --gpu-budget 1G"),
                        "--gpu-budget needs -m MODEL");
}

TEST_F(PlanCli, ReplayTablesJsonHeatmap) {
  Proc p = strata("replay --trace " + path("t.jsonl") + " --heatmap " + path("h.svg"));
  ASSERT_EQ(p.code, 0) << p.err;
  for (const char* s :
       {"budget 10%", "budget 25%", "budget 50%", "lru", "lfu", "static", "adaptive", "belady"})
    EXPECT_NE(p.out.find(s), std::string::npos) << s << "\n" << p.out;
  EXPECT_NE(slurp(path("h.svg")).find("<svg"), std::string::npos);
  p = strata("replay --trace " + path("t.jsonl") + " --slots 4 --policy lru --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  ASSERT_EQ(j["budgets"].size(), 1u);
  const auto& rs = j["budgets"][0]["results"];
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0]["policy"], "lru");
  EXPECT_EQ(rs[1]["policy"], "belady");
  EXPECT_GE(rs[1]["hit_rate"].get<double>(), rs[0]["hit_rate"].get<double>());
  EXPECT_EQ(j["accesses"].get<uint64_t>(), 240u);
}

TEST_F(PlanCli, ReplayBadInput) {
  expect_one_line_error(strata("replay --trace " + path("t.jsonl") + " --slots 1"), "minimum is 2 slots");
  expect_one_line_error(strata("replay --trace " + path("t.jsonl") + " --policy fifo"), "--policy 'fifo'");
  expect_one_line_error(strata("replay --trace " + path("t.jsonl") + " --budget-frac 0.1,2"),
                        "--budget-frac '2'");
  expect_one_line_error(strata("replay --trace " + path("nope.jsonl")), "nope.jsonl");
  std::ofstream(path("bad.jsonl")) << "{\"token_idx\":0,\"layer\":0,\"experts\":[1]}\n{oops\n";
  expect_one_line_error(strata("replay --trace " + path("bad.jsonl")), "bad.jsonl:2");
}

TEST_F(PlanCli, PackWithTrace) {
  Proc p = strata("pack " + model_ + " -o " + path("m.pack") + " --trace " + path("t.jsonl"));
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("16 experts"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("by co-activation"), std::string::npos) << p.out;
  EXPECT_EQ(fs::file_size(path("m.pack")) % 4096, 0u);
  expect_one_line_error(strata("pack /nonexistent.gguf -o " + path("x.pack")), "/nonexistent.gguf");
  expect_one_line_error(strata("pack " + model_ + " -o /nonexistent/dir/x.pack"), "/nonexistent/dir/x.pack");
}

}  // namespace
