// strata quantize: convert a GGUF model to llama-quantize's file types with its type rules and
// flags (src/quantize/). `strata quantize [options] IN OUT TYPE`; with --dry-run OUT may be left out.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/units.h"
#include "command.h"
#include "format/gguf.h"
#include "quantize/quantize_gguf.h"

namespace {

using strata::GgmlType;

double mib(uint64_t b) {
  return static_cast<double>(b) / (1024.0 * 1024.0);
}

std::string shape_of(const strata::TensorView& t) {
  std::string s;
  for (int d = 0; d < std::max(t.n_dims, 1); ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return "[" + s + "]";
}

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata quantize: error: %s\n", msg.c_str());
  return code;
}

int cmd_quantize(int argc, char** argv) {
  std::vector<std::string> pos, tensor_types;
  std::string output_type, embd_type;
  strata::QuantizeOptions opts;
  bool dry_run = false;
  CLI::App app{"Quantize a GGUF model (llama-quantize's types, rules and flags)", "strata quantize"};
  app.add_option("args", pos, "IN OUT TYPE (TYPE: " + strata::quant_ftype_names() + ")")->required();
  app.add_flag("--pure", opts.policy.pure, "every convertible tensor in TYPE (no output / MoE mix rules)");
  app.add_option("--tensor-type", tensor_types,
                 "REGEX=TYPE: tensors whose name matches get TYPE (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--output-tensor-type", output_type, "type of output.weight");
  app.add_option("--token-embedding-type", embd_type, "type of token_embd.weight");
  app.add_flag("--allow-requantize", opts.allow_requantize,
               "convert already-quantized tensors (loses quality)");
  app.add_flag("--dry-run", dry_run, "print each tensor's type and the sizes; write nothing");
  app.add_option("-t,--threads", opts.n_threads, "threads (default all cores)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), 2);
  }
  if (pos.size() != 3 && !(dry_run && pos.size() == 2))
    return fail("expected IN OUT TYPE (or IN TYPE with --dry-run)", 2);
  const std::string in_path = pos[0], out_path = pos.size() == 3 ? pos[1] : "", tname = pos.back();
  opts.policy.ftype = strata::quant_ftype(tname);
  if (!opts.policy.ftype)
    return fail("unknown type '" + tname + "' (strata writes " + strata::quant_ftype_names() + ")", 2);
  for (const std::string& spec : tensor_types) {
    auto r = strata::parse_tensor_type_rule(spec);
    if (!r.ok()) return fail(r.message(), 2);
    opts.policy.tensor_types.push_back(std::move(r).value());
  }
  auto parse_type = [](const std::string& flag, const std::string& v, std::optional<GgmlType>* out) {
    if (v.empty()) return true;
    GgmlType t;
    if (!strata::type_from_name(v, &t)) {
      std::fprintf(stderr, "strata quantize: error: %s: unknown type '%s'\n", flag.c_str(), v.c_str());
      return false;
    }
    *out = t;
    return true;
  };
  if (!parse_type("--output-tensor-type", output_type, &opts.policy.output_type) ||
      !parse_type("--token-embedding-type", embd_type, &opts.policy.token_embd_type))
    return 2;
  if (!out_path.empty() && out_path == in_path) return fail("OUT must differ from IN", 2);

  auto in = strata::GgufFile::open(in_path);
  if (!in.ok()) return fail(in.message());
  auto plan = strata::plan_quantize(**in, opts);
  if (!plan.ok()) return fail(plan.message());
  const double n_el = static_cast<double>(plan->n_elements);
  if (dry_run) {
    size_t i = 0;
    for (const strata::TensorPlan& tp : plan->tensors) {
      std::printf("[%4zu/%4zu] %-40s %-22s %6s -> %-6s %9.3f MiB -> %9.3f MiB%s\n", ++i, plan->tensors.size(),
                  tp.src->name.c_str(), shape_of(*tp.src).c_str(), strata::type_name(tp.src->type),
                  strata::type_name(tp.choice.type), mib(tp.src->nbytes), mib(tp.out_bytes),
                  tp.choice.fell_back ? "  (fallback: row not a multiple of the block)" : "");
    }
  } else {
    const bool tty = isatty(STDERR_FILENO);
    size_t last_tenth = 0;
    auto progress = [&](size_t done, size_t total, const strata::TensorPlan& tp) {
      if (tty) {
        std::fprintf(stderr, "\rstrata quantize: [%zu/%zu] %-40s", done, total, tp.src->name.c_str());
        if (done == total) std::fputc('\n', stderr);
      } else if (done * 10 / total > last_tenth || done == total) {
        last_tenth = done * 10 / total;
        std::fprintf(stderr, "strata quantize: %zu/%zu tensors\n", done, total);
      }
    };
    if (auto st = strata::write_quantized(**in, *plan, opts, out_path, progress); !st.ok())
      return fail(st.message());
  }
  std::printf("model size: %.2f MiB (%.2f bpw) -> %s: %.2f MiB (%.2f bpw)%s\n", mib(plan->in_bytes),
              plan->in_bytes * 8.0 / n_el, opts.policy.ftype->name, mib(plan->out_bytes),
              plan->out_bytes * 8.0 / n_el, dry_run ? " (dry run, nothing written)" : "");
  if (plan->n_fallback > 0)
    std::printf("%d of %zu tensors fell back to another type (rows not a multiple of the block)\n",
                plan->n_fallback, plan->tensors.size());
  return 0;
}

const strata::cli::Registrar reg{
    "quantize", "convert a GGUF model to Q8_0 / Q4_0 / MXFP4_MOE / ... (llama-quantize)", &cmd_quantize};

}  // namespace
