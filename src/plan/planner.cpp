// The memory bill: plan_make and its text / JSON renderings (planner.h).
#include "plan/planner.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <thread>

#include "base/units.h"
#include "kv/kv_pool.h"
#include "memory/engram/engram_table.h"
#include "memory/io/io_engine.h"
#include "model/archs/decoder.h"
#include "model/deepseek4/ds4_forward.h"
#include "model/deepseek_v41/v41_forward.h"

namespace strata {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// One session's step scratch at nb tokens per step, as the architecture sizes it (its own
// function, fed the plan's hyper-parameters): the standard decoder's arena and residual rows
// (model/archs/decoder.h decoder_scratch), deepseek4's arena (ds4_arena_bytes; V4.1, whose
// reference path keeps small per-step vectors, is priced the same way as an upper bound).
uint64_t session_scratch_bytes(const PlanModel& m, int64_t nb, int64_t n_ctx, int n_threads,
                               const KvTypes& kv) {
  if (m.hc > 0) {
    ds4::Ds4Params p;
    p.n_embd = m.n_embd;
    p.n_head = m.n_head;
    p.head_dim = m.head_dim_k;
    p.ih = m.n_indexer_head;
    p.ihd = m.indexer_head_dim;
    p.itopk = m.indexer_top_k;
    p.n_expert = m.n_expert;
    p.n_used = m.n_expert_used;
    p.n_ff_exp = m.n_ff_exp;
    p.hc = m.hc;
    if (m.kv.family == KvFamily::deepseek4) {  // its attention op's typed-row scratch (the spec's shape)
      p.n_layer = m.kv.n_layer;
      p.n_swa = m.kv.n_swa;
      p.ratios = m.kv.compress_ratios;
    }
    return ds4::ds4_arena_bytes(p, nb, n_ctx, kv);
  }
  HParams hp;
  hp.n_layer = m.n_layer;
  hp.n_embd = m.n_embd;
  hp.n_head = m.n_head;
  hp.n_head_kv = m.n_head_kv;
  hp.head_dim_k = m.head_dim_k;
  hp.head_dim_v = m.head_dim_v;
  hp.n_ff = m.n_ff;
  hp.n_expert = m.n_expert;
  hp.n_expert_used = m.n_expert_used;
  hp.n_ff_exp = m.n_ff_exp;
  hp.n_ff_shexp = m.n_ff_shexp;
  hp.layers.resize(static_cast<size_t>(std::max(m.n_layer, 0)));
  for (LayerParams& l : hp.layers) {
    l.n_head = m.n_head;
    l.n_head_kv = m.n_head_kv;
    l.n_ff_exp = m.n_ff_exp;
  }
  const DecoderScratch s = decoder_scratch(hp, nb, n_ctx, n_threads);
  return s.arena + s.rows;
}

// The Engram tier as memory/engram_store places it (see planner.h).
Status plan_engram(const PlanModel& m, const PlanOptions& p, PlanBill* b) {
  if (m.engram_tables == 0) return {};
  if (p.engram_budget == 0 || p.engram_budget >= m.engram_table_bytes) {
    b->engram_tier = "ram";
    b->engram_tables = m.engram_table_bytes;
    return {};
  }
  const uint64_t per_row = m.engram_row_bytes + kEngramSlotOverhead;
  const int64_t slots = static_cast<int64_t>(p.engram_budget / per_row);
  if (slots < m.engram_cols)
    return err(
        "plan: --engram-budget %s holds %lld Engram rows; the minimum is %d rows (one token's rows of one "
        "Engram layer) x %llu bytes = %s",
        format_bytes(p.engram_budget).c_str(), static_cast<long long>(slots), m.engram_cols,
        static_cast<unsigned long long>(per_row),
        format_bytes(static_cast<uint64_t>(m.engram_cols) * per_row).c_str());
  b->engram_tier = "ssd";
  b->engram_slots = slots;
  b->engram_tables = static_cast<uint64_t>(slots) * per_row;
  // staging at the default --engram-io-depth 64 / --engram-io-threads 4 (tools/engram_flags.h)
  const uint64_t vb = m.engram_row_bytes * 32 / 33, sb = m.engram_row_bytes - vb;
  b->engram_io = static_cast<uint64_t>(engram_staging_count(64, 4)) *
                 engram_staging_bytes(static_cast<uint32_t>(vb), static_cast<uint32_t>(sb));
  return {};
}

void appendf(std::string* s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* s, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) s->append(buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
}

}  // namespace

