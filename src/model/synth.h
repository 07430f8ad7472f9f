// Seeded random-weight GGUF models of any shape and type (`strata synth`), loadable by strata and by
// llama.cpp v0.5.0. For tests and benchmarks: the weights are random, so compare numbers, not text.
//
//   SynthSpec s; s.arch = "qwen3moe"; s.n_layer = 2; ...; s.type = "q8_0";
//   STRATA_TRY(synth_validate(s));
//   auto info = synth_write(s, "m.gguf");   // multi-threaded generation, deterministic per seed
//
// Weights: matrices N(0, 1/fan_in), embeddings N(0, 1) plus a shared "router direction" u, norm
// weights U(0.5, 1.5), routers N(0, 1/d) so routing is diverse. router_skew A > 0 adds to expert e's
// router row a multiple of u that shifts its logit by -0.7·A·ln(rank(e)) (rank: a seeded per-layer
// permutation), so expert popularity becomes Zipf-like, share ≈ ∝ rank^-A.
// deepseek_v41 writes a checkpoint directory instead (synth_deepseek_v41.cpp: FP8 / FP4 codes from
// synth_codes.h, no quantizer; its router_skew, default 1, goes into the selection-only gate.bias).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata {

struct SynthSpec {
  std::string arch = "qwen3moe";  // qwen3moe | llama | qwen2moe | deepseek4 | deepseek_v41
  int n_layer = 2;
  int n_embd = 64;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 0;       // 0: n_embd / n_head
  int n_expert = 0;       // llama: 0 = dense FFN
  int n_expert_used = 0;  // top-k
  int expert_ffn = 0;     // per-expert FFN width
  int ffn = 0;            // dense FFN width (llama without experts); written as feed_forward_length
  int shared_ffn = 0;     // qwen2moe shared expert width (0: expert_ffn)
  int n_vocab = 512;
  // f32 | f16 | q8_0 | q4_0 | q4_k | q6_k | mxfp4 / nvfp4 (experts MXFP4 / NVFP4, other matrices
  // Q8_0; NVFP4 rows are 64-element blocks) | q4_k_m
  // (llama.cpp's Q4_K_M rule: output and some layers' attn_v / ffn_down Q6_K, the rest Q4_K).
  // K-quant rows are 256-element super-blocks, so every matrix's row length must divide by 256.
  std::string type = "f32";
  uint64_t seed = 1;
  float router_skew = 0.0f;
  int n_ctx = 4096;  // context_length metadata
  float rope_base = 1e6f;
  float rms_eps = 1e-6f;
  int n_threads = 0;  // <= 0: all cores
  // Normal draws (llama-class archs): false, Box-Muller (the bytes every existing synth has);
  // true, quantile draws: N(0, 1) quantiles of 16-bit draws from one table (synth_codes.h's, |x| <=
  // 4.3), several times faster, for models of tens of GB (--draws quantile).
  bool quantile_draws = false;
  // deepseek4 only (docs: ../shared/docs/deepseek-v4.md §6; synth_preset_v4_flash gives the real
  // widths). n_head_kv must be 1 and head_dim is the K = V width; expert_ffn is also the shared
  // expert's width; routed experts / dense matrices follow --type as above.
  int rope_dim = 0;                  // rotated tail of each head (rope.dimension_count)
  int q_lora = 0;                    // attention.q_lora_rank
  int out_groups = 0, out_lora = 0;  // grouped output projection
  int window = 128;                  // sliding window
  std::vector<int> compress_ratios;  // per layer 0 / 4 / 128 (empty: 0, 0, then 4, 128 alternating)
  int hash_layers = 0;               // the first N layers route by token id
  int indexer_heads = 0, indexer_dim = 0, indexer_topk = 0;
  float swiglu_clamp = 10.0f;
  bool fim = false;  // fill-in-the-middle tokens in the vocabulary (Qwen2.5-Coder's six), for infill tests
  // deepseek_v41 only: a checkpoint directory in the official layout (synth_deepseek_v41.cpp), with
  // n_embd = dim, expert_ffn = moe_inter_dim (the shared expert's too), indexer_* = index_*,
  // swiglu_clamp = swiglu_limit, n_ctx = max_seq_len, compress_ratios of 0 / 1 / 2.
  std::vector<int> kv_sources, index_sources;  // empty: the first layer of each run of one ratio
  int candidate_layer = -2;  // -2: the first ratio-1 index source (if no later one has ratio 2); -1: none
  int candidate_blocks = 2, candidate_block_size = 4;
  std::vector<int> engram_layers;  // none unless given
  int64_t engram_rows = 0;         // rows per Engram table (about; 0: 64 per hash column)
  int engram_heads = 2, engram_dim = 32, engram_ngram = 3;
  uint64_t shard_bytes = 5ull << 30;  // safetensors shard size (5 GiB)
};

