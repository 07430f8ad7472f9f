// End-to-end tests of the `strata` CLI: synth a tiny model of each arch/type, inspect it, run it
// greedily; bad flags and bad input give a non-zero exit and a one-line error.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/cli.h"
#include "common/fixtures.h"

namespace {

namespace fs = std::filesystem;

using strata::testing::Proc;
using strata::testing::slurp;

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_cli_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Runs `strata ARGS` through the shell; ARGS must be shell-safe.
  static Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  // A tiny model; cached per (name) within the suite.
  static std::string synth(const std::string& name, const std::string& flags) {
    const std::string p = path(name + ".gguf");
    if (!fs::exists(p)) {
      Proc r = strata("synth " + flags + " -o " + p);
      EXPECT_EQ(r.code, 0) << r.err;
    }
    return p;
  }
  static void expect_one_line_error(const Proc& p, const std::string& needle) {
    strata::testing::expect_one_line_error(p, needle, false);
  }
  static inline fs::path dir_;
};

#define TINY_SHAPE "--layers 2 --embd 64 --heads 4 --kv-heads 2 --experts 4 --top-k 2 --expert-ffn 64"
const char* kTiny = TINY_SHAPE " --vocab 300";

struct Variant {
  const char* name;
  const char* flags;
  const char* arch;
};

const Variant kVariants[] = {
    {"qwen3moe-f32", "--arch qwen3moe --type f32", "qwen3moe"},
    {"qwen3moe-f16", "--arch qwen3moe --type f16", "qwen3moe"},
    {"qwen3moe-q8_0", "--arch qwen3moe --type q8_0", "qwen3moe"},
    {"qwen3moe-q4_0", "--arch qwen3moe --type q4_0 --router-skew 1", "qwen3moe"},
    {"qwen3moe-mxfp4", "--arch qwen3moe --type mxfp4", "qwen3moe"},
    {"llama-f32", "--arch llama --type f32", "llama"},
    {"llama-q8_0", "--arch llama --type q8_0", "llama"},
    {"qwen2moe-f32", "--arch qwen2moe --type f32 --shared-ffn 96", "qwen2moe"},
    {"qwen2moe-q4_0", "--arch qwen2moe --type q4_0 --shared-ffn 64", "qwen2moe"},
};

TEST_F(Cli, SynthInspectRunEveryArchAndType) {
  for (const auto& v : kVariants) {
    SCOPED_TRACE(v.name);
    const std::string m = synth(v.name, std::string(kTiny) + " " + v.flags);
    Proc i = strata("inspect -m " + m);
    ASSERT_EQ(i.code, 0) << i.err;
    EXPECT_NE(i.out.find(std::string("architecture:  ") + v.arch), std::string::npos);
    EXPECT_NE(i.out.find("blk.1.ffn_down_exps.weight"), std::string::npos);
    EXPECT_NE(i.out.find("[2 of 4 routed experts]"), std::string::npos);
    EXPECT_NE(i.out.find("routed experts"), std::string::npos);

    Proc r = strata("run -m " + m + " -p 'Hello world' -n 6 --temp 0 -t 2");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("tokens per second"), std::string::npos) << r.err;
    Proc r2 = strata("run -m " + m + " -p 'Hello world' -n 6 --temp 0 -t 1");
    EXPECT_EQ(r.out, r2.out) << "greedy output depends on the thread count";
  }
}

