#include "kv_pool_flags.h"

#include <cstdio>

#include "base/units.h"

namespace strata::cli {

namespace {

const char* kCacheRamHelp =
    "-cram: bytes of evicted prefix-cache KV blocks kept in RAM (K/M/G; 0: none; default: as much as the KV "
    "pool)";
const char* kDirHelp =
    "directory of prefix-cache KV blocks on SSD: what RAM pushes out (written by a background thread), and "
    "every cached block at shutdown; read back after a restart";
const char* kDirSizeHelp =
    "bytes of --prefix-cache-dir's block files at most (K/M/G; the least recently used are deleted past it; "
    "default 0: no limit)";

}  // namespace

Status check_ctx_checkpoints(int n) {
  if (n < 0 || n > 4096) return err("--ctx-checkpoints must be in [0, 4096]");
  return {};
}

Result<uint64_t> parse_flag_size(const std::string& text, const char* flag, uint64_t absent) {
  if (text.empty()) return absent;
  auto b = parse_size(text);
  if (!b.ok()) return err("%s: %s", flag, b.message().c_str());
  return *b;
}

void KvPoolFlags::add(CLI::App& app) {
  app.add_option("--kv-budget", kv_budget,
                 "bytes of the paged KV pool (K/M/G; default: -np x -c x the KV bytes per position)");
  app.add_option("--block-size", block_size, "positions per KV block")->capture_default_str();
  app.add_flag("--no-prefix-cache", no_prefix_cache, "do not share the KV blocks of cached prompt prefixes");
  app.add_option("--cache-ram", cache_ram, kCacheRamHelp);
  app.add_option("--prefix-cache-dir", prefix_cache_dir, kDirHelp);
  app.add_option("--prefix-cache-dir-size", prefix_cache_dir_size, kDirSizeHelp);
  app.add_option("--ctx-checkpoints,--swa-checkpoints", ctx_checkpoints,
                 "-ctxcp: models with sliding-window layers: window-ring snapshots kept per slot for the "
                 "prefix cache (0: no prefix cache for them)")
      ->capture_default_str();
  app.add_flag(
      "--verbose", verbose,
      "log each prefix-cache decision: load from RAM / SSD or recompute, the predicted times of both "
      "and the measured one (bench: also the GPU tier's miss policy per layer)");
}

Status KvPoolFlags::apply(EngineOptions* eo) const {
  if (block_size < 1 || block_size > 4096) return err("--block-size must be in [1, 4096]");
  STRATA_ASSIGN(eo->kv_budget, parse_flag_size(kv_budget, "--kv-budget", 0));
  if (!kv_budget.empty() && eo->kv_budget == 0) return err("--kv-budget must be > 0");
  eo->block_size = block_size;
  eo->prefix_cache = !no_prefix_cache;
  STRATA_TRY(check_ctx_checkpoints(ctx_checkpoints));
  eo->ctx_checkpoints = ctx_checkpoints;
  STRATA_ASSIGN(const uint64_t ram, parse_flag_size(cache_ram, "--cache-ram", 0));
  eo->cache_ram = cache_ram.empty() ? -1 : static_cast<int64_t>(ram);
  eo->prefix_cache_dir = prefix_cache_dir;
  eo->kv_verbose = verbose;
  STRATA_ASSIGN(eo->prefix_cache_dir_size,
                parse_flag_size(prefix_cache_dir_size, "--prefix-cache-dir-size", 0));
  if (!prefix_cache_dir_size.empty() && prefix_cache_dir.empty())
    return err("--prefix-cache-dir-size needs --prefix-cache-dir");
  return {};
}

bool KvPoolFlags::any() const {
  return !kv_budget.empty() || !cache_ram.empty() || !prefix_cache_dir.empty() ||
         !prefix_cache_dir_size.empty() || block_size != 16 || no_prefix_cache || ctx_checkpoints != 8;
}

std::string kv_summary_text(const Engine& e, const std::string& no_pool, int64_t positions, int n_cached,
                            int n_prompt) {
  char b[512];
  const KvPool* p = e.kv_pool();
  if (!p) {
    std::snprintf(b, sizeof b, "strata: KV        contiguous, %s (%s: no pool, no prefix cache)\n",
                  format_bytes(e.kv_bytes()).c_str(), no_pool.c_str());
    return b;
  }
  const KvPoolStats k = p->stats();
  std::string per;
  for (const KvPartBytes& part : k.parts) {
    std::snprintf(b, sizeof b, "%s%s %s %llu B", per.empty() ? "" : ", ", part.name.c_str(),
                  part.type.c_str(), static_cast<unsigned long long>(part.bytes_per_token));
    per += b;
  }
  std::string s;
  std::snprintf(
      b, sizeof b,
      "strata: KV        paged: %d of %d blocks used (%d positions, %s each; %lld cached at exit), %s "
      "budget\n",
      p->blocks_for(positions), p->n_blocks(), p->block_size(), format_bytes(p->block_bytes()).c_str(),
      static_cast<long long>(k.blocks.cached), format_bytes(p->bytes()).c_str());
  s += b;
  std::snprintf(b, sizeof b, "strata: KV        %.0f B per token (%s)\n", k.bytes_per_token, per.c_str());
  s += b;
  if (!k.prefix_cache)
    return s + "strata: prefix    cache off (--no-prefix-cache, or sliding-window layers)\n";
  const KvSpillStats& sp = k.spill;
  std::snprintf(
      b, sizeof b,
      "strata: prefix    %d of %d prompt tokens from cache, %d prefilled (blocks found: pool %llu, RAM "
      "%llu, SSD %llu; loads %.2f ms)\n",
      n_cached, n_prompt, n_prompt - n_cached, static_cast<unsigned long long>(k.pool_hits),
      static_cast<unsigned long long>(sp.ram_hits), static_cast<unsigned long long>(sp.disk_hits),
      sp.measured_load_s * 1e3);
  s += b;
  if (const KvDiskTier* d = p->disk_tier()) {
    std::snprintf(b, sizeof b,
                  "strata: prefix    SSD tier %s: %lld blocks (the cached ones are written at exit)\n",
                  d->dir().c_str(), static_cast<long long>(sp.disk_blocks));
    s += b;
  }
  return s;
}

void KvSpillPlanFlags::add(CLI::App& app) {
  app.add_option(
      "--cache-ram", cache_ram,
      "-cram: price serve's RAM tier of evicted prefix-cache KV blocks (K/M/G; default: none as run "
      "has, or with --prefix-cache-dir serve's default, the KV pool's bytes)");
  app.add_option(
      "--prefix-cache-dir", prefix_cache_dir,
      "price serve's SSD tier (its write queue in RAM, its files on SSD; the directory is not read)");
  app.add_option("--prefix-cache-dir-size", prefix_cache_dir_size, kDirSizeHelp);
  app.add_option("--kv-budget", kv_budget,
                 "price serve's paged KV pool of this many bytes (K/M/G; default -c x --batch positions)");
  app.add_option("--ctx-checkpoints", ctx_checkpoints,
                 "-ctxcp: sliding-window models: price serve's prefix-cache checkpoints per sequence")
      ->capture_default_str();
}

}  // namespace strata::cli