const char* plan_class_name(int c) {
  static const char* names[plan_class_count] = {
      "embeddings/output",  "attention",          "shared experts", "dense ffn",
      "norms/router/other", "engram projections", "routed experts"};
  return c >= 0 && c < plan_class_count ? names[c] : "?";
}

uint64_t PlanModel::dense_bytes() const {
  uint64_t s = 0;
  for (int c = 0; c < plan_class_count; ++c)
    if (c != plan_class_routed) s += class_bytes[c];
  return s;
}

KvTypes PlanOptions::kv_types() const {
  KvTypes t;
  t.k = kv_type;
  t.v = kv_type_v;
  t.is_default = kv_type_default;
  t.has_index = has_kv_type_index;
  t.index = kv_type_index;
  return t;
}

KvSpec plan_kv_spec(const PlanModel& m, const PlanOptions& p) {
  const KvTypes kvt = p.kv_types();
  KvSpec s;
  if (m.kv.family == KvFamily::deepseek4)
    s = kv_spec_typed(m.kv.kv, ds4::ds4_kv_types_resolved(kvt));
  else if (m.kv.family == KvFamily::deepseek_v41)
    s = v41::v41_kv_spec_typed(m.kv.kv, kvt);  // a tool's default: the reference's own types
  else
    s = kv_spec_typed(m.kv.kv, kvt);
  if (p.kv_native)
    for (KvLayerSpec& l : s.layers)
      for (KvPartSpec& part : l.parts)
        if (part.has_native) part.type = part.native;
  return s;
}

