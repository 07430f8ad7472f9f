// strata inspect: what a GGUF holds — metadata, tensor table, parameter counts (total and active
// per token) and bytes by class. Works from the file alone, so it also describes models strata
// cannot run. `--kv` hands over to the KV-cache view (tools/inspect_kv.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/units.h"
#include "command.h"
#include "format/gguf.h"
#include "format/tensor_names.h"
#include "inspect_kv.h"

namespace {

enum TensorClass { kEmbedOut, kAttention, kRouted, kShared, kOther, kNumClasses };
const char* kClassNames[kNumClasses] = {"embeddings/output", "attention", "routed experts", "shared experts",
                                        "norms/other"};

bool contains(const std::string& s, const char* sub) {
  return s.find(sub) != std::string::npos;
}

TensorClass classify(const std::string& name) {
  if (name.rfind("token_embd", 0) == 0 || name.rfind("output.", 0) == 0) return kEmbedOut;
  if (strata::is_routed_expert(name)) return kRouted;
  if (contains(name, "_shexp")) return kShared;
  if (contains(name, "norm")) return kOther;
  if (contains(name, "attn") || contains(name, "indexer")) return kAttention;
  return kOther;
}

int cmd_inspect(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--kv")) return inspect_kv_main(argc, argv);
  }
  std::string path;
  bool no_tensors = false;
  size_t max_items = 8;
  CLI::App app{"Describe a GGUF model: metadata, tensors, parameter and byte counts", "strata inspect"};
  app.add_option("-m,--model", path, "GGUF file")->required();
  app.add_flag("--no-tensors", no_tensors, "skip the tensor table");
  app.add_option("--max-items", max_items, "array elements shown per metadata value")->capture_default_str();
  bool kv_view = false;  // handled above; declared so --help lists it
  app.add_flag("--kv", kv_view, "KV-cache view (see inspect_kv)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata inspect: error: %s\n", e.what());
    return 2;
  }
  auto f = strata::GgufFile::open(path);
  if (!f.ok()) {
    std::fprintf(stderr, "strata inspect: error: %s\n", f.message().c_str());
    return 1;
  }
  const strata::GgufFile& g = **f;
  const std::string arch = g.get_string_or("general.architecture", "?").ok()
                               ? g.get_string_or("general.architecture", "?").value()
                               : "?";
  std::printf("file:          %s\n", path.c_str());
  std::printf("gguf version:  %u, %zu metadata keys, %zu tensors, %s\n", g.version(), g.metadata().size(),
              g.tensors().size(), strata::format_bytes(g.file_size()).c_str());
  std::printf("architecture:  %s\n", arch.c_str());

  std::printf("\nmetadata:\n");
  for (const auto& kv : g.metadata()) {
    std::printf("  %-48s %s\n", kv.key.c_str(), kv.value.to_display(max_items).c_str());
  }

  uint64_t params[kNumClasses] = {}, bytes[kNumClasses] = {};
  if (!no_tensors) {
    std::printf("\ntensors:\n  %-36s %-6s %-22s %12s\n", "name", "type", "shape", "bytes");
  }
  for (const auto& t : g.tensors()) {
    const TensorClass c = classify(t.name);
    params[c] += static_cast<uint64_t>(t.n_elements());
    bytes[c] += t.nbytes;
    if (no_tensors) continue;
    std::string shape = "[";
    for (int d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    shape += "]";
    std::printf("  %-36s %-6s %-22s %12zu\n", t.name.c_str(), strata::type_name(t.type), shape.c_str(),
                t.nbytes);
  }

  // Active per token: every non-routed weight, plus top-k / n_experts of the routed experts.
  const int64_t n_exp =
      g.get_int_or(arch + ".expert_count", 0).ok() ? g.get_int_or(arch + ".expert_count", 0).value() : 0;
  const int64_t n_used = g.get_int_or(arch + ".expert_used_count", 0).ok()
                             ? g.get_int_or(arch + ".expert_used_count", 0).value()
                             : 0;
  uint64_t total = 0, total_bytes = 0;
  for (int c = 0; c < kNumClasses; ++c) total += params[c], total_bytes += bytes[c];
  double active = static_cast<double>(total - params[kRouted]);
  if (n_exp > 0)
    active += static_cast<double>(params[kRouted]) * static_cast<double>(n_used) / static_cast<double>(n_exp);
  else
    active += static_cast<double>(params[kRouted]);

  std::printf("\nparameters:\n");
  std::printf("  total          %16llu (%.3f M)\n", static_cast<unsigned long long>(total), total / 1e6);
  std::printf("  active/token   %16.0f (%.3f M)", active, active / 1e6);
  if (n_exp > 0)
    std::printf("  [%lld of %lld routed experts]", static_cast<long long>(n_used),
                static_cast<long long>(n_exp));
  std::printf("\n\nbytes by class:\n");
  for (int c = 0; c < kNumClasses; ++c) {
    std::printf("  %-20s %12s  %5.1f%%  (%.3f M params)\n", kClassNames[c],
                strata::format_bytes(bytes[c]).c_str(),
                total_bytes ? 100.0 * static_cast<double>(bytes[c]) / static_cast<double>(total_bytes) : 0.0,
                params[c] / 1e6);
  }
  std::printf("  %-20s %12s\n", "total", strata::format_bytes(total_bytes).c_str());
  return 0;
}

const strata::cli::Registrar reg{"inspect", "describe a GGUF model: metadata, tensors, parameter counts",
                                 &cmd_inspect};

}  // namespace
