#include "expert_flags.h"

#include <filesystem>

#include <cstdio>

#include "base/units.h"
#include "memory/experts/expert_store.h"
#include "memory/experts/heatmap.h"
#include "obs/proc_mem.h"

namespace strata::cli {

void ExpertFlags::add(CLI::App& app) {
  app.add_option("--expert-budget", budget, "RAM for routed experts (K/M/G; absent: all resident)");
  app.add_option("--expert-policy", policy, "eviction policy")
      ->check(CLI::IsMember({"lru", "lfu", "static", "adaptive"}))
      ->capture_default_str();
  app.add_option("--prefetch", prefetch, "router look-ahead prefetch")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--expert-profile", profile, "activation profile CSV (static hot set; saved at exit)");
  app.add_option("--io-backend", io_backend,
                 "expert reads: io_uring, a pread thread pool, auto, or sync (the compute thread reads its "
                 "misses itself, one blocking pread at a time: the naive baseline)")
      ->check(CLI::IsMember({"auto", "uring", "threads", "sync"}))
      ->capture_default_str();
  app.add_option("--io-threads", io_threads, "expert read threads (threads backend)")->capture_default_str();
  app.add_option("--io-depth", io_depth, "io_uring reads in flight; max prefetches queued")
      ->capture_default_str();
  app.add_option("--io-chunk", io_chunk,
                 "split expert reads into pieces of SIZE read in parallel (K/M; 0: off)")
      ->capture_default_str();
  app.add_option("--expert-file", expert_file, "read experts from this `strata pack` bundle of the model");
  app.add_option("--predict", predict, "what predicts the next layers' experts (prefetch on)")
      ->check(CLI::IsMember({"lookahead", "history", "union"}))
      ->capture_default_str();
  app.add_option("--lookahead", lookahead, "layers the router look-ahead predicts")->capture_default_str();
  app.add_option("--lookahead-top", lookahead_top, "prefetch only the look-ahead's best M of top-k (0: all)")
      ->capture_default_str();
  app.add_flag("--buffered-io", buffered_io,
               "read experts through the page cache (no O_DIRECT; for comparison)");
  app.add_option("--stats-out", stats_out, "expert statistics (.json, or .csv counts)");
  app.add_option("--heatmap", heatmap, "SVG heatmap of per-(layer, expert) activations");
  app.add_option("--routing-trace-out", trace_out, "routing trace, one JSON line per (token, layer)");
}

Status ExpertFlags::apply(LoadOptions* lo) const {
  ExpertStoreOptions& o = lo->experts;
  if (!budget.empty()) {
    auto b = parse_size(budget);
    if (!b.ok()) return err("--expert-budget: %s", b.message().c_str());
    if (*b == 0) return err("--expert-budget must be > 0 (omit it to keep every expert resident)");
    o.budget_bytes = *b;
  }
  if (io_threads < 1 || io_threads > 256) return err("--io-threads %d must be in 1..256", io_threads);
  if (io_depth < 1 || io_depth > 65536) return err("--io-depth %d must be in 1..65536", io_depth);
  if (lookahead < 0 || lookahead > 64) return err("--lookahead %d must be in 0..64", lookahead);
  o.policy = policy;
  o.prefetch = prefetch == "on";
  if (lookahead_top < 0) return err("--lookahead-top %d must be >= 0", lookahead_top);
  o.lookahead = lookahead;
  o.lookahead_top = lookahead_top;
  o.io_threads = io_threads;
  o.io_depth = io_depth;
  o.direct_io = !buffered_io;
  o.io_backend = io_backend;
  o.predict = predict;
  o.expert_file = expert_file;
  auto chunk = parse_size(io_chunk);
  if (!chunk.ok()) return err("--io-chunk: %s", chunk.message().c_str());
  o.io_chunk = static_cast<size_t>(*chunk);
  if (!expert_file.empty() && budget.empty())
    return err("--expert-file needs --expert-budget (without a budget every expert is served from the GGUF)");
  o.profile_path = profile;
  o.routing_trace_path = trace_out;
  // A store also runs without a budget when its statistics or traces are wanted.
  lo->expert_stats = !stats_out.empty() || !heatmap.empty() || !trace_out.empty() || !profile.empty();
  return {};
}

Status ExpertFlags::finish(const Model& m, bool quiet) const {
  const ExpertStore* st = m.expert_store();
  if (!st) return {};
  if (!stats_out.empty()) STRATA_TRY(st->write_stats(stats_out));
  if (!profile.empty()) STRATA_TRY(st->save_profile(profile));
  const ExpertStats s = st->stats();
  if (!heatmap.empty()) {
    std::vector<uint64_t> flat(static_cast<size_t>(s.n_layer()) * s.n_expert());
    for (int l = 0; l < s.n_layer(); ++l)
      for (int e = 0; e < s.n_expert(); ++e)
        flat[static_cast<size_t>(l) * s.n_expert() + e] = s.activation(l, e);
    HeatmapOptions ho;
    ho.title = "expert activations: " + m.file().path();
    STRATA_ASSIGN(std::string svg, heatmap_svg_flat(flat, s.n_layer(), s.n_expert(), ho));
    STRATA_TRY(write_text_file(heatmap, svg));
  }
  if (quiet) return {};
  const ExpertStoreInfo& i = st->info();
  const ExpertTotals& t = s.totals();
  if (i.resident) {
    std::fprintf(stderr, "strata: experts   all resident (%s routed), %lld tokens\n",
                 format_bytes(i.routed_bytes).c_str(), static_cast<long long>(t.tokens));
    return {};
  }
  std::fprintf(stderr,
               "strata: experts   %s policy, %d slots x %s = %s of %s routed (%s, %s, depth %d, from %s), "
               "prefetch %s; dense %s; peak RSS %s\n",
               i.policy.c_str(), i.n_slots, format_bytes(i.slot_bytes).c_str(),
               format_bytes(i.tier_bytes).c_str(), format_bytes(i.routed_bytes).c_str(),
               i.direct_io ? "O_DIRECT" : "buffered", i.io_backend.c_str(), i.io_depth,
               !i.expert_file.empty()                          ? i.expert_file.c_str()
               : std::filesystem::is_directory(i.backing_path) ? "the checkpoint's shards"
                                                               : "the GGUF",
               i.prefetch ? "on" : "off", format_bytes(i.dense_bytes).c_str(),
               format_bytes(peak_rss_bytes()).c_str());
  if (i.warm_experts > 0)
    std::fprintf(stderr,
                 "strata: experts   warm start: %d hottest experts of '%s' (%s) read in %.2f s at load\n",
                 i.warm_experts, profile.c_str(), format_bytes(i.warm_bytes).c_str(), i.warm_seconds);
  std::fprintf(
      stderr,
      "strata: experts   hit rate %.1f%% (%llu hits, %llu late, %llu misses), read %s in %llu reads, "
      "stall %.2f ms/token, prefetch precision %.1f%% recall %.1f%% wasted %s\n",
      100.0 * t.hit_rate(), static_cast<unsigned long long>(t.hits), static_cast<unsigned long long>(t.late),
      static_cast<unsigned long long>(t.misses), format_bytes(t.bytes_read).c_str(),
      static_cast<unsigned long long>(t.reads), t.tokens ? t.stall_s * 1e3 / t.tokens : 0.0,
      100.0 * t.prefetch_precision(), 100.0 * t.prefetch_recall(),
      format_bytes(t.prefetch_wasted_bytes).c_str());
  return {};
}

}  // namespace strata::cli