Result<PlanBill> plan_make(const PlanModel& m, const PlanOptions& o) {
  PlanBill b;
  b.model = m;
  b.opts = o;
  PlanOptions& p = b.opts;
  if (p.n_ctx == 0) p.n_ctx = m.kv.n_ctx_train > 0 ? std::min<int64_t>(m.kv.n_ctx_train, 4096) : 4096;
  if (p.n_threads <= 0) p.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (p.n_ctx < 1) return err("plan: context size %lld must be >= 1", (long long)p.n_ctx);
  if (p.n_seq < 1) return err("plan: batch %d must be >= 1 sequence", p.n_seq);
  if (p.n_ubatch < 1) return err("plan: tokens per step %d must be >= 1", p.n_ubatch);
  if (p.io_threads < 1) return err("plan: io threads %d must be >= 1", p.io_threads);
  if (p.io_depth < 1) return err("plan: io depth %d must be >= 1", p.io_depth);
  if (p.io_backend == IoBackend::io_backend_auto)  // priced as what io_engine_make picks here
    p.io_backend = io_uring_usable() ? IoBackend::io_backend_uring : IoBackend::io_backend_threads;

  b.dense_weights = m.dense_bytes();
  b.expert_weights_total = m.class_bytes[plan_class_routed];
  b.expert_count = int64_t{m.n_moe_layers} * m.n_expert;
  b.expert_min = static_cast<uint64_t>(m.n_expert_used) * m.slot_bytes;

  // the parts at the types the caches would hold
  KvModelSpec typed = m.kv;
  typed.kv = plan_kv_spec(m, p);
  const KvBill bill = kv_bill_make(typed);
  const int64_t nb = std::min<int64_t>(p.n_ubatch, p.n_ctx);  // a session's n_batch (Model::new_session)
  b.kv_cache = 0;
  for (const KvBillLine& l : bill.lines) {
    const KvType t = l.part.type;
    PlanKvLine pl{l.name(),
                  l.what(),
                  kv_type_name(l.part.stored_as(t)),
                  l.bytes_per_token(t),
                  l.bytes(t, p.n_ctx, nb) * static_cast<uint64_t>(p.n_seq),
                  KvPool::pages_part(l.part)};
    b.kv_lines.push_back(pl);
    b.kv_cache += pl.bytes;
  }
  STRATA_TRY(plan_kv_budget(m, p, &b));
  // One step scratch (n_batch capped at the context) that the sequences' sessions share (an
  // engine's slots: SessionOptions::share_scratch), plus one logits row.
  b.scratch = session_scratch_bytes(m, nb, p.n_ctx, p.n_threads, p.kv_types()) +
              4 * static_cast<uint64_t>(std::max(m.n_vocab, 0));
  b.runtime = 16 * kMiB + 64 * static_cast<uint64_t>(std::max(m.n_vocab, 0));

  STRATA_TRY(plan_engram(m, p, &b));
  plan_kv_spill(m, p, &b);

  b.expert_weights_resident = b.expert_weights_total;
  const uint64_t io = io_engine_planned_bytes(p.io_backend, p.io_threads, p.io_depth);
  if (p.expert_budget > 0 && b.expert_count > 0) {  // priced as given; --ram then only checks it
    const int64_t slots =
        std::min(m.slot_bytes ? static_cast<int64_t>(p.expert_budget / m.slot_bytes) : 0, b.expert_count);
    if (slots < m.n_expert_used)
      return err("plan: --expert-budget %s holds %lld slots of %s; the minimum is one layer's top-%d = %s",
                 format_bytes(p.expert_budget).c_str(), (long long)slots, format_bytes(m.slot_bytes).c_str(),
                 m.n_expert_used, format_bytes(b.expert_min).c_str());
    b.expert_slots = slots;
    b.expert_weights_resident = static_cast<uint64_t>(slots) * m.slot_bytes;
    b.io_buffers = io;
  }
  b.io_buffers += b.engram_io;
  if (p.ram > 0 && p.expert_budget > 0) {
    b.margin = p.margin > 0 ? p.margin : 32 * kMiB + p.ram / 50;
    const uint64_t need = b.dense_weights + b.expert_weights_resident + b.kv_cache + b.kv_spill() +
                          b.scratch + b.io_buffers + b.runtime + b.engram_tables + b.margin;
    if (need > p.ram) {
      b.fits = false;
      b.problem = "RAM " + format_bytes(p.ram) + " is too small for --expert-budget " +
                  format_bytes(p.expert_budget) + ": the bill with a " + format_bytes(b.margin) +
                  " safety margin is " + format_bytes(need);
    }
  } else if (p.ram > 0) {
    b.margin = p.margin > 0 ? p.margin : 32 * kMiB + p.ram / 50;
    const uint64_t other = b.dense_weights + b.kv_cache + b.kv_spill() + b.scratch + b.runtime +
                           b.engram_tables + b.engram_io + b.margin;
    const uint64_t avail = p.ram > other ? p.ram - other : 0;
    if (avail >= b.expert_weights_total || b.expert_count == 0) {
      // Everything fits (or nothing is routed): no budget, experts served from the mapping.
      if (avail < b.expert_weights_total || p.ram < other) {
        b.fits = false;
        b.problem = "RAM " + format_bytes(p.ram) + " is too small: dense weights + KV + scratch + runtime" +
                    (b.engram_tables ? " + Engram tables" : "") + " + margin need " + format_bytes(other) +
                    (b.engram_tier == "ram" && p.engram_budget == 0
                         ? " (put the Engram tables on SSD: --engram-budget)"
                         : "");
      }
    } else {
      const uint64_t for_slots = avail > io ? avail - io : 0;
      int64_t slots = m.slot_bytes ? static_cast<int64_t>(for_slots / m.slot_bytes) : 0;
      slots = std::min(slots, b.expert_count);
      b.io_buffers = io + b.engram_io;
      if (slots < m.n_expert_used) {
        b.fits = false;
        slots = m.n_expert_used;
        const uint64_t need = other + io + b.expert_min;
        b.problem = "RAM " + format_bytes(p.ram) +
                    " is too small: routed experts need at least one layer's top-" +
                    std::to_string(m.n_expert_used) + " = " + format_bytes(b.expert_min) + " (" +
                    std::to_string(m.n_expert_used) + " slots of " + format_bytes(m.slot_bytes) +
                    "), the rest leaves " + format_bytes(for_slots) + "; the minimum RAM is " +
                    format_bytes(need) + " (with a " + format_bytes(b.margin) + " safety margin)" +
                    (b.engram_tier == "ram" && p.engram_budget == 0
                         ? "; the Engram tables take " + format_bytes(b.engram_tables) +
                               " of it (put them on SSD: --engram-budget)"
                         : "");
      }
      b.expert_slots = slots;
      b.expert_weights_resident = static_cast<uint64_t>(slots) * m.slot_bytes;
      b.recommended_budget = b.expert_weights_resident;
    }
  }
  b.total = b.dense_weights + b.expert_weights_resident + b.kv_cache + b.kv_spill() + b.scratch +
            b.io_buffers + b.runtime + b.engram_tables;
  return b;
}

