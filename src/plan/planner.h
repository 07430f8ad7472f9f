// The memory bill (`strata plan`): what a model needs in RAM before it runs, by category, and the
// expert budget to give the tiered expert store for a RAM size (design.md principle 1: "2.1 GB of
// experts resident" is exact and predicted before the run).
//
//   total = dense_weights + expert_weights_resident + kv_cache + scratch + io_buffers + runtime
//
//  * dense_weights: every non-routed tensor (always resident), by class;
//  * expert_weights_resident: all routed experts when no budget applies (served from the mapped
//    file), else the fast tier: n_slots x slot_bytes, a slot holding one expert's gate+up+down
//    as 4 KiB-aligned covers of its file ranges (the expert store's layout, for O_DIRECT reads; a
//    checkpoint directory's FP4 parts with their staging, memory/experts/expert_store_catalog.h);
//  * kv_cache: plan/kv_bill's bill (the architecture's KV spec) for one sequence of n_ctx tokens,
//    x n_seq sequences; with --kv-budget the paged parts' lines are the pool kv/KvPool::bill sizes
//    for it (serve's pool), the others as before;
//  * scratch: the step buffers at min(n_ubatch, n_ctx) tokens per step, sized by the
//    architecture's own function (decoder_scratch, ds4_arena_bytes), which the sequences'
//    sessions share (SessionOptions::share_scratch, as the engine's slots do), plus one logits row;
//  * io_buffers: what the I/O engine holds besides the slots (reads land in the slots themselves,
//    O_DIRECT into the tier, so no staging copies; no registered buffers): io_engine_planned_bytes
//    (memory/io_engine.h): the io_uring rings for --io-depth reads as mapped, the engine's tables
//    and one thread's stack, or 64 KiB per pread thread, or nothing for the sync engine; only with
//    a budget;
//  * kv_spill (serve's prefix cache, priced when asked: -cram, --prefix-cache-dir): the RAM tier's
//    budget and the SSD writer's queue at most, as kv/KvPool::bill sizes them for the engine's
//    pool (--kv-budget, else -c x --batch sequences in whole blocks); the SSD files' budget is reported
//    apart (not RAM). Only where the pool caches prefixes (every KV part paged);
//  * runtime: process overhead that is not the model (code, tokenizer tables, thread stacks);
//  * engram_tables (V4.1): the Engram n-gram tables at their checkpoint storage (FP8 + UE8M0 per
//    32), placed like memory/engram_store places them: no --engram-budget or a budget that holds
//    them -> RAM tier (all of them), else the SSD tier with a row cache of budget / (row +
//    bookkeeping) rows (its I/O staging in io_buffers).
// The recommended budget = RAM - everything else - a safety margin, rounded down to whole slots;
// below one layer's top-k slots the plan does not fit (an error naming the minimum).
//
// The model facts come from a GGUF (exact tensor bytes), from a Hugging Face config.json (bytes
// estimated from the shapes the architecture implies at assumed storage types) or from a checkpoint
// directory (its config's estimate; the routed experts and their slot from the expert store's catalog).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "memory/io/io_engine.h"
#include "plan/kv_bill.h"
#include "quant/qtypes.h"

namespace strata {

enum PlanClass {
  plan_class_embed_output,  // token_embd, output
  plan_class_attention,     // attention projections, compressors, indexer
  plan_class_shared,        // shared experts
  plan_class_dense_ffn,     // FFNs of dense layers
  plan_class_norms_router,  // norms, routers, biases, hyper-connection mixers, everything else
  plan_class_engram_proj,   // V4.1 Engram projections (wkv, q/k weights); the tables are apart
  plan_class_routed,        // routed experts
  plan_class_count,
};
const char* plan_class_name(int c);

struct PlanModel {
  std::string arch, source;
  bool from_config = false;
  std::string types;  // "from the file", or the assumed storage types of a config estimate
  int n_layer = 0, n_embd = 0, n_vocab = 0;
  int n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0, n_ff = 0;
  int n_moe_layers = 0;
  int hc = 0, n_indexer_head = 0, indexer_head_dim = 0, indexer_top_k = 0;  // deepseek4
  uint64_t class_bytes[plan_class_count] = {};
  uint64_t class_params[plan_class_count] = {};
  uint64_t expert_bytes = 0;  // one expert's gate+up+down (the largest layer's)
  uint64_t slot_bytes = 0;    // its slot in the fast tier (multiple of 4096)
  KvModelSpec kv;
  // V4.1 Engram tables (0 tables for other models)
  int engram_tables = 0;
  int engram_cols = 0;              // rows read per token per table
  int64_t engram_rows = 0;          // all tables
  uint64_t engram_row_bytes = 0;    // one row: values + scales as stored
  uint64_t engram_table_bytes = 0;  // all tables

