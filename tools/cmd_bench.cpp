// strata bench: llama-bench-like throughput of one model — prompt processing (pp: P tokens in one
// eval from an empty context) and generation (tg: N single-token evals from an empty context),
// median and spread over repetitions after one warm-up — plus the weight bandwidth tg achieves
// against this machine's measured read bandwidth (obs/membw.h). `--membw` measures only that.
// -d DEPTH (llama-bench's -d) measures after DEPTH tokens already in the context; -npl runs
// llama-batched-bench's test instead (tools/bench_batched.h); --spill P the prefix cache's spill
// tiers through the serving engine with serve's KV pool flags (tools/bench_spill.h).
//   strata bench -m model.gguf -p 64 -n 32 -t 2 -r 5 [-d 512] [--json]
//   strata bench -m model.gguf -npl 1,4,16 -npp 16 -ntg 32 [--json]
//   strata bench -m model.gguf -npl 1,16 --sample [--temp 0.8] [--grammar-file G.gbnf | --json-schema S.json]
//   strata bench -m model.gguf --spill 1024 [-cram 0] [--prefix-cache-dir DIR] [--json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/units.h"
#include "bench_batched.h"
#include "bench_gpu.h"
#include "bench_itl.h"
#include "bench_spill.h"
#include "cli_args.h"
#include "command.h"
#include "device_flags.h"
#include "engram_flags.h"
#include "expert_flags.h"
#include "kv_pool_flags.h"
#include "format/tensor_names.h"
#include "mem_report.h"
#include "memory/experts/expert_store.h"
#include "obs/proc_mem.h"
#include "model/hparams.h"
#include "model/model.h"
#include "obs/bench_stats.h"
#include "obs/membw.h"
#include "runtime/engine.h"
#include "server/json_schema_grammar.h"
#include "server/stats_json.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata bench: error: %s\n", msg.c_str());
  return code;
}

// Weight bytes one decode step reads, estimated from the file: every dense tensor once, the
// embedding table's one row (unless it doubles as the output), and n_used/n_expert of each routed
// expert stack (uniform routing). Also the type holding most weight bytes, for the table.
struct WeightTraffic {
  double bytes_per_token = 0;
  uint64_t total_bytes = 0;
  uint64_t n_params = 0;
  std::string main_type;
};

WeightTraffic weight_traffic(const strata::Model& m) {
  WeightTraffic w;
  if (!m.has_gguf()) return w;  // a checkpoint directory (V4.1): no GGUF tensor table to price
  const auto& hp = m.hparams();
  const double routed_frac = hp.n_expert > 0 ? double(hp.n_expert_used) / hp.n_expert : 1.0;
  const bool tied = m.file().find_tensor("output.weight") == nullptr;
  std::map<std::string, uint64_t> by_type;
  for (const strata::TensorView& t : m.file().tensors()) {
    w.total_bytes += t.nbytes;
    uint64_t n = 1;
    for (int i = 0; i < t.n_dims; ++i) n *= static_cast<uint64_t>(t.ne[i]);
    w.n_params += n;
    by_type[strata::type_name(t.type)] += t.nbytes;
    if (strata::is_routed_expert(t.name)) {
      w.bytes_per_token += double(t.nbytes) * routed_frac;
    } else if (t.name.rfind("token_embd.", 0) == 0 && !tied && t.ne[1] > 0) {
      w.bytes_per_token += double(t.nbytes) / double(t.ne[1]);
    } else {
      w.bytes_per_token += double(t.nbytes);
    }
  }
  uint64_t best = 0;
  for (const auto& [name, bytes] : by_type) {
    if (bytes > best) best = bytes, w.main_type = name;
  }
  return w;
}

// "read bandwidth: B GB/s (...)": the probe's best and each pattern's, for the text output.
std::string membw_line(const strata::MembwResult& bw) {
  std::string pats;
  for (const strata::MembwPattern& p : bw.patterns) {
    char b[64];
    std::snprintf(b, sizeof b, "%s%s %.2f", pats.empty() ? "" : ", ", p.name, p.bytes_per_s / 1e9);
    pats += b;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "read bandwidth: %.2f GB/s (%s; patterns %s; %d threads, %s buffer, best of 5)\n",
                bw.bytes_per_s / 1e9, bw.pattern, pats.c_str(), bw.threads,
                strata::format_bytes(bw.buffer_bytes).c_str());
  return line;
}

