// strata pack: write an expert bundle (memory/pack.h) — each routed expert's gate+up+down
// contiguous and 4 KiB aligned, co-activated experts of a layer adjacent when a routing trace is
// given — for the tiered expert store's O_DIRECT reads.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "base/units.h"
#include "command.h"
#include "format/gguf.h"
#include "memory/experts/pack.h"

static int cmd_pack(int argc, char** argv) {
  std::string model, out, trace_path;
  CLI::App app{"Write an expert bundle: per-expert contiguous, 4 KiB aligned blobs plus an index",
               "strata pack"};
  app.add_option("model", model, "GGUF model")->required();
  app.add_option("-o,--output", out, "bundle to write")->required();
  app.add_option("--trace", trace_path, "routing trace (JSONL): order each layer's experts by co-activation");
  auto fail = [](const std::string& m, int code) {
    std::fprintf(stderr, "strata pack: error: %s\n", m.c_str());
    return code;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), 2);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto f = strata::GgufFile::open(model);
  if (!f.ok()) return fail(f.message(), 1);
  strata::PackOptions opts;
  strata::Result<strata::RoutingTrace> trace = strata::err("unused");
  if (!trace_path.empty()) {
    trace = strata::routing_trace_read(trace_path);
    if (!trace.ok()) return fail(trace.message(), 1);
    opts.trace = &*trace;
  }
  auto ix = strata::pack_write(**f, out, opts);
  if (!ix.ok()) return fail(ix.message(), 1);
  uint64_t payload = 0;
  for (const auto& e : ix->experts) payload += e.size;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "wrote %s: %zu experts (%d layers x %d), %s of expert weights in %s (%.1f%% padding), order: %s, %.1f "
      "s\n",
      out.c_str(), ix->experts.size(), ix->n_layers, ix->n_experts, strata::format_bytes(payload).c_str(),
      strata::format_bytes(ix->file_size).c_str(),
      ix->file_size ? 100.0 * static_cast<double>(ix->file_size - ix->data_offset - payload) /
                          static_cast<double>(ix->file_size)
                    : 0.0,
      trace_path.empty() ? "by index" : "by co-activation", s);
  return 0;
}

static const strata::cli::Registrar reg{
    "pack", "write an expert bundle (4 KiB-aligned per-expert blobs + index)", &cmd_pack};