  uint64_t dense_bytes() const;
};

// Storage types assumed for a config.json estimate.
struct PlanTypes {
  GgmlType expert = GgmlType::count;  // count: the architecture's default (mxfp4 for deepseek-v4, else q8_0)
  GgmlType dense = GgmlType::q8_0;    // other matrices and embeddings
};

Result<PlanModel> plan_model_from_gguf(const GgufFile& f);
Result<PlanModel> plan_model_from_hf_config_text(const std::string& text, const std::string& source,
                                                 const PlanTypes& types = {});
Result<PlanModel> plan_model_from_hf_config(const std::string& path, const PlanTypes& types = {});
// A checkpoint directory (deepseek_v41): the config estimate at the fast path's types, the routed
// experts and their slot from the expert store's catalog of the shards (planner_dir.cpp).
Result<PlanModel> plan_model_from_checkpoint_dir(const std::string& dir);

struct PlanOptions {
  uint64_t ram = 0;                // 0: no RAM limit given (all experts resident)
  int64_t n_ctx = 0;               // 0: the model's training context, at most 4096 (as `strata run`)
  int n_seq = 1;                   // sequences (batch)
  int n_ubatch = 512;              // tokens per forward step
  KvType kv_type = KvType::f32;    // every KV part but the standard decoders' V rows (-ctk)
  KvType kv_type_v = KvType::f32;  // the "v" parts (-ctv)
  bool kv_type_default = false;    // no KV type asked for: deepseek4's caches stay f32 (as run's)
  bool has_kv_type_index = false;  // --kv-type-index given; else indexer keys at kv_type
  KvType kv_type_index = KvType::f32;
  bool kv_native = false;  // -ctk native: parts whose reference storage is known at it (V4.1's)
  // The KV types as the caches take them (kv/kv_type.h; kv_spec_typed maps them to parts).
  KvTypes kv_types() const;
  int io_threads = 4;  // threads backend: reader threads
  // The expert store's I/O engine: uring priced by its rings for io_depth reads, threads by their
  // stacks, sync at nothing (the compute thread reads); auto as io_engine_make would pick here.
  IoBackend io_backend = IoBackend::io_backend_threads;
  int io_depth = 32;           // io_uring reads in flight
  int n_threads = 0;           // 0: the machine's cores
  uint64_t margin = 0;         // safety margin; 0: auto (32 MiB + 2% of ram)
  uint64_t expert_budget = 0;  // --expert-budget to price (as run/bench would use it); 0: none
  uint64_t engram_budget = 0;  // --engram-budget (V4.1); 0: the tables resident in RAM
  // serve's prefix-cache spill tiers: -cram bytes (-1: the KV pool's bytes, serve's default; 0:
  // none), an SSD tier (--prefix-cache-dir) under prefix_cache_dir_size bytes (0: no limit).
  int64_t cache_ram = 0;
  bool prefix_cache_dir = false;
  uint64_t prefix_cache_dir_size = 0;
  int block_size = 16;  // the pool's positions per block
  // serve's --kv-budget: the paged KV pool's bytes (0: -c x --batch sequences in whole blocks, the
  // engine's default); kv_cache then bills the pool KvPool sizes for it (kv_pool_budget below).
  uint64_t kv_budget = 0;
  int ctx_checkpoints = 8;  // serve's --ctx-checkpoints (per sequence; models with window parts)
};

struct PlanKvLine {
  std::string name, what;
  std::string type;            // the element type its rows are stored in (kv_type_name)
  double bytes_per_token = 0;  // growth per token, one sequence
  uint64_t bytes = 0;          // at n_ctx, all sequences (in the pool --kv-budget sizes, when paged)
  bool paged = false;          // its rows live in the engine's paged KV pool (kv/KvPool::pages_part)
};

struct PlanBill {
  PlanModel model;
  PlanOptions opts;  // with defaults resolved
  uint64_t dense_weights = 0;
  uint64_t expert_weights_total = 0;
  uint64_t expert_weights_resident = 0;
  int64_t expert_slots = 0;  // 0: no budget (all resident from the mapping)
  int64_t expert_count = 0;  // routed experts in all layers
  uint64_t expert_min = 0;   // one layer's top-k slots
  uint64_t kv_cache = 0;
  // With --kv-budget: the pool's bytes for it and for the default budget (the paged lines scaled by
  // their ratio); 0 when none was given or the architecture pages no KV.
  uint64_t kv_pool_budget = 0, kv_pool_default = 0;
  std::vector<PlanKvLine> kv_lines;
  uint64_t scratch = 0;
  uint64_t io_buffers = 0;
  uint64_t runtime = 0;
  uint64_t engram_tables = 0;  // bytes the Engram tier takes in RAM (tables or row cache)
  std::string engram_tier;     // "ram" | "ssd" | "" (no Engram)
  int64_t engram_slots = 0;    // ssd tier: rows the cache holds
  uint64_t engram_io = 0;      // ssd tier: its I/O staging buffers (part of io_buffers)
  // serve's prefix-cache spill (kv/KvPool::bill): RAM tier + SSD write queue (RAM, in total), and
  // on SSD one file per block under the budget (not RAM); note: why none when asked for.
  uint64_t kv_ram_tier = 0, kv_spill_queue = 0;
  uint64_t kv_ssd_file = 0, kv_ssd_budget = 0;
  bool kv_ssd = false;
  std::string kv_spill_note;
  // Window-ring checkpoints at most (a model with sliding-window layers: the prefix cache's
  // kv/kv_checkpoints.h, --ctx-checkpoints x --batch snapshots, as kv/KvPool::bill sizes them).
  uint64_t kv_checkpoints = 0;
  uint64_t kv_spill() const { return kv_ram_tier + kv_spill_queue + kv_checkpoints; }
  uint64_t total = 0;
  // With a RAM size:
  uint64_t margin = 0;
  uint64_t recommended_budget = 0;  // --expert-budget to pass; 0 when all experts fit
  bool fits = true;
  std::string problem;  // why it does not fit (names the minimum)
};

// The bill. Errors for invalid options (n_ctx, n_seq, n_ubatch < 1 after defaults) and for an
// expert_budget below one layer's top-k slots (naming the minimum).
Result<PlanBill> plan_make(const PlanModel& m, const PlanOptions& o);
// The model's KV parts at the types its caches would hold under o's KV types: the architecture's
// own mapping (deepseek4's f32 default, deepseek_v41's native default; kv_spec_typed otherwise),
// then -ctk native's (o.kv_native).
KvSpec plan_kv_spec(const PlanModel& m, const PlanOptions& o);
// The kv_spill part of the bill (plan_kv_spill.cpp), from kv/KvPool::bill.
void plan_kv_spill(const PlanModel& m, const PlanOptions& p, PlanBill* b);
// --kv-budget: the paged lines re-billed as the pool KvPool sizes for that budget (planner.h).
Status plan_kv_budget(const PlanModel& m, const PlanOptions& p, PlanBill* b);
std::string plan_text(const PlanBill& b);
std::string plan_json(const PlanBill& b);  // keys documented in plan_json (planner.cpp)

}  // namespace strata