std::string plan_text(const PlanBill& b) {
  const PlanModel& m = b.model;
  const PlanOptions& p = b.opts;
  std::string s;
  auto row = [&](const char* name, uint64_t bytes, const std::string& note) {
    appendf(&s, "  %-26s %12s  %s\n", name, format_bytes(bytes).c_str(), note.c_str());
  };
  auto pct = [&](uint64_t x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%5.1f%%",
                  b.total ? 100.0 * static_cast<double>(x) / static_cast<double>(b.total) : 0.0);
    return std::string(buf);
  };
  appendf(&s, "memory plan: %s (%s; weights %s)\n", m.source.c_str(), m.arch.c_str(), m.types.c_str());
  appendf(&s, "  %d layers, n_embd %d, vocab %d", m.n_layer, m.n_embd, m.n_vocab);
  if (m.n_expert > 0)
    appendf(&s, ", %d routed experts x %d MoE layers (top-%d, ffn %d)", m.n_expert, m.n_moe_layers,
            m.n_expert_used, m.n_ff_exp);
  appendf(&s, "\n  context %lld x batch %d, KV %s", (long long)p.n_ctx, p.n_seq,
          p.kv_native || (m.kv.family == KvFamily::deepseek_v41 && p.kv_type_default)
              ? "native (the reference's own types where known)"
              : kv_type_name(p.kv_type));
  if (p.kv_type_v != p.kv_type) appendf(&s, " (V %s)", kv_type_name(p.kv_type_v));
  if (p.has_kv_type_index) appendf(&s, " (indexer keys %s)", kv_type_name(p.kv_type_index));
  appendf(&s, ", %d tokens per step, %d threads\n\n", p.n_ubatch, p.n_threads);

  appendf(&s, "  %-26s %12s  %s\n", "category", "bytes", "share / how");
  row("dense_weights", b.dense_weights, pct(b.dense_weights) + "  always resident");
  for (int c = 0; c < plan_class_count; ++c) {
    if (c == plan_class_routed || m.class_bytes[c] == 0) continue;
    appendf(&s, "    %-24s %12s  %10.3f M params\n", plan_class_name(c),
            format_bytes(m.class_bytes[c]).c_str(), static_cast<double>(m.class_params[c]) / 1e6);
  }
  if (b.expert_count > 0) {
    std::string note;
    if (b.expert_slots == 0) {
      note = pct(b.expert_weights_resident) + "  all " + std::to_string(b.expert_count) + " experts resident";
    } else {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %lld of %lld experts (%.1f%%) in slots of %s",
                    (long long)b.expert_slots, (long long)b.expert_count,
                    100.0 * static_cast<double>(b.expert_slots) / static_cast<double>(b.expert_count),
                    format_bytes(m.slot_bytes).c_str());
      note = pct(b.expert_weights_resident) + buf;
    }
    row("expert_weights_resident", b.expert_weights_resident, note);
    appendf(&s, "    %-24s %12s  %10.3f M params, %s per expert\n", "all routed experts",
            format_bytes(b.expert_weights_total).c_str(),
            static_cast<double>(m.class_params[plan_class_routed]) / 1e6,
            format_bytes(m.expert_bytes).c_str());
  }
  if (m.engram_tables > 0) {
    char buf[256];
    if (b.engram_tier == "ram")
      std::snprintf(buf, sizeof buf, "  tier ram: all %d tables, %lld rows of %llu B (FP8 + UE8M0)",
                    m.engram_tables, static_cast<long long>(m.engram_rows),
                    static_cast<unsigned long long>(m.engram_row_bytes));
    else
      std::snprintf(buf, sizeof buf,
                    "  tier ssd: row cache of %lld of %lld rows (%.3f%%) of %s tables; %d rows/token",
                    static_cast<long long>(b.engram_slots), static_cast<long long>(m.engram_rows),
                    100.0 * static_cast<double>(b.engram_slots) / static_cast<double>(m.engram_rows),
                    format_bytes(m.engram_table_bytes).c_str(), m.engram_tables * m.engram_cols);
    row("engram_tables", b.engram_tables, pct(b.engram_tables) + buf);
  }
  if (b.kv_pool_budget > 0)
    row("kv_cache", b.kv_cache,
        pct(b.kv_cache) + "  --kv-budget: a paged pool of " + format_bytes(b.kv_pool_budget) + " (" +
            format_bytes(b.kv_pool_default) + " at " + std::to_string(p.n_seq) + " x -c)");
  else
    row("kv_cache", b.kv_cache,
        pct(b.kv_cache) + "  per cache kind below, x " + std::to_string(p.n_seq) + " sequence(s)");
  for (const PlanKvLine& l : b.kv_lines) {
    char buf[64];
    if (l.bytes_per_token > 0)
      std::snprintf(buf, sizeof buf, "%.1f B/token", l.bytes_per_token);
    else
      std::snprintf(buf, sizeof buf, "fixed");
    appendf(&s, "    %-24s %12s  %s: %s [%s]\n", l.name.c_str(), format_bytes(l.bytes).c_str(), buf,
            l.what.c_str(), l.type.c_str());
  }
  if (b.kv_ram_tier > 0)
    row("kv_ram_tier", b.kv_ram_tier, pct(b.kv_ram_tier) + "  -cram: evicted prefix-cache KV blocks (serve)");
  if (b.kv_checkpoints > 0)
    row("kv_checkpoints", b.kv_checkpoints,
        pct(b.kv_checkpoints) + "  sliding-window rows of prefix-cache checkpoints, " +
            std::to_string(p.ctx_checkpoints) + " per sequence at most (--ctx-checkpoints)");
  if (b.kv_spill_queue > 0)
    row("kv_spill_queue", b.kv_spill_queue,
        pct(b.kv_spill_queue) + "  blocks queued for --prefix-cache-dir's writer, at most");
  if (b.kv_ssd)
    appendf(&s, "    %-24s %12s  on SSD: one file of %s per block%s\n", "prefix_cache_dir",
            b.kv_ssd_budget ? format_bytes(b.kv_ssd_budget).c_str() : "no limit",
            format_bytes(b.kv_ssd_file).c_str(),
            b.kv_ssd_budget ? " (--prefix-cache-dir-size; least recently used deleted past it)" : "");
  if (!b.kv_spill_note.empty())
    appendf(&s, "    %-24s %12s  %s\n", "kv spill", "none", b.kv_spill_note.c_str());
  row("scratch", b.scratch,
      pct(b.scratch) + "  forward buffers at " + std::to_string(p.n_ubatch) + " tokens/step");
  row("io_buffers", b.io_buffers,
      pct(b.io_buffers) +
          (b.expert_slots == 0 && !b.io_buffers ? "  none (no budget)"
           : p.io_backend == IoBackend::io_backend_uring
               ? "  io_uring ring for " + std::to_string(p.io_depth) +
                     " reads + tables (reads land in the slots)"
           : p.io_backend == IoBackend::io_backend_sync
               ? std::string("  none: sync reads by the compute thread (into the slots)")
               : "  " + std::to_string(p.io_threads) + " I/O threads (reads land in the slots)"));
  row("runtime", b.runtime, pct(b.runtime) + "  code, tokenizer, threads");
  row("total", b.total, "");
  if (p.ram > 0) {
    appendf(&s, "\nRAM %s (safety margin %s):\n", format_bytes(p.ram).c_str(),
            format_bytes(b.margin).c_str());
    if (!b.fits) {
      appendf(&s, "  DOES NOT FIT: %s\n", b.problem.c_str());
    } else if (p.expert_budget > 0) {
      appendf(&s, "  fits with --expert-budget %s (headroom %s)\n", format_bytes(p.expert_budget).c_str(),
              format_bytes(p.ram > b.total ? p.ram - b.total : 0).c_str());
    } else if (b.recommended_budget == 0) {
      appendf(&s, "  everything fits; no --expert-budget needed (headroom %s)\n",
              format_bytes(p.ram > b.total ? p.ram - b.total : 0).c_str());
    } else {
      appendf(&s, "  recommended: --expert-budget %lluK  (%s: %lld of %lld experts resident, %.1f%%)\n",
              (unsigned long long)(b.recommended_budget / 1024), format_bytes(b.recommended_budget).c_str(),
              (long long)b.expert_slots, (long long)b.expert_count,
              100.0 * static_cast<double>(b.expert_slots) / static_cast<double>(b.expert_count));
      appendf(&s, "  minimum budget (one layer's top-%d): %s\n", m.n_expert_used,
              format_bytes(b.expert_min).c_str());
    }
  }
  return s;
}