struct RunResult {
  std::vector<double> tok_s;
};

// Decode totals of the expert store with the prediction counts (kept in the totals only).
strata::ExpertTotals expert_decode_totals(const strata::ExpertStore& es) {
  const strata::ExpertStats st = es.stats();
  strata::ExpertTotals t = st.decode_totals();
  t.pred_true_pos = st.totals().pred_true_pos;
  t.pred_false_pos = st.totals().pred_false_pos;
  t.pred_false_neg = st.totals().pred_false_neg;
  return t;
}

// One eval of s; on a paged session its blocks reserved first (as the engine does before a step).
strata::Status eval_on(strata::Session& s, strata::KvPool* pool, std::span<const int32_t> tokens,
                       std::vector<float>& logits) {
  if (pool) STRATA_TRY(pool->reserve(*s.kv_blocks(), s.n_past() + static_cast<int64_t>(tokens.size())));
  return s.eval(tokens, logits.data(), false);
}

// reps timed runs after one warm-up; each run starts from a context holding the `depth` tokens
// (evaluated untimed). `after_warmup` runs once the warm-up is done. pool: s's paged KV (or null).
strata::Status time_runs(strata::Session& s, strata::KvPool* pool, const std::vector<int32_t>& tokens,
                         bool one_by_one, int reps, std::vector<float>& logits, RunResult& out,
                         const std::vector<int32_t>& depth,
                         const std::function<void()>& after_warmup = nullptr) {
  for (int r = -1; r < reps; ++r) {
    if (r == 0 && after_warmup) after_warmup();
    s.reset();
    if (!depth.empty()) STRATA_TRY(eval_on(s, pool, depth, logits));
    const double t0 = strata::now_seconds();
    if (one_by_one) {
      for (size_t i = 0; i < tokens.size(); ++i) STRATA_TRY(eval_on(s, pool, {&tokens[i], 1}, logits));
    } else {
      STRATA_TRY(eval_on(s, pool, tokens, logits));
    }
    const double dt = strata::now_seconds() - t0;
    if (r >= 0) out.tok_s.push_back(double(tokens.size()) / dt);
  }
  return strata::Status();
}

// "kv: ..." for the text output: the paged pool's blocks and bytes per token by part, or the
// session's contiguous bytes.
std::string kv_line(const strata::KvPool* pool, uint64_t contiguous_bytes) {
  if (!pool) return "kv: contiguous, " + strata::format_bytes(contiguous_bytes) + "\n";
  const strata::KvPoolStats k = pool->stats();
  std::string parts;
  for (const strata::KvPartBytes& p : k.parts)
    parts +=
        (parts.empty() ? "" : ", ") + p.name + " " + p.type + " " + std::to_string(p.bytes_per_token) + " B";
  char b[512];
  std::snprintf(b, sizeof b,
                "kv: paged, %.0f B per token (%s); %lld of %lld blocks of %d positions used at the end, "
                "fragmentation %.1f%%\n",
                k.bytes_per_token, parts.c_str(), static_cast<long long>(k.blocks.used),
                static_cast<long long>(k.blocks.total), k.block_size, 100.0 * k.fragmentation);
  return b;
}

nlohmann::json stats_json(const strata::SampleStats& s, const std::vector<double>& samples) {
  return {{"median", s.median}, {"mean", s.mean}, {"stddev", s.stddev},   {"min", s.min},
          {"max", s.max},       {"n", s.n},       {"samples_ts", samples}};
}