// DeepSeek-V4-Flash's widths (d 4096, 64 heads of 512, q_lora 1024, 8 output groups of 1024, 256
// experts top-6 of 2048 + 1 shared, indexer 64 x 128 top-512, window 128, vocab 129,280, 3 hash
// layers at most) with n_layer layers; compress ratios [0, 0, 4, 128, 4, ...] unless set after.
SynthSpec synth_preset_v4_flash(int n_layer);

// DeepSeek-V4.1-Flash's widths (tests/data/deepseek-v4.1-flash.config.json: dim 5120, 64 heads of
// 512, q_lora 1280, 8 output groups of 1024, 384 experts top-6 of 2304 + 1 shared, indexer 32 x 128
// top-512, candidates 2048 blocks of 8, window 128, Engram 8 heads x 256 of 2-4-grams with tables
// cut to about 1 GB (4M rows), vocab 129,280) with n_layer layers, ratios all 2 unless set after.
SynthSpec synth_preset_v41_flash(int n_layer);
// The small V4.1 shape tests use (`--arch deepseek_v41` without a preset): d 128, 4 layers
// [0, 2, 1, 1] (Full, Full + candidates, Reindex), Engram on layers 0 and 2, 8 experts top-2.
SynthSpec synth_preset_v41_tiny();

// Every problem with a spec, as one message naming the flag ("--embd 70 must be a multiple of 32
// for q8_0").
Status synth_validate(const SynthSpec& s);

struct SynthInfo {
  uint64_t n_params = 0;
  uint64_t n_bytes = 0;  // file size
  int n_tensors = 0;
  int n_files = 1;  // deepseek_v41: safetensors shards
  double seconds = 0;
};

// A GGUF file; deepseek_v41: a checkpoint directory (config.json, sharded safetensors + index,
// engram_meta.json, tokenizer.json + tokenizer_config.json).
Result<SynthInfo> synth_write(const SynthSpec& s, const std::string& path);

// The byte-level BPE vocabulary synth writes (exposed for tests).
struct SynthVocab {
  std::vector<std::string> tokens;  // byte-level (GPT-2 unicode) text of each id
  std::vector<int32_t> types;       // 1 normal, 3 control
  std::vector<std::string> merges;  // "left right", rank order
  std::string pre;                  // pre-tokenizer name
  int32_t bos = -1, eos = -1;
  // fim: <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};
// n_vocab >= 259 (265 with fim): ids 0..255 are the bytes, then merges, then (fim) the six FIM
// control tokens, then <|endoftext|>, <|im_start|>, <|im_end|> (deepseek_v41: DeepSeek's
// <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>, <｜User｜>, <｜Assistant｜>, <think>, </think>).
// Deterministic per (n_vocab, arch, fim); eos is <|im_end|> for qwen archs and deepseek4 and <|endoftext|>
// for llama.
SynthVocab synth_vocab(int n_vocab, const std::string& arch, bool fim = false);

}  // namespace strata
