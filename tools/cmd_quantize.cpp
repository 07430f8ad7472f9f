// strata quantize: convert a GGUF model to llama-quantize's file types with its type rules and
// flags (src/quantize/). `strata quantize [options] IN OUT TYPE`; with --dry-run OUT may be left out.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/units.h"
#include "command.h"
#include "format/gguf.h"
#include "quantize/quantize_gguf.h"
#include "runtime/auto_promote.h"
#include "runtime/kl_divergence.h"
#include "runtime/perplexity.h"

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

// --gate "kld=X,routing=Y" (either part may be left out): mean KLD at most X, every MoE layer's
// routing consistency at least Y. Negative: no gate on that number.
struct Gate {
  double kld = -1, routing = -1;
};

strata::Result<Gate> parse_gate(const std::string& spec) {
  Gate g;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string part = spec.substr(pos, end - pos);
    const size_t eq = part.find('=');
    const std::string key = part.substr(0, eq);
    char* stop = nullptr;
    const double v = eq == std::string::npos ? 0 : std::strtod(part.c_str() + eq + 1, &stop);
    if (eq == std::string::npos || eq + 1 == part.size() || *stop != '\0' || !(v >= 0))
      return strata::err("--gate '%s': expected kld=X,routing=Y with numbers >= 0 (at '%s')", spec.c_str(),
                         part.c_str());
    if (key == "kld") {
      g.kld = v;
    } else if (key == "routing") {
      if (v > 1) return strata::err("--gate '%s': routing=%g is above 1", spec.c_str(), v);
      g.routing = v;
    } else {
      return strata::err("--gate '%s': unknown measure '%s' (kld, routing)", spec.c_str(), key.c_str());
    }
    pos = end + 1;
  }
  return g;
}

// Measures OUT.gating against IN (strata kld); renames it to OUT when the gate passes, else
// removes it and fails naming the number.
int run_gate(const std::string& in_path, const std::string& out_path, const std::string& text,
             const Gate& gate, int n_ctx, int n_threads) {
  const std::string tmp = out_path + ".gating";
  strata::KldOptions ko;
  ko.n_ctx = n_ctx;
  auto r = strata::kl_divergence_of_files(tmp, in_path, text, ko, n_threads);
  std::error_code ec;
  if (!r.ok()) {
    std::filesystem::remove(tmp, ec);
    return fail("--gate: " + r.message() + " (" + out_path + " not written)");
  }
  std::string routing;
  for (size_t l = 0; l < r->routing.size(); ++l) {
    if (r->routing[l] >= 0)
      routing += " " + std::to_string(l) + ":" + std::to_string(r->routing[l]).substr(0, 6);
  }
  std::printf("gate: mean KLD %.6f (P99 %.6f), top-1 %.4f, dPPL %+.4f, routing per layer%s\n", r->kld_mean,
              r->kld_p99, r->top1_agree, r->dppl(), routing.empty() ? " n/a" : routing.c_str());
  std::fflush(stdout);
  if (auto st = strata::kld_gate(*r, gate.kld, gate.routing); !st.ok()) {
    std::filesystem::remove(tmp, ec);
    return fail(st.message() + " (" + out_path + " not written)");
  }
  std::filesystem::rename(tmp, out_path, ec);
  if (ec) return fail("cannot rename " + tmp + " to " + out_path + ": " + ec.message());
  std::printf("gate passed: wrote %s\n", out_path.c_str());
  return 0;
}