// -npl --sample: the sampler settings, and the grammar of --grammar-file or --json-schema.
strata::Result<strata::cli::BatchedSampling> batched_sampling(const strata::Model& m, float temp,
                                                              const std::string& grammar_file,
                                                              const std::string& schema_file) {
  strata::cli::BatchedSampling bs;
  bs.params.temp = temp;
  bs.params.seed = 1;
  if (grammar_file.empty() && schema_file.empty()) return bs;
  if (!grammar_file.empty() && !schema_file.empty())
    return strata::err("give --grammar-file or --json-schema, not both");
  if (!m.has_tokenizer()) return strata::err("a grammar needs the model's tokenizer");
  const std::string& path = grammar_file.empty() ? schema_file : grammar_file;
  std::ifstream in(path, std::ios::binary);
  if (!in) return strata::err("cannot read '%s'", path.c_str());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!schema_file.empty()) {
    auto schema = nlohmann::json::parse(text, nullptr, false);
    if (schema.is_discarded()) return strata::err("--json-schema: '%s' is not JSON", path.c_str());
    STRATA_ASSIGN(text, strata::server::json_schema_to_grammar(schema));
  }
  auto g = strata::Grammar::parse(text);
  if (!g.ok()) return strata::err("%s: %s", path.c_str(), g.message().c_str());
  bs.grammar = std::make_shared<const strata::Grammar>(std::move(*g));
  bs.vocab = std::make_shared<const strata::GrammarVocab>(m.tokenizer());
  return bs;
}