TEST_F(Cli, DenseLlama) {
  const std::string m = synth("llama-dense",
                              "--arch llama --layers 2 --embd 64 --heads 4 --kv-heads 4 --ffn 96 "
                              "--vocab 260 --type q8_0");
  Proc i = strata("inspect -m " + m);
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.0.ffn_gate.weight"), std::string::npos);
  Proc r = strata("run -m " + m + " -p hi -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(Cli, SynthIsDeterministicAcrossThreadCounts) {
  const std::string flags = std::string(kTiny) + " --type q4_0 --seed 7";
  ASSERT_EQ(strata("synth " + flags + " -t 1 -o " + path("d1.gguf")).code, 0);
  ASSERT_EQ(strata("synth " + flags + " -t 2 -o " + path("d2.gguf")).code, 0);
  ASSERT_EQ(strata("synth " + std::string(kTiny) + " --type q4_0 --seed 8 -o " + path("d3.gguf")).code, 0);
  EXPECT_EQ(slurp(path("d1.gguf")), slurp(path("d2.gguf")));
  EXPECT_NE(slurp(path("d1.gguf")), slurp(path("d3.gguf")));
}

// --draws quantile (the fast draws for models of tens of GB): its own bytes, the same at any
// thread count, MXFP4 experts written as codes that load and run.
TEST_F(Cli, SynthQuantileDrawsAreDeterministicAndRun) {
  const std::string flags = std::string(kTiny) + " --arch qwen3moe --type mxfp4 --seed 7";
  ASSERT_EQ(strata("synth " + flags + " --draws quantile -t 1 -o " + path("q1.gguf")).code, 0);
  ASSERT_EQ(strata("synth " + flags + " --draws quantile -t 2 -o " + path("q2.gguf")).code, 0);
  ASSERT_EQ(strata("synth " + flags + " -o " + path("bm.gguf")).code, 0);
  EXPECT_EQ(slurp(path("q1.gguf")), slurp(path("q2.gguf")));
  EXPECT_NE(slurp(path("q1.gguf")), slurp(path("bm.gguf")));
  Proc r = strata("run -m " + path("q1.gguf") + " -p hi -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
  expect_one_line_error(strata("synth " + flags + " --draws gauss -o " + path("x.gguf")), "--draws");
}

TEST_F(Cli, SeededSamplingRepeats) {
  const std::string m = synth("qwen3moe-f32", std::string(kTiny) + " --arch qwen3moe --type f32");
  const std::string args = "run -m " + m + " -p 'The cat' -n 8 --temp 1.0 --seed 42 -q";
  Proc a = strata(args), b = strata(args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(Cli, RunErrors) {
  const std::string m = synth("qwen3moe-f32", std::string(kTiny) + " --arch qwen3moe --type f32");
  expect_one_line_error(strata("run -p hi"), "model");
  expect_one_line_error(strata("run -m " + path("does-not-exist.gguf") + " -p hi"), "does-not-exist.gguf");
  {
    std::ofstream(path("not-gguf.bin")) << "this is not a gguf file at all, just some text\n";
    expect_one_line_error(strata("run -m " + path("not-gguf.bin") + " -p hi"), "not-gguf.bin");
  }
  expect_one_line_error(strata("run -m " + m + " -p 'a long prompt that does not fit' -c 4"), "prompt is");
  expect_one_line_error(strata("run -m " + m + " -p hi -c 12X"), "12X");
  expect_one_line_error(strata("run -m " + m + " -p hi --top-p 0"), "top-p");
  expect_one_line_error(strata("run -m " + m + " -p hi --bogus-flag"), "bogus");
  expect_one_line_error(strata("run -m " + m), "prompt");
}

// --device / -dev, --list-devices, --gpu-budget: bad names list the devices there are; where a
// Vulkan device exists (lavapipe in CI), greedy text on it equals the CPU's.
TEST_F(Cli, Devices) {
  const std::string m = synth("qwen3moe-f32", std::string(kTiny) + " --arch qwen3moe --type f32");
  Proc l = strata("run --list-devices");
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_NE(l.out.find("Available devices:\n  CPU: "), std::string::npos) << l.out;
  expect_one_line_error(strata("run -m " + m + " -p hi --device nope"),
                        "no such device; available: none, cpu");
  expect_one_line_error(strata("logits -m " + m + " --tokens 1,2 -o " + path("x.f32") + " -dev nope"),
                        "no such device");
  expect_one_line_error(strata("run -m " + m + " -p hi --gpu-budget 1G"), "--gpu-budget needs a GPU device");
  expect_one_line_error(strata("run -m " + m + " -p hi --n-cpu-moe 2"),
                        "--n-cpu-moe and -ot place routed experts");
  const std::string args = "run -m " + m + " -p 'The cat' -n 8 --temp 0 -q";
  Proc cpu = strata(args), named = strata(args + " --device cpu");
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  EXPECT_EQ(cpu.out, named.out);
  if (l.out.find("Vulkan0:") == std::string::npos) return;  // no Vulkan device here
  Proc vk = strata(args + " -dev Vulkan0");
  ASSERT_EQ(vk.code, 0) << vk.err;
  EXPECT_EQ(vk.out, cpu.out);
  expect_one_line_error(strata(args + " --device Vulkan0 --gpu-budget 1K"), "the dense weights need");
  // Routed experts: on the GPU by default, kept on the host by --n-cpu-moe / -ot (llama.cpp's).
  Proc split = strata(args + " -dev Vulkan0 --n-cpu-moe 1");
  ASSERT_EQ(split.code, 0) << split.err;
  EXPECT_EQ(split.out, cpu.out);
  Proc host = strata(args + " -dev Vulkan0 -ot exps=CPU");
  ASSERT_EQ(host.code, 0) << host.err;
  EXPECT_EQ(host.out, cpu.out);
  expect_one_line_error(strata(args + " -dev Vulkan0 -ot 'exps=GPU7'"), "neither CPU nor the device");
}

// --miss-policy: a bad value names the flag and the allowed values; copy without a GPU device is
// an error; on Vulkan0 (lavapipe in CI) with layer 0's experts on the host, cpu / copy / auto print
// the CPU's greedy text.
TEST_F(Cli, MissPolicy) {
  const std::string m = synth("qwen3moe-f32", std::string(kTiny) + " --arch qwen3moe --type f32");
  const std::string args = "run -m " + m + " -p 'The cat' -n 8 --temp 0 -q";
  expect_one_line_error(strata(args + " --miss-policy foo"),
                        "--miss-policy 'foo': expected auto, cpu or copy");
  expect_one_line_error(strata(args + " --miss-policy copy"), "--miss-policy copy needs a GPU device");
  Proc cpu = strata(args);
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  Proc l = strata("run --list-devices");
  if (l.out.find("Vulkan0:") == std::string::npos) return;  // no Vulkan device here
  for (const char* p : {"cpu", "copy", "auto"}) {
    Proc vk = strata(args + " -dev Vulkan0 --n-cpu-moe 1 --miss-policy " + p);
    ASSERT_EQ(vk.code, 0) << p << ": " << vk.err;
    EXPECT_EQ(vk.out, cpu.out) << p;
  }
}

// `run` is serve's engine with one slot on the paged KV pool: the same bytes as contiguous KV
// (--no-paged-kv) on the bundled model (f16, greedy and seeded) and on synth architectures at f32; a
// second run with --prefix-cache-dir takes the persisted prefix and prints the same text; a budget
// below the prompt's need names both; an architecture without paging says so and runs.
int prefix_hit(const std::string& err, int* n_prompt) {
  const size_t at = err.find("strata: prefix    ");
  int n = -1;
  if (at == std::string::npos || std::sscanf(err.c_str() + at, "strata: prefix %d of %d", &n, n_prompt) != 2)
    return -1;
  return n;
}

TEST_F(Cli, RunOnKvPool) {
  const std::string bundled = strata::testing::source_dir() + "/models/strata-moe-31m-mxfp4.gguf";
  const std::string prompt =
      " -p 'The devil is a person who, having nothing to do with the affairs of men, finds in them a "
      "constant occupation and an amusement' -t 2 ";
  for (const char* sampling : {"--temp 0", "--temp 0.8 --seed 7"}) {
    const std::string args = "run -m " + bundled + prompt + "-n 12 -q " + sampling;
    Proc paged = strata(args), flat = strata(args + " --no-paged-kv");
    ASSERT_EQ(paged.code, 0) << paged.err;
    EXPECT_EQ(paged.err, "");  // -q: no summary
    EXPECT_GT(paged.out.size(), 8u);
    EXPECT_EQ(paged.out, flat.out) << sampling;
  }
  for (const auto& v : kVariants) {
    if (std::string(v.name) != "qwen3moe-f32" && std::string(v.name) != "llama-q8_0") continue;
    const std::string m = synth(v.name, std::string(kTiny) + " " + v.flags);
    const std::string args = "run -m " + m + " -p 'Hello world, hello' -n 6 --temp 0 -q --kv-type f32";
    Proc paged = strata(args), flat = strata(args + " --no-paged-kv");
    ASSERT_EQ(paged.code, 0) << paged.err;
    EXPECT_EQ(paged.out, flat.out) << v.name;
  }
  const std::string args = "run -m " + bundled + prompt + "-n 8 --temp 0 --prefix-cache-dir " + path("kvdir");
  Proc first = strata(args), second = strata(args);
  ASSERT_EQ(first.code, 0) << first.err;
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_NE(first.err.find("strata: KV        paged: "), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("B per token (k f16 "), std::string::npos) << first.err;
  int n1 = 0, n2 = 0;
  EXPECT_EQ(prefix_hit(first.err, &n1), 0) << first.err;
  const int hit = prefix_hit(second.err, &n2);
  EXPECT_EQ(n1, n2);
  EXPECT_GT(n2, 16);
  EXPECT_GT(hit, 0) << second.err;
  EXPECT_GE(hit, n2 - 16) << second.err;  // at most one block prefilled again
  Proc ids = strata("run -m " + bundled + " --tokens 1,2,3,4 -n 3 --temp 0");  // token ids: the same KV lines
  ASSERT_EQ(ids.code, 0) << ids.err;
  EXPECT_NE(ids.err.find("strata: KV        paged: 1 of "), std::string::npos) << ids.err;
  EXPECT_NE(ids.err.find("0 of 4 prompt tokens from cache"), std::string::npos) << ids.err;
  expect_one_line_error(strata("run -m " + bundled + prompt + "--kv-budget 64K"), "raise --kv-budget");
  expect_one_line_error(strata("run -m " + bundled + " -p hi --no-paged-kv --kv-budget 1M"), "--no-paged-kv");
  const auto fx = strata::testing::fixtures_dir();
  if (!fx) return;
  Proc ds =
      strata("run -m " + *fx + "/models/tiny-deepseek4-f32.gguf --tokens 1,2,3 -n 2 --temp 0 --kv-budget 1M");
  ASSERT_EQ(ds.code, 0) << ds.err;
  EXPECT_NE(ds.err.find("has no paged KV"), std::string::npos) << ds.err;
}

TEST_F(Cli, InspectErrors) {
  expect_one_line_error(strata("inspect"), "model");
  expect_one_line_error(strata("inspect -m " + path("nope.gguf")), "nope.gguf");
  std::ofstream(path("junk.gguf")) << "GGUF but then garbage";
  expect_one_line_error(strata("inspect -m " + path("junk.gguf")), "junk.gguf");
}

TEST_F(Cli, SynthErrors) {
  expect_one_line_error(strata("synth " + std::string(kTiny) + " --type q5_k -o " + path("x.gguf")), "q5_k");
  expect_one_line_error(strata("synth --layers 1 --embd 68 --heads 2 --kv-heads 2 --experts 2 --top-k 1 "
                               "--expert-ffn 64 --vocab 300 --type q8_0 -o " +
                               path("x.gguf")),
                        "multiple of 32");
  expect_one_line_error(strata("synth " + std::string(kTiny) + " --arch gpt9 -o " + path("x.gguf")), "gpt9");
  expect_one_line_error(strata("synth --layers 1 --embd 64 --heads 4 --kv-heads 3 --experts 2 --top-k 1 "
                               "--expert-ffn 64 --vocab 300 -o " +
                               path("x.gguf")),
                        "kv-heads");
  expect_one_line_error(strata("synth " TINY_SHAPE " --vocab 10 -o " + path("x.gguf")), "vocab");
  expect_one_line_error(strata("synth " TINY_SHAPE " --vocab 3Q -o " + path("x.gguf")), "3Q");
  expect_one_line_error(strata("synth " + std::string(kTiny)), "output");
  EXPECT_FALSE(fs::exists(path("x.gguf")));
}

}  // namespace

// bench's llama-batched-bench mode, its --itl mode, -d and the bandwidth probe: JSON with the
// keys scripts read, sane values, and one-line errors for bad lists.
TEST_F(Cli, BenchBatchedItlDepthAndMembw) {
  const std::string m = synth("qwen3moe-f32", std::string(kTiny) + " --arch qwen3moe --type f32");
  Proc b = strata("bench -m " + m + " -npl 1,3 -npp 4 -ntg 3 -r 1 -t 1 --membw-size 4M --json");
  ASSERT_EQ(b.code, 0) << b.err;
  const auto j = nlohmann::json::parse(b.out);
  ASSERT_EQ(j["batched"].size(), 2u);
  EXPECT_EQ(j["batched"][1]["pl"], 3);
  EXPECT_EQ(j["batched"][1]["n_kv"], 3 * (4 + 3));
  EXPECT_GT(j["batched"][1]["s_tg"].get<double>(), 0.0);
  EXPECT_GT(j["batched"][0]["s_pp"].get<double>(), 0.0);
  // On the paged KV pool as serve: one 16-position block per sequence of 7 positions.
  EXPECT_EQ(j["paged_kv"], true);
  EXPECT_EQ(j["batched"][1]["kv"]["blocks"]["used"], 3);
  EXPECT_EQ(j["batched"][1]["kv"]["unused_rows"], 3 * (16 - 7));
  // Decode tokens sampled under a grammar (its cost: bench/grammars); a bad grammar file is named.
  Proc g = strata("bench -m " + m + " -npl 2 -npp 4 -ntg 6 -r 1 -t 1 --membw-size 4M --json --grammar-file " +
                  std::string(STRATA_SOURCE_DIR) + "/bench/grammars/json.gbnf");
  ASSERT_EQ(g.code, 0) << g.err;
  const auto gj = nlohmann::json::parse(g.out);
  EXPECT_GT(gj["batched"][0]["t_sample"].get<double>(), 0.0);
  EXPECT_NE(gj["sampling"]["grammar"].get<std::string>().find("json.gbnf"), std::string::npos);
  Proc bad = strata("bench -m " + m + " -npl 1 --json-schema /nonexistent.json --membw-size 4M");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("cannot read '/nonexistent.json'"), std::string::npos) << bad.err;
  // -c 1024: the decoders (up to c - 17 tokens each) must still be decoding when bench's poll sees
  // their 8th tokens; at -c 96 a tiny model's 79 tokens could all land within one poll on a busy
  // machine ("a decoder ended ... before its 8-th token").
  Proc i = strata("bench -m " + m + " --itl 24 --itl-decoders 2 -c 1024 -t 1 --membw-size 4M --json");
  ASSERT_EQ(i.code, 0) << i.err;
  const auto k = nlohmann::json::parse(i.out)["itl"];
  EXPECT_EQ(k["n_prompt"], 24);
  EXPECT_GT(k["ttft_idle_s"].get<double>(), 0.0);
  EXPECT_GT(k["ttft_loaded_s"].get<double>(), 0.0);
  EXPECT_GT(k["loaded_gaps"].get<int>(), 0);
  Proc d = strata("bench -m " + m + " -p 4 -n 4 -d 16 -r 1 -t 1 --membw-size 4M --json");
  ASSERT_EQ(d.code, 0) << d.err;
  const auto dj = nlohmann::json::parse(d.out);
  EXPECT_EQ(dj["n_depth"], 16);
  EXPECT_EQ(dj["kv"]["paged"], true);  // 16 + 4 positions: two blocks
  EXPECT_EQ(dj["kv"]["blocks"]["used"], 2);
  EXPECT_EQ(dj["kv"]["parts"][0]["type"], "f16");
  Proc flat = strata("bench -m " + m + " -p 4 -n 4 -r 1 -t 1 --membw-size 4M --json --no-paged-kv");
  ASSERT_EQ(flat.code, 0) << flat.err;
  const auto fj = nlohmann::json::parse(flat.out);
  EXPECT_EQ(fj["kv"]["paged"], false);
  EXPECT_GT(fj["kv"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(dj["tg_tok_s"].get<double>(), 0.0);
  EXPECT_GT(dj["membw_gbps"].get<double>(), 0.0);
  EXPECT_GE(dj["membw_buffer_bytes"].get<uint64_t>(), 4u << 20);
  // The probe's figure is its best pattern's, and it names that pattern.
  double best = 0.0;
  for (const auto& [name, gbps] : dj["membw_patterns_gbps"].items())
    best = std::max(best, gbps.get<double>());
  EXPECT_EQ(dj["membw_gbps"].get<double>(), best);
  EXPECT_GT(dj["membw_patterns_gbps"][dj["membw_pattern"].get<std::string>()].get<double>(), 0.0);
  // -p as llama-bench takes it: a list, a pp row each in one load (pp_tok_s: the largest).
  Proc pl = strata("bench -m " + m + " -p 3,5 -n 0 -r 1 -t 1 --membw-size 4M --json");
  ASSERT_EQ(pl.code, 0) << pl.err;
  const auto pj = nlohmann::json::parse(pl.out);
  ASSERT_EQ(pj["pp_runs"].size(), 2u);
  EXPECT_EQ(pj["pp_runs"][0]["n_prompt"], 3);
  EXPECT_EQ(pj["pp_runs"][1]["n_prompt"], 5);
  EXPECT_EQ(pj["n_prompt"], 5);
  EXPECT_GT(pj["pp_runs"][0]["median"].get<double>(), 0.0);
  Proc pt = strata("bench -m " + m + " -p 2,3 -n 0 -r 1 -t 1 --membw-size 4M");
  ASSERT_EQ(pt.code, 0) << pt.err;
  EXPECT_NE(pt.out.find("pp2 "), std::string::npos) << pt.out;
  EXPECT_NE(pt.out.find("pp3 "), std::string::npos) << pt.out;
  expect_one_line_error(strata("bench -m " + m + " -p 4,x"), "-p");
  expect_one_line_error(strata("bench -m " + m + " -p 4,0"), "-p");
  expect_one_line_error(strata("bench -m " + m + " -npl 1,x"), "-npl");
  expect_one_line_error(strata("bench -m " + m + " -npl 0"), "-npl 0");
  expect_one_line_error(strata("bench -m " + m + " --itl 200 -c 64"), "does not fit");
  expect_one_line_error(strata("bench -m " + m + " -d -3"), "-d");
  expect_one_line_error(strata("bench -m " + m + " --no-paged-kv --kv-budget 1M"), "--no-paged-kv");
}
