// strata plan: the memory bill before running (plan/planner.h) — dense weights by class, routed
// experts, KV per cache kind x context x batch, scratch, I/O buffers — and for a RAM size the
// expert budget to pass to run/bench (--expert-budget).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/units.h"
#include "cli_args.h"
#include "command.h"
#include "device_flags.h"
#include "format/gguf.h"
#include "kv_pool_flags.h"
#include "memory/io/io_engine.h"
#include "model/arch.h"
#include "plan/planner.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata plan: error: %s\n", msg.c_str());
  return code;
}

}  // namespace

static int cmd_plan(int argc, char** argv) {
  std::string model, config, ram = "0", ctx = "0", expert_type, weight_type = "q8_0", margin = "0",
                             budget = "0", engram_budget = "0", io_backend = "auto", gpu_budget;
  int batch = 1, ubatch = 512, io_threads = 4, io_depth = 32, threads = 0;
  bool json = false;
  int o_block_size = 16;
  CLI::App app{"The memory bill of a model and the expert budget for a RAM size", "strata plan"};
  auto* m_opt = app.add_option("-m,--model", model,
                               "GGUF model (exact tensor bytes) or checkpoint directory (its experts exact)");
  auto* c_opt =
      app.add_option("--config", config, "Hugging Face config.json (bytes estimated at assumed types)");
  m_opt->excludes(c_opt);
  app.add_option("--expert-budget", budget, "price this expert budget (as run/bench --expert-budget)");
  app.add_option("--engram-budget", engram_budget,
                 "V4.1: RAM for the Engram tables (as run/logits --engram-budget; absent: tables resident)");
  app.add_option("--ram", ram, "RAM to fit in (K/M/G suffix); gives the recommended --expert-budget");
  app.add_option("-c,--ctx-size", ctx, "context length per sequence (K suffix ok; 0: model's, at most 4096)");
  app.add_option("--batch", batch, "sequences (each with its own KV cache)")->capture_default_str();
  app.add_option("-b,--batch-size", ubatch, "tokens per forward step (as run -b)")->capture_default_str();
  strata::cli::KvTypeFlags kf;  // as run / serve (default f16); planned types are priced too
  strata::cli::add_kv_type_flags(app, kf, "f16");
  strata::cli::KvSpillPlanFlags sf;  // serve's pool flags: spill tiers, --kv-budget, --ctx-checkpoints
  sf.add(app);
  app.add_option("--block-size", o_block_size, "positions per KV block (as serve)")->capture_default_str();
  app.add_option("--expert-type", expert_type,
                 "--config: routed expert type (default mxfp4 for deepseek-v4, else q8_0)");
  app.add_option("--weight-type", weight_type, "--config: type of the other matrices")->capture_default_str();
  app.add_option(
         "--io-backend", io_backend,
         "expert-store I/O: auto (io_uring when this machine can set one up) | uring | threads | sync")
      ->capture_default_str();
  app.add_option("--io-depth", io_depth, "io_uring reads in flight (as run --io-depth)")
      ->capture_default_str();
  app.add_option("--io-threads", io_threads, "threads backend: reader threads")->capture_default_str();
  app.add_option("-t,--threads", threads, "compute threads (0: all cores)")->capture_default_str();
  app.add_option("--margin", margin, "safety margin kept free of the RAM (0: 32 MiB + 2%)");
  app.add_option("--gpu-budget", gpu_budget,
                 "-m: --device's placement on a GPU of this many bytes (dense weights + KV must fit; routed "
                 "experts fill the rest, as run places them)");
  strata::cli::DeviceFlags pf;  // --n-cpu-moe, -ot, --miss-policy as run takes them (-ot's device: Vulkan0)
  pf.device = "Vulkan0";
  pf.add_expert_flags(app);
  std::string profile;
  app.add_option("--expert-profile", profile, "-m --gpu-budget: the activation profile ranking the experts");
  app.add_flag("--json", json, "print JSON");
  if (auto rc = strata::cli::parse_args(app, argc, argv, "plan")) return *rc;
  if (model.empty() == config.empty()) return fail("give one of -m MODEL or --config config.json", 2);
  strata::PlanOptions o;
  auto r = strata::parse_size(ram);
  if (!r.ok()) return fail("--ram: " + r.message(), 2);
  o.ram = *r;
  auto eb = strata::parse_size(budget);
  if (!eb.ok()) return fail("--expert-budget: " + eb.message(), 2);
  o.expert_budget = *eb;
  auto gb = strata::parse_size(engram_budget);
  if (!gb.ok()) return fail("--engram-budget: " + gb.message(), 2);
  o.engram_budget = *gb;
  auto c = strata::parse_size(ctx);
  if (!c.ok()) return fail("-c: " + c.message(), 2);
  if (*c > (uint64_t{1} << 30)) return fail("-c " + ctx + " is too large", 2);
  o.n_ctx = static_cast<int64_t>(*c);
  auto mg = strata::parse_size(margin);
  if (!mg.ok()) return fail("--margin: " + mg.message(), 2);
  o.margin = *mg;
  if (batch < 1) return fail("--batch must be >= 1", 2);
  if (ubatch < 1) return fail("-b must be >= 1", 2);
  if (io_threads < 1) return fail("--io-threads must be >= 1", 2);
  if (io_depth < 1) return fail("--io-depth must be >= 1", 2);
  strata::IoBackend backend;
  if (!strata::io_backend_from_name(io_backend, &backend))
    return fail("--io-backend '" + io_backend + "' must be auto, uring, threads or sync", 2);
  o.io_backend = backend;
  o.io_depth = io_depth;
  o.n_seq = batch;
  o.n_ubatch = ubatch;
  o.io_threads = io_threads;
  o.n_threads = threads;
  // -ctk native / --kv-type native: each part at its reference implementation's storage type
  // where known (V4.1's FP8 window, NVFP4 compressed KV, MXFP4 index keys), -ctk's elsewhere
  o.kv_native = kf.k == "native" || kf.both == "native";
  if (kf.k == "native") kf.k = "f32";
  if (kf.both == "native") kf.both = "f32";
  auto kv = strata::cli::kv_types(kf, "f16", true);
  if (!kv.ok()) return fail(kv.message(), 2);
  o.kv_type = kv->k;
  o.kv_type_v = kv->v;
  o.kv_type_default = kv->is_default;
  o.has_kv_type_index = kv->has_index;
  o.kv_type_index = kv->index;
  if (o_block_size < 1 || o_block_size > 4096) return fail("--block-size must be in [1, 4096]", 2);
  o.block_size = o_block_size;
  {
    auto kb = strata::cli::parse_flag_size(sf.kv_budget, "--kv-budget", 0);
    if (!kb.ok()) return fail(kb.message(), 2);
    o.kv_budget = *kb;
  }
  if (auto st = strata::cli::check_ctx_checkpoints(sf.ctx_checkpoints); !st.ok())
    return fail(st.message(), 2);
  o.ctx_checkpoints = sf.ctx_checkpoints;
  if (!sf.cache_ram.empty()) {
    auto cr = strata::cli::parse_flag_size(sf.cache_ram, "--cache-ram", 0);
    if (!cr.ok()) return fail(cr.message(), 2);
    o.cache_ram = static_cast<int64_t>(*cr);
  }
  o.prefix_cache_dir = !sf.prefix_cache_dir.empty();
  if (sf.cache_ram.empty() && o.prefix_cache_dir) o.cache_ram = -1;  // serve's default: the pool's bytes
  auto ds = strata::cli::parse_flag_size(sf.prefix_cache_dir_size, "--prefix-cache-dir-size", 0);
  if (!ds.ok()) return fail(ds.message(), 2);
  if (!sf.prefix_cache_dir_size.empty() && !o.prefix_cache_dir)
    return fail("--prefix-cache-dir-size needs --prefix-cache-dir", 2);
  o.prefix_cache_dir_size = *ds;

  strata::Result<strata::PlanModel> pm = strata::err("no model");
  std::unique_ptr<strata::GgufFile> file;
  if (!model.empty() && strata::is_checkpoint_dir(model)) {
    pm = strata::plan_model_from_checkpoint_dir(model);
  } else if (!model.empty()) {
    auto f = strata::GgufFile::open(model);
    if (!f.ok()) return fail(f.message());
    file = std::move(f).value();
    pm = strata::plan_model_from_gguf(*file);
  } else {
    strata::PlanTypes ty;
    if (!expert_type.empty() && !strata::type_from_name(expert_type, &ty.expert))
      return fail("--expert-type '" + expert_type + "' is not a ggml type name", 2);
    if (!strata::type_from_name(weight_type, &ty.dense))
      return fail("--weight-type '" + weight_type + "' is not a ggml type name", 2);
    pm = strata::plan_model_from_hf_config(config, ty);
  }
  if (!pm.ok()) return fail(pm.message());
  auto bill = strata::plan_make(*pm, o);
  if (!bill.ok()) return fail(bill.message(), 2);
  // --gpu-budget: the device line (what run --device places on a GPU: dense weights, KV, and the
  // routed experts in what is left, as Model::place_experts allocates them).
  std::string gpu_line, gpu_problem;
  if (auto mp = strata::parse_miss_policy(pf.miss_policy); !mp.ok()) return fail(mp.message(), 2);
  if (!gpu_budget.empty()) {
    auto gb = strata::parse_size(gpu_budget);
    if (!gb.ok()) return fail("--gpu-budget: " + gb.message(), 2);
    if (model.empty()) return fail("--gpu-budget needs -m MODEL (the placement of its tensors)", 2);
    if (pf.n_cpu_moe < 0) return fail("--n-cpu-moe must be >= 0", 2);
    pf.gpu_budget = gpu_budget;
    auto w = strata::cli::gpu_placement(model, pf, bill->kv_cache, profile);
    if (!w.ok()) return fail(w.message());
    const uint64_t need = w->dense + bill->kv_cache;
    gpu_line = "gpu: dense weights " + strata::format_bytes(w->dense) + " + KV " +
               strata::format_bytes(bill->kv_cache) + " = " + strata::format_bytes(need) +
               " of --gpu-budget " + strata::format_bytes(*gb) + (need <= *gb ? ": fits" : ": does not fit");
    if (!w->experts_summary.empty())
      gpu_line += "; routed experts " + strata::format_bytes(w->experts) + ": " + w->experts_summary;
    gpu_line += " (the ops' activations are not counted)\n";
    if (need > *gb)
      gpu_problem = "the GPU placement needs " + strata::format_bytes(need) + ", over --gpu-budget " +
                    strata::format_bytes(*gb);
  }
  if (json)
    std::printf("%s\n", strata::plan_json(*bill).c_str());
  else
    std::fputs((strata::plan_text(*bill) + gpu_line).c_str(), stdout);
  if (!gpu_problem.empty()) return fail(gpu_problem);
  if (!json) std::fputs(strata::cli::kv_types_note(pm->kv.kv, *kv, pm->kv.arch.c_str()).c_str(), stdout);
  for (strata::KvType t : {o.kv_type, o.kv_type_v})
    if (!strata::kv_type_supported(t) && !json)
      std::printf("note: KV type %s is planned, not yet supported by strata run\n", strata::kv_type_name(t));
  if (!bill->fits) return fail(bill->problem);
  return 0;
}

static const strata::cli::Registrar reg{
    "plan", "memory bill and expert budget for a RAM size (-m or --config)", &cmd_plan};