int cmd_bench(int argc, char** argv) {
  std::string model_path, membw_size = "auto", npl_list;
  int n_prompt = 64, n_gen = 32, threads = 0, reps = 5, depth = 0, npp = 128, ntg = 128;
  bool json = false, membw_only = false;
  CLI::App app{"Measure prompt (pp) and generation (tg) speed, and the machine's read bandwidth",
               "strata bench"};
  app.add_option("-m,--model", model_path, "GGUF model");
  std::string p_list = "64";
  app.add_option("-p,--n-prompt", p_list,
                 "prompt tokens per pp run, or a list (32,128,512: a pp row each, one load; 0: skip pp)")
      ->capture_default_str();
  app.add_option("-n,--n-gen", n_gen, "generated tokens per tg run (0: skip tg)")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (default: all cores)");
  app.add_option("-r,--repetitions", reps, "timed repetitions of each test")->capture_default_str();
  app.add_option("-d,--n-depth", depth, "tokens already in the context when pp / tg are timed")
      ->capture_default_str();
  app.add_option(
      "--npl", npl_list,
      "-npl B1,B2,..: llama-batched-bench: B sequences prefill -npp tokens each in one batch, then "
      "decode -ntg steps of B tokens");
  app.add_option("--npp", npp, "-npp: prompt tokens per sequence (with -npl)")->capture_default_str();
  app.add_option("--ntg", ntg, "-ntg: decode steps (with -npl)")->capture_default_str();
  bool sample = false;
  float temp = 0.0f;
  std::string grammar_file, schema_file;
  app.add_flag("--sample", sample, "-npl: draw each decode token from the logits (else random tokens)");
  app.add_option("--temp", temp, "--sample: temperature (0: greedy; top-k 40, top-p 0.95, min-p 0.05)")
      ->capture_default_str();
  app.add_option("--grammar-file", grammar_file,
                 "--sample under this GBNF grammar (a fresh one per sequence "
                 "whenever it is done)");
  app.add_option("--json-schema", schema_file, "--sample under the grammar of this JSON Schema file");
  int itl_prompt = 0, itl_decoders = 4;
  std::string itl_ctx = "4096";
  app.add_option("--itl", itl_prompt,
                 "through the serving engine: a prompt of this many tokens arriving while --itl-decoders "
                 "sequences decode (their inter-token latency, its TTFT, each against running alone)");
  app.add_option("--itl-decoders", itl_decoders, "decoding sequences for --itl")->capture_default_str();
  app.add_option("-c,--ctx-size", itl_ctx, "context of each sequence for --itl")->capture_default_str();
  int spill_prompt = 0;
  app.add_option(
      "--spill", spill_prompt,
      "through the serving engine: a prompt of this many tokens, evicted by another and sent again "
      "(TTFT per tier, scheduler-thread time per spilled block; the KV pool flags below as serve)");
  strata::cli::KvPoolFlags kpf;
  kpf.add(app);
  bool contiguous = false;
  app.add_flag("--no-paged-kv", contiguous,
               "pp / tg / -npl sessions keep their KV contiguous, their whole context allocated (default: "
               "on the paged KV pool, as run and serve; the KV pool flags above apply)");
  app.add_flag("--json", json, "print one JSON object instead of the table");
  app.add_flag("--membw", membw_only, "only measure the read bandwidth");
  strata::cli::ExpertFlags xf;
  strata::cli::DeviceFlags df;  // outlives the model
  xf.add(app);
  df.add(app);
  strata::cli::KvTypeFlags kf;
  strata::cli::add_kv_type_flags(app, kf, "f16");
  std::string v41_numerics = "fast";
  strata::cli::add_v41_numerics_flag(app, &v41_numerics);
  strata::cli::ProfileFlags pf;
  strata::cli::add_profile_flags(app, pf);
  app.add_option("--membw-size", membw_size,
                 "bandwidth buffer size (K/M/G suffixes; auto: 4x the last-level cache, at least 256M)")
      ->capture_default_str();
  if (auto rc = strata::cli::parse_args(app, argc, argv, "bench")) return *rc;
  auto kv = strata::cli::kv_types(kf, "f16");
  if (!kv.ok()) return fail(kv.message(), 2);
  auto knobs = strata::cli::seq_knobs(pf);
  if (!knobs.ok()) return fail(knobs.message(), 2);
  if (depth < 0) return fail("-d must be >= 0", 2);
  if (reps < 1 || reps > 1000) return fail("-r must be in 1..1000", 2);
  // A comma list of counts (-p, -npl), or an error naming the flag.
  auto int_list = [](const std::string& text, std::vector<int>* out) {
    out->clear();
    for (size_t a = 0; a <= text.size();) {
      size_t b = text.find(',', a);
      if (b == std::string::npos) b = text.size();
      try {
        size_t used = 0;
        out->push_back(std::stoi(text.substr(a, b - a), &used));
        if (used != b - a) return false;
      } catch (const std::exception&) {
        return false;
      }
      a = b + 1;
    }
    return !out->empty();
  };
  std::vector<int> prompts;
  if (!int_list(p_list, &prompts))
    return fail("-p: '" + p_list + "' is not a token count or a list like 32,128,512", 2);
  for (int v : prompts)
    if (v < 0) return fail("-p and -n must be >= 0", 2);
  if (prompts.size() > 1 && std::find(prompts.begin(), prompts.end(), 0) != prompts.end())
    return fail("-p: 0 (skip pp) cannot be part of a list", 2);
  n_prompt = *std::max_element(prompts.begin(), prompts.end());
  if (n_gen < 0) return fail("-p and -n must be >= 0", 2);
  if (threads < 0 || threads > 1024) return fail("-t must be in 0..1024", 2);
  auto bw_bytes = membw_size == "auto" ? strata::Result<uint64_t>(strata::membw_default_bytes())
                                       : strata::parse_size(membw_size);
  if (!bw_bytes.ok()) return fail("--membw-size: " + bw_bytes.message(), 2);
  if (*bw_bytes < (1u << 20) || *bw_bytes > (uint64_t{64} << 30))
    return fail("--membw-size must be 1M..64G", 2);
  if (!membw_only && model_path.empty()) return fail("no model: give -m MODEL (or --membw)", 2);
  strata::EngineOptions spill_eo;  // --spill: serve's pool and tiers
  if (auto st = kpf.apply(&spill_eo); !st.ok()) return fail(st.message(), 2);
  if (contiguous && kpf.any()) return fail("--no-paged-kv takes none of the KV pool flags", 2);
  // pp / tg and -npl: run's pool (no RAM tier unless the prefix cache persists), a sequence per slot.
  strata::EngineOptions eo = spill_eo;
  if (kpf.cache_ram.empty() && kpf.prefix_cache_dir.empty()) eo.cache_ram = 0;
  eo.n_slots = 1;

  nlohmann::json j;
  auto run_membw = [&](strata::ThreadPool& pool) {
    const strata::MembwResult bw = strata::measure_read_bandwidth(pool, *bw_bytes, 5);
    j["membw_gbps"] = bw.bytes_per_s / 1e9;
    j["membw_threads"] = bw.threads;
    j["membw_buffer_bytes"] = bw.buffer_bytes;
    j["membw_pattern"] = bw.pattern;
    for (const strata::MembwPattern& pt : bw.patterns)
      j["membw_patterns_gbps"][pt.name] = pt.bytes_per_s / 1e9;
    return bw;
  };
  // The probe runs on every core (the machine's best, whatever -t says) before the model is
  // loaded: its buffer is freed and the peak-RSS mark reset before the run, so neither the run's
  // peak RSS nor a memory cgroup sized by `strata plan` sees it.
  strata::MembwResult bw;
  {
    strata::ThreadPool pool(0);
    bw = run_membw(pool);
  }
  if (membw_only) {
    if (json) {
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::fputs(membw_line(bw).c_str(), stdout);
    }
    return 0;
  }

  strata::LoadOptions lo{.n_threads = threads};
  if (auto st = xf.apply(&lo); !st.ok()) return fail(st.message(), 2);
  if (auto st = df.apply(&lo); !st.ok()) return fail(st.message(), 2);
  if (auto st = strata::cli::apply_v41_numerics(v41_numerics, model_path, &lo); !st.ok())
    return fail(st.message(), 2);
  auto model = strata::Model::load(model_path, lo);
  if (!model.ok()) return fail("loading " + model_path + ": " + model.message());
  strata::Model& m = **model;
  std::fputs(strata::cli::kv_types_note(m.arch().kv_spec(), *kv, m.arch().hparams().arch.c_str()).c_str(),
             stderr);
  // The routed experts onto a GPU device (--gpu-budget: what the pp / tg session's KV leaves; the
  // -npl and --itl sessions take theirs from what is left after the experts).
  const int n_ctx = std::max(depth + n_prompt + n_gen, 1);
  const strata::SessionOptions sopt{
      .n_ctx = n_ctx, .n_batch = std::max(std::max(n_prompt, depth), 1), .kv = *kv};
  // The pp / tg session's KV as its paged pool allocates it: whole blocks of positions.
  strata::SessionOptions place_opt = sopt;
  if (!contiguous && eo.block_size > 0)
    place_opt.n_ctx = (n_ctx + eo.block_size - 1) / eo.block_size * eo.block_size;
  if (auto st = place_experts(df, m, place_opt, 1, xf.profile); !st.ok()) return fail(st.message());
  if (itl_prompt > 0) {
    auto c = strata::cli::parse_ctx(itl_ctx);
    if (!c.ok()) return fail(c.message(), 2);
    auto r = strata::cli::itl_bench(m, itl_prompt, itl_decoders, *c, *kv, *knobs);
    if (!r.ok()) return fail(r.message());
    if (json) {
      j["model"] = model_path;
      j["threads"] = m.pool().size();
      j["itl"] = strata::cli::itl_bench_json(*r);
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::fputs(strata::cli::itl_bench_text(*r).c_str(), stdout);
    }
    return 0;
  }
  if (spill_prompt > 0) {
    if (contiguous) return fail("--spill runs the paged KV pool: drop --no-paged-kv", 2);
    if (df.dev) return fail("--spill runs the paged KV pool, which the GPU path does not use", 2);
    auto r = strata::cli::spill_bench(m, spill_prompt, spill_eo, *kv, *knobs);
    if (!r.ok()) return fail(r.message());
    if (json) {
      j["model"] = model_path;
      j["threads"] = m.pool().size();
      j["spill"] = strata::cli::spill_bench_json(*r);
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::fputs(strata::cli::spill_bench_text(*r).c_str(), stdout);
    }
    return 0;
  }
  if (!npl_list.empty()) {
    std::vector<int> npl;
    if (!int_list(npl_list, &npl))
      return fail("-npl: '" + npl_list + "' is not a list of sequence counts like 1,4,16", 2);
    if (npp < 0 || ntg < 1) return fail("-npp must be >= 0 and -ntg >= 1", 2);
    std::optional<strata::cli::BatchedSampling> bs;
    if (sample || !grammar_file.empty() || !schema_file.empty()) {
      auto st = batched_sampling(m, temp, grammar_file, schema_file);
      if (!st.ok()) return fail(st.message(), 2);
      bs = std::move(*st);
    }
    auto rows = strata::cli::batched_bench(m, npl, npp, ntg, reps, *kv, *knobs, contiguous ? nullptr : &eo,
                                           bs ? &*bs : nullptr);
    if (!rows.ok()) return fail(rows.message());
    if (json) {
      j["model"] = model_path;
      j["threads"] = m.pool().size();
      j["reps"] = reps;
      j["batched"] = strata::cli::batched_bench_json(*rows);
      if (bs)
        j["sampling"] = {{"temp", temp},
                         {"grammar", grammar_file},
                         {"json_schema", schema_file},
                         {"restarts", bs->restarts}};
      j["paged_kv"] = !contiguous && m.arch().paged_kv();
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("threads %d, median of %d repetitions after one warm-up\n\n%s", m.pool().size(), reps,
                  strata::cli::batched_bench_table(*rows).c_str());
      for (const auto& r : *rows)
        if (bs)
          std::printf("B %d: sampling %.3f s of T_TG (%.1f us per token; CPU %.1f us)\n", r.npl, r.t_sample,
                      1e6 * r.t_sample / (double(r.ntg) * r.npl),
                      1e6 * r.cpu_sample / (double(r.ntg) * r.npl));
    }
    return 0;
  }
  std::unique_ptr<strata::KvPool> pool;
  strata::SessionOptions psopt = sopt;
  if (!contiguous) {
    auto p = strata::make_kv_pool(m, n_ctx, *kv, eo);
    if (!p.ok()) return fail(p.message());
    pool = std::move(*p);
    psopt.kv_pool = pool.get();
  }
  auto sess = m.new_session(psopt);
  if (!sess.ok()) return fail(sess.message());
  (*sess)->set_knobs(*knobs);
  // Random token ids like llama-bench: the content does not change the work per token.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, m.n_vocab() - 1);
  std::vector<float> logits(static_cast<size_t>(m.n_vocab()));
  std::vector<RunResult> pps_runs(prompts.size());  // per -p count, in the list's order
  RunResult tg;
  std::vector<int32_t> depth_toks(static_cast<size_t>(depth));
  for (auto& t : depth_toks) t = tok(rng);
  strata::ExpertTotals tg_warm;         // the store's decode totals after the tg warm-up
  strata::DeviceExpertTotals gpu_warm;  // the GPU tier's counts then
  strata::DeviceTiming dev_warm;        // the device's queue then
  std::vector<strata::MissStats> gpu_warm_layers;
  // The GPU tier's miss counts over the pp runs (the tg ones: gpu_warm below).
  strata::DeviceExpertTotals pp_tier;
  std::vector<strata::MissStats> pp_miss_layers;
  if (n_prompt > 0) {
    const strata::DeviceExperts* de = m.device_experts();
    const strata::DeviceExpertTotals before = de ? de->totals() : strata::DeviceExpertTotals{};
    const std::vector<strata::MissStats> before_layers =
        de ? de->miss_layers() : std::vector<strata::MissStats>{};
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int32_t> toks(static_cast<size_t>(prompts[i]));
      for (auto& t : toks) t = tok(rng);
      if (auto st = time_runs(**sess, pool.get(), toks, false, reps, logits, pps_runs[i], depth_toks);
          !st.ok())
        return fail(st.message());
    }
    if (de) {
      pp_tier = de->totals().since(before);
      pp_miss_layers = de->miss_layers();
      for (size_t l = 0; l < pp_miss_layers.size(); ++l)
        pp_miss_layers[l] = pp_miss_layers[l] - before_layers[l];
    }
  }
  // The largest count's run is the one pp_tok_s / the pp row name (as with a single -p).
  const RunResult& pp =
      pps_runs[static_cast<size_t>(std::max_element(prompts.begin(), prompts.end()) - prompts.begin())];
  if (n_gen > 0) {
    std::vector<int32_t> toks(static_cast<size_t>(n_gen));
    for (auto& t : toks) t = tok(rng);
    auto snapshot = [&] {
      if (df.dev) dev_warm = df.dev->timing();
      if (const strata::ExpertStore* es = m.expert_store()) tg_warm = expert_decode_totals(*es);
      if (const strata::DeviceExperts* de = m.device_experts()) {
        gpu_warm = de->totals();
        gpu_warm_layers = de->miss_layers();
      }
    };
    if (auto st = time_runs(**sess, pool.get(), toks, true, reps, logits, tg, depth_toks, snapshot); !st.ok())
      return fail(st.message());
  }
  // Measured before the bandwidth probe, whose buffer would otherwise be the peak RSS.
  const strata::cli::MemReport mem =
      strata::cli::mem_report(m, **sess, std::max(n_prompt, 1), pool ? pool->bytes() : 0);
  const uint64_t peak_rss = strata::peak_rss_bytes();
  const WeightTraffic wt = weight_traffic(m);
  const strata::SampleStats pps = strata::summarize(pp.tok_s), tgs = strata::summarize(tg.tok_s);
  const double tg_gbps = tgs.median * wt.bytes_per_token / 1e9;
  const double frac = bw.bytes_per_s > 0 ? tg_gbps * 1e9 / bw.bytes_per_s : 0.0;
  // On a GPU the roofline is the device's own: a copy between two of its buffers (read + write).
  double dev_bw = 0;
  if (df.dev && df.dev->kind() == strata::DeviceKind::device_gpu && n_gen > 0) {
    auto cb = df.dev->copy_bandwidth(
        static_cast<size_t>(std::clamp<uint64_t>(*bw_bytes, uint64_t{64} << 20, uint64_t{512} << 20)));
    if (cb.ok())
      dev_bw = *cb;
    else
      std::fprintf(stderr, "strata bench: %s\n", cb.message().c_str());
  }
  const char* traffic_kind = "estimate: all dense + n_used/n_expert of routed, one embedding row";
  // The device's queue over the timed tg repetitions: submissions and busy time per token, against
  // the tokens' wall time (the rest is the device waiting for the host).
  double tg_wall_s = 0;
  for (double r : tg.tok_s) tg_wall_s += n_gen / r;
  const double tg_tokens = static_cast<double>(n_gen) * static_cast<double>(tg.tok_s.size());
  strata::DeviceTiming dev_tg;
  if (df.dev && tg_tokens > 0) {
    const strata::DeviceTiming now = df.dev->timing();
    dev_tg = {now.submissions - dev_warm.submissions, now.busy_s - dev_warm.busy_s};
  }
  // Routed experts per tier over the timed tg repetitions (experts placed on a GPU).
  strata::DeviceExpertTotals tier;
  std::vector<strata::MissStats> miss_layers;  // the miss policy per layer over them
  if (const strata::DeviceExperts* de = m.device_experts()) {
    tier = de->totals().since(gpu_warm);
    std::vector<strata::MissStats> now = de->miss_layers();
    for (size_t l = 0; l < now.size() && l < gpu_warm_layers.size(); ++l)
      now[l] = now[l] - gpu_warm_layers[l];
    miss_layers = std::move(now);
  }

  const strata::cli::GpuBenchReport gr{pp_tier,   tier,      pp_miss_layers, miss_layers, dev_tg,
                                       tg_tokens, tg_wall_s, tg_gbps,        dev_bw};
  if (json) {
    j["model"] = model_path;
    j["arch"] = m.arch_name();
    j["type"] = wt.main_type;
    j["threads"] = m.pool().size();
    j["n_prompt"] = n_prompt;
    j["n_gen"] = n_gen;
    j["reps"] = reps;
    j["pp_tok_s"] = pps.median;
    j["tg_tok_s"] = tgs.median;
    j["pp"] = stats_json(pps, pp.tok_s);
    if (prompts.size() > 1)
      for (size_t i = 0; i < prompts.size(); ++i) {
        nlohmann::json r = stats_json(strata::summarize(pps_runs[i].tok_s), pps_runs[i].tok_s);
        r["n_prompt"] = prompts[i];
        j["pp_runs"].push_back(r);
      }
    j["tg"] = stats_json(tgs, tg.tok_s);
    j["tg_weight_bytes_per_token"] = wt.bytes_per_token;
    j["tg_weight_bytes_kind"] = traffic_kind;
    j["tg_gbps"] = tg_gbps;
    j["tg_fraction_of_membw"] = frac;
    j["peak_rss_bytes"] = peak_rss;  // the run's (the probe's buffer was gone before it started)
    j["n_depth"] = depth;
    j["cache_type_k"] = strata::kv_type_name(kv->k);
    j["cache_type_v"] = strata::kv_type_name(kv->v);
    // The KV the pp / tg session held at the end (the last tg repetition's positions): the paged
    // pool's numbers under /metrics' keys, or the contiguous session's bytes.
    if (pool) {
      j["kv"] = strata::server::kv_json(pool->stats());
      j["kv"]["paged"] = true;
    } else {
      j["kv"] = {{"paged", false}, {"bytes", (*sess)->memory().kv_cache}};
    }
    if (const strata::ExpertStore* es = m.expert_store()) {
      // The timed tg repetitions only (decode steps, warm-up excluded): the tokens tg_tok_s is about.
      const strata::ExpertTotals t = expert_decode_totals(*es).since(tg_warm);
      j["expert_policy"] = es->info().policy;
      j["expert_budget_bytes"] = es->info().tier_bytes;
      j["expert_hit_rate"] = t.hit_rate();
      j["expert_bytes_read"] = t.bytes_read;
      j["expert_stall_ms_per_token"] = t.tokens ? t.stall_s * 1e3 / t.tokens : 0.0;
      j["expert_bytes_read_per_token"] = t.tokens ? double(t.bytes_read) / t.tokens : 0.0;
      j["expert_prefetch_precision"] = t.prefetch_precision();
      j["expert_prefetch_recall"] = t.prefetch_recall();
      j["expert_warm_bytes"] = es->info().warm_bytes;  // --expert-profile: read at load, not per token
      j["expert_warm_s"] = es->info().warm_seconds;
    }
    strata::cli::gpu_bench_json(m.device_experts(), df.dev.get(), gr, j);
    j["memory"] = strata::cli::mem_report_json(mem);
    if (auto st = xf.finish(m, true); !st.ok()) return fail(st.message());
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("| %-24s | %-6s | %10s | %8s | %7s | %6s | %10s | %8s | %19s |\n", "model", "type", "size",
              "params", "threads", "test", "t/s median", "stddev", "min .. max");
  std::printf("|%s|\n", std::string(24 + 6 + 10 + 8 + 7 + 6 + 10 + 8 + 19 + 26, '-').c_str());
  std::string name = model_path.substr(model_path.find_last_of('/') + 1);
  if (name.size() > 24) name = name.substr(0, 21) + "...";
  auto row = [&](const char* test, int count, const strata::SampleStats& s) {
    char tname[64];
    if (depth > 0)
      std::snprintf(tname, sizeof tname, "%s%d@d%d", test, count, depth);
    else
      std::snprintf(tname, sizeof tname, "%s%d", test, count);
    std::printf("| %-24s | %-6s | %10s | %7.1fM | %7d | %6s | %10.2f | %8.2f | %8.2f .. %8.2f |\n",
                name.c_str(), wt.main_type.c_str(), strata::format_bytes(wt.total_bytes).c_str(),
                wt.n_params / 1e6, m.pool().size(), tname, s.median, s.stddev, s.min, s.max);
  };
  for (size_t i = 0; i < prompts.size() && n_prompt > 0; ++i)
    row("pp", prompts[i], strata::summarize(pps_runs[i].tok_s));
  if (n_gen > 0) row("tg", n_gen, tgs);
  std::fputs(membw_line(bw).c_str(), stdout);
  if (n_gen > 0) {
    std::printf("tg weights: %s per token (%s)\n",
                strata::format_bytes(static_cast<uint64_t>(wt.bytes_per_token)).c_str(), traffic_kind);
    std::printf("tg bandwidth: %.2f GB/s = %.1f%% of measured read bandwidth\n", tg_gbps, 100.0 * frac);
  }
  std::fputs(
      strata::cli::gpu_bench_text(m.device_experts(), df.dev.get(), gr, n_prompt > 0, n_gen > 0, kpf.verbose)
          .c_str(),
      stdout);
  std::fputs(kv_line(pool.get(), (*sess)->memory().kv_cache).c_str(), stdout);
  std::fputs(strata::cli::mem_report_text(mem).c_str(), stderr);
  if (auto st = xf.finish(m); !st.ok()) return fail(st.message());
  return 0;
}

const strata::cli::Registrar reg{"bench", "measure prompt / generation speed and memory bandwidth",
                                 &cmd_bench};

}  // namespace