// --auto-promote (runtime/auto_promote.h): prints each measurement, the promotions and the policy;
// OUT is written only when the gate passes.
int run_auto_promote(const strata::GgufFile& in, const std::string& in_path, const std::string& out_path,
                     const std::string& text, const Gate& gate, int n_ctx,
                     const strata::QuantizeOptions& opts, strata::AutoPromoteOptions ap) {
  ap.gate_kld = gate.kld;
  ap.gate_routing = gate.routing;
  ap.kld.n_ctx = n_ctx;
  ap.n_threads = opts.n_threads;
  auto log = [](const std::string& line) {
    std::printf("auto-promote: %s\n", line.c_str());
    std::fflush(stdout);
  };
  auto r = strata::auto_promote(in, in_path, opts, text, ap, out_path, log);
  if (!r.ok()) return fail(r.message() + " (" + out_path + " not written)");
  // The size of the same model with every convertible tensor in the promotion type's file type.
  strata::QuantizeOptions all = opts;
  all.policy.class_rules.clear();
  all.policy.ftype = strata::quant_ftype(strata::type_name(ap.promote_type));
  std::string versus;
  if (all.policy.ftype) {
    if (auto p = strata::plan_quantize(in, all); p.ok())
      versus = " = " +
               std::to_string(100.0 * (1.0 - double(r->out_bytes) / double(p->out_bytes))).substr(0, 5) +
               "% smaller than all-" + all.policy.ftype->name + " (" +
               std::to_string(mib(p->out_bytes)).substr(0, 7) + " MiB)";
  }
  std::printf("auto-promote: %zu promoted; %.3f MiB (%.3f bpw)%s\n", r->promoted.size(), mib(r->out_bytes),
              r->out_bytes * 8.0 / double(r->n_elements), versus.c_str());
  std::printf("policy: %s\n", r->policy.empty() ? "(none: the requested mix passes)" : r->policy.c_str());
  std::printf("gate passed: wrote %s\n", out_path.c_str());
  return 0;
}