std::string plan_json(const PlanBill& b) {
  // Keys (bytes unless said): dense_weights, dense_weights_by_class{}, expert_weights_total,
  // expert_weights_resident, expert_slots, expert_slot_bytes, expert_count, expert_min_bytes,
  // kv_cache, kv_cache_lines[], scratch, io_buffers, runtime, total; asked for: kv_ram_tier,
  // kv_spill_queue (RAM), kv_ssd_file_bytes, kv_ssd_budget (0: no limit), kv_spill_note; V4.1: engram_tables
  // (bytes in RAM), engram_tier, engram_table_bytes, engram_row_bytes, engram_rows, engram_slots,
  // engram_io_buffers (part of io_buffers), engram_budget; with --ram: ram, margin,
  // recommended_expert_budget (0 = all fit), fits, problem.
  const PlanModel& m = b.model;
  nlohmann::json j;
  j["source"] = m.source;
  j["arch"] = m.arch;
  j["weights"] = m.types;
  j["n_ctx"] = b.opts.n_ctx;
  j["batch"] = b.opts.n_seq;
  j["tokens_per_step"] = b.opts.n_ubatch;
  j["kv_type"] = kv_type_name(b.opts.kv_type);
  j["kv_type_v"] = kv_type_name(b.opts.kv_type_v);
  j["dense_weights"] = b.dense_weights;
  for (int c = 0; c < plan_class_count; ++c)
    if (c != plan_class_routed) j["dense_weights_by_class"][plan_class_name(c)] = m.class_bytes[c];
  j["expert_weights_total"] = b.expert_weights_total;
  j["expert_weights_resident"] = b.expert_weights_resident;
  j["expert_slots"] = b.expert_slots;
  j["expert_slot_bytes"] = m.slot_bytes;
  j["expert_bytes"] = m.expert_bytes;
  j["expert_count"] = b.expert_count;
  j["expert_min_bytes"] = b.expert_min;
  j["kv_cache"] = b.kv_cache;
  if (b.kv_pool_budget > 0) j["kv_pool_budget"] = b.kv_pool_budget;
  if (b.kv_checkpoints > 0) j["kv_checkpoints"] = b.kv_checkpoints;
  j["kv_cache_lines"] = nlohmann::json::array();
  for (const PlanKvLine& l : b.kv_lines)
    j["kv_cache_lines"].push_back({{"name", l.name},
                                   {"what", l.what},
                                   {"type", l.type},
                                   {"bytes_per_token", l.bytes_per_token},
                                   {"bytes", l.bytes}});
  if (b.opts.cache_ram != 0 || b.opts.prefix_cache_dir) {
    j["kv_ram_tier"] = b.kv_ram_tier;
    j["kv_spill_queue"] = b.kv_spill_queue;
    if (b.kv_ssd) {
      j["kv_ssd_file_bytes"] = b.kv_ssd_file;
      j["kv_ssd_budget"] = b.kv_ssd_budget;
    }
    if (!b.kv_spill_note.empty()) j["kv_spill_note"] = b.kv_spill_note;
  }
  j["scratch"] = b.scratch;
  j["io_buffers"] = b.io_buffers;
  j["io_backend"] = io_backend_name(b.opts.io_backend);
  j["runtime"] = b.runtime;
  if (m.engram_tables > 0) {
    j["engram_tables"] = b.engram_tables;
    j["engram_tier"] = b.engram_tier;
    j["engram_table_bytes"] = m.engram_table_bytes;
    j["engram_row_bytes"] = m.engram_row_bytes;
    j["engram_rows"] = m.engram_rows;
    j["engram_slots"] = b.engram_slots;
    j["engram_io_buffers"] = b.engram_io;
    if (b.opts.engram_budget > 0) j["engram_budget"] = b.opts.engram_budget;
  }
  j["total"] = b.total;
  if (b.opts.expert_budget > 0) j["expert_budget"] = b.opts.expert_budget;
  if (b.opts.ram > 0) {
    j["ram"] = b.opts.ram;
    j["margin"] = b.margin;
    j["recommended_expert_budget"] = b.recommended_budget;
    j["fits"] = b.fits;
    if (!b.fits) j["problem"] = b.problem;
  }
  return j.dump(2);
}

}  // namespace strata