int cmd_quantize(int argc, char** argv) {
  std::vector<std::string> pos, tensor_types;
  std::string output_type, embd_type, gate_spec, gate_text, tensor_type_file, imatrix_path, policy_spec;
  std::string promote_type;
  int gate_ctx = 0;
  strata::QuantizeOptions opts;
  bool dry_run = false, auto_promote = false;
  CLI::App app{"Quantize a GGUF model (llama-quantize's types, rules and flags)", "strata quantize"};
  app.add_option("args", pos, "IN OUT TYPE (TYPE: " + strata::quant_ftype_names() + ")")->required();
  app.add_flag("--pure", opts.policy.pure, "every convertible tensor in TYPE (no output / MoE mix rules)");
  app.add_option("--tensor-type", tensor_types,
                 "REGEX=TYPE: tensors whose name matches get TYPE (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--tensor-type-file", tensor_type_file,
                 "file of REGEX=TYPE rules, one per line ('#' comments)");
  app.add_option(
      "--imatrix", imatrix_path,
      "importance matrix (GGUF, strata imatrix / llama-imatrix): Q4_0 / Q5_0 / Q4_K / Q5_K / Q6_K / "
      "MXFP4 tensors it covers are quantized minimising the importance-weighted error");
  app.add_option(
      "--policy", policy_spec,
      "rules by tensor class and layer on top of TYPE, e.g. router=f32,attn=q8_0,experts=mxfp4,"
      "layers[0,-1].experts=q8_0; presets fp4-experts, fp4-all (classes: router attn experts shexp "
      "ffn embd output)");
  app.add_option("--output-tensor-type", output_type, "type of output.weight");
  app.add_option("--token-embedding-type", embd_type, "type of token_embd.weight");
  app.add_flag("--allow-requantize", opts.allow_requantize,
               "convert already-quantized tensors (loses quality)");
  app.add_flag("--dry-run", dry_run, "print each tensor's type and the sizes; write nothing");
  app.add_option("-t,--threads", opts.n_threads, "threads (default all cores)");
  app.add_option("--gate", gate_spec,
                 "kld=X,routing=Y: after quantizing, measure against IN on -f TEXT (strata kld) and fail, "
                 "leaving no OUT, when the mean KLD exceeds X or a layer's routing consistency is below Y");
  app.add_flag(
      "--auto-promote", auto_promote,
      "with --gate: measure each layer's sensitivity (only it at TYPE, the rest promoted) and promote "
      "the most sensitive layers to --promote-type until the gate passes; prints the --policy");
  app.add_option("--promote-type", promote_type, "type --auto-promote promotes layers to (default q8_0)");
  std::string promote_unit;
  app.add_option(
      "--promote-unit", promote_unit,
      "what --auto-promote promotes at once: class (default: each class of each layer, e.g. layer 3's "
      "attention, alone) or layer (a layer's classes together: half the measurements)");
  app.add_option("-f,--file", gate_text, "text for --gate");
  app.add_option("-c,--ctx-size", gate_ctx, "window for --gate (0: the model's context, at most 4096)");
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
  if (!tensor_type_file.empty()) {
    std::ifstream f(tensor_type_file);
    if (!f) return fail("--tensor-type-file: cannot read " + tensor_type_file);
    std::string line;
    int lineno = 0;
    while (std::getline(f, line)) {
      ++lineno;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      auto r = strata::parse_tensor_type_rule(line);
      if (!r.ok()) return fail(tensor_type_file + ":" + std::to_string(lineno) + ": " + r.message(), 2);
      opts.policy.tensor_types.push_back(std::move(r).value());
    }
  }
  if (!policy_spec.empty()) {
    auto rules = strata::parse_class_policy(policy_spec);
    if (!rules.ok()) return fail(rules.message(), 2);
    opts.policy.class_rules = std::move(rules).value();
  }
  strata::Imatrix imatrix;
  if (!imatrix_path.empty()) {
    auto m = strata::read_imatrix(imatrix_path);
    if (!m.ok()) return fail(m.message());
    imatrix = std::move(m).value();
    opts.imatrix = &imatrix;
    opts.imatrix_file = imatrix_path;
    opts.policy.has_imatrix = true;
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
  Gate gate;
  std::string text;
  if (!gate_spec.empty()) {
    auto g = parse_gate(gate_spec);
    if (!g.ok()) return fail(g.message(), 2);
    gate = *g;
    if (dry_run) return fail("--gate needs an output (not --dry-run)", 2);
    if (gate_text.empty()) return fail("--gate needs -f TEXT", 2);
    auto t = strata::read_text_file(gate_text);
    if (!t.ok()) return fail(t.message());
    text = std::move(t).value();
  } else if (!gate_text.empty()) {
    return fail("-f is the text of --gate; give --gate too", 2);
  } else if (auto_promote) {
    return fail("--auto-promote needs --gate kld=X,routing=Y (the gate it promotes layers until it passes)",
                2);
  }
  strata::AutoPromoteOptions ap;
  if (!promote_unit.empty()) {
    if (!auto_promote) return fail("--promote-unit is for --auto-promote", 2);
    if (promote_unit != "layer" && promote_unit != "class")
      return fail("--promote-unit '" + promote_unit + "': expected layer or class", 2);
    ap.by_class = promote_unit == "class";
  }
  if (!promote_type.empty()) {
    if (!auto_promote) return fail("--promote-type is for --auto-promote", 2);
    if (!strata::type_from_name(promote_type, &ap.promote_type) || !strata::type_info(ap.promote_type).known)
      return fail("--promote-type: unknown type '" + promote_type + "'", 2);
  }

  auto in = strata::GgufFile::open(in_path);
  if (!in.ok()) return fail(in.message());
  auto plan = strata::plan_quantize(**in, opts);
  if (!plan.ok()) return fail(plan.message());
  const double n_el = static_cast<double>(plan->n_elements);
  if (auto_promote) return run_auto_promote(**in, in_path, out_path, text, gate, gate_ctx, opts, ap);
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
    // Gated: written under a temporary name that becomes OUT only when the gate passes.
    if (auto st = strata::write_quantized(**in, *plan, opts,
                                          gate_spec.empty() ? out_path : out_path + ".gating", progress);
        !st.ok())
      return fail(st.message());
  }
  std::printf("model size: %.2f MiB (%.2f bpw) -> %s: %.2f MiB (%.2f bpw)%s\n", mib(plan->in_bytes),
              plan->in_bytes * 8.0 / n_el, opts.policy.ftype->name, mib(plan->out_bytes),
              plan->out_bytes * 8.0 / n_el, dry_run ? " (dry run, nothing written)" : "");
  if (opts.imatrix)
    std::printf("importance matrix: %d tensors quantized with it (%zu entries, %u chunks of %u)\n",
                plan->n_weighted, imatrix.entries.size(), imatrix.chunk_count, imatrix.chunk_size);
  if (plan->n_fallback > 0)
    std::printf("%d of %zu tensors fell back to another type (rows not a multiple of the block)\n",
                plan->n_fallback, plan->tensors.size());
  if (!gate_spec.empty()) return run_gate(in_path, out_path, text, gate, gate_ctx, opts.n_threads);
  return 0;
}

const strata::cli::Registrar reg{
    "quantize", "convert a GGUF model to Q8_0 / Q4_K_M / MXFP4_MOE / ... (llama-quantize)", &cmd_quantize};

}  // namespace
