#include "quantize/quantize_gguf.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/thread_pool.h"
#include "quant/quant_ref.h"
#include "quant/weight_quant.h"
#include "quant/weighted_quant.h"

namespace strata {
namespace {

bool is_float_type(GgmlType t) {
  return t == GgmlType::f32 || t == GgmlType::f16 || t == GgmlType::bf16;
}

int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

Result<PolicyModel> policy_model(const GgufFile& in) {
  PolicyModel m;
  STRATA_ASSIGN(m.arch, in.get_string("general.architecture"));
  STRATA_ASSIGN(const int64_t n_layer, in.get_int_or(m.arch + ".block_count", 0));
  STRATA_ASSIGN(const int64_t n_expert, in.get_int_or(m.arch + ".expert_count", 0));
  m.n_layer = static_cast<int>(n_layer);
  m.n_expert = static_cast<int>(n_expert);
  m.has_output = in.find_tensor("output.weight") != nullptr;
  for (const TensorView& t : in.tensors()) m.n_attention_wv += is_attn_v_like(t.name) ? 1 : 0;
  return m;
}

// Dequantizes source rows to f32 (F32 rows are copied).
ToFloatFn source_to_float(GgmlType t) {
  const QuantRef* r = quant_ref(t);
  return r ? r->to_float : nullptr;
}

}  // namespace

Result<QuantizePlan> plan_quantize(const GgufFile& in, const QuantizeOptions& opts) {
  if (!opts.policy.ftype) return err("no output type given");
  STRATA_ASSIGN(const PolicyModel m, policy_model(in));
  STRATA_TRY(check_class_policy(opts.policy.class_rules, m.n_layer));
  // llama-quantize's order (by layer, then name): its counters run in this order.
  std::vector<const TensorView*> order;
  for (const TensorView& t : in.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorView* a, const TensorView* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  QuantizePlan plan;
  TypeCounters counters;
  for (const TensorView* tv : order) {
    const TensorView& t = *tv;
    TensorPlan tp;
    tp.src = &t;
    STRATA_ASSIGN(tp.choice, choose_tensor_type(opts.policy, m, t.name, t.type, t.ne, &counters));
    const GgmlType dst = tp.choice.type;
    tp.convert = dst != t.type;
    const int64_t block = type_info(dst).block_size;
    if (t.ne[0] % block != 0)
      return err("tensor %s: rows of %lld elements are not a multiple of %s's block of %lld", t.name.c_str(),
                 static_cast<long long>(t.ne[0]), type_name(dst), static_cast<long long>(block));
    if (tp.convert) {
      if (!source_to_float(t.type))
        return err("tensor %s: cannot convert from type %s (strata has no dequantizer for it)",
                   t.name.c_str(), type_name(t.type));
      if (!is_float_type(t.type) && !opts.allow_requantize)
        return err("tensor %s: requantizing from type %s is disabled (pass --allow-requantize)",
                   t.name.c_str(), type_name(t.type));
      if (!weight_quantizer(dst))
        return err("tensor %s: strata cannot write type %s", t.name.c_str(), type_name(dst));
    }
    if (tp.convert && opts.imatrix && weighted_quantizer(dst)) {
      auto it = opts.imatrix->entries.find(t.name);
      if (it != opts.imatrix->entries.end()) {
        const ImatrixEntry& e = it->second;
        if (e.n_per_row != t.ne[0] || e.n_mat() != t.ne[2] * t.ne[3])
          return err(
              "tensor %s [%lld x %lld matrices]: the importance matrix has %lld columns x %lld matrices",
              t.name.c_str(), static_cast<long long>(t.ne[0]), static_cast<long long>(t.ne[2] * t.ne[3]),
              static_cast<long long>(e.n_per_row), static_cast<long long>(e.n_mat()));
        tp.imatrix = &e;
        plan.n_weighted++;
      }
    }
    tp.out_bytes = row_bytes(dst, t.ne[0]) * static_cast<size_t>(t.rows());
    plan.in_bytes += t.nbytes;
    plan.out_bytes += tp.out_bytes;
    plan.n_elements += static_cast<uint64_t>(t.n_elements());
    plan.n_fallback += tp.choice.fell_back ? 1 : 0;
    plan.tensors.push_back(tp);
  }
  return plan;
}

Status write_quantized(const GgufFile& in, const QuantizePlan& plan, const QuantizeOptions& opts,
                       const std::string& out_path, const QuantizeProgress& progress) {
  GgufWriter w;
  for (const GgufKv& kv : in.metadata()) {
    if (kv.key == "general.quantization_version" || kv.key == "general.file_type" || kv.key == "split.no" ||
        kv.key == "split.count" || kv.key == "split.tensors.count")
      continue;
    w.set_value(kv.key, kv.value);
  }
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", opts.policy.ftype->llama_ftype);
  if (opts.imatrix) {  // as llama-quantize records its --imatrix (strings cut at 127 bytes as there)
    w.set_string("quantize.imatrix.file", opts.imatrix_file.substr(0, 127));
    if (!opts.imatrix->datasets.empty())
      w.set_string("quantize.imatrix.dataset", opts.imatrix->datasets[0].substr(0, 127));
    w.set_u32("quantize.imatrix.entries_count", static_cast<uint32_t>(opts.imatrix->entries.size()));
    if (opts.imatrix->chunk_count > 0) w.set_u32("quantize.imatrix.chunks_count", opts.imatrix->chunk_count);
  }

  ThreadPool pool(opts.n_threads);
  const size_t total = plan.tensors.size();
  for (size_t i = 0; i < total; ++i) {
    const TensorPlan& tp = plan.tensors[i];
    const TensorView& t = *tp.src;
    // Produced at write time, one tensor in memory at a time (GgufWriter's TensorFill).
    auto fill = [&pool, &tp, &progress, i, total](uint8_t* out, size_t nbytes) -> Status {
      const TensorView& t = *tp.src;
      STRATA_ASSERT(nbytes == tp.out_bytes);
      if (!tp.convert) {
        std::memcpy(out, t.data, nbytes);
      } else {
        const ToFloatFn to_float = source_to_float(t.type);
        const FromFloatFn quantize = weight_quantizer(tp.choice.type);
        const WeightedQuantFn weighted = tp.imatrix ? weighted_quantizer(tp.choice.type) : nullptr;
        // Column importance per matrix (expert) of the tensor; empty: no row reached it.
        std::vector<std::vector<float>> qw;
        if (weighted) {
          for (int64_t e = 0; e < tp.imatrix->n_mat(); ++e) qw.push_back(tp.imatrix->importance(e));
        }
        const int64_t n = t.ne[0];
        const size_t src_row = row_bytes(t.type, n), dst_row = row_bytes(tp.choice.type, n);
        const auto* src = static_cast<const uint8_t*>(t.data);
        std::atomic<int64_t> bad_row{-1};
        pool.parallel_for(t.rows(), [&](int64_t r0, int64_t r1) {
          std::vector<float> row(static_cast<size_t>(n));
          for (int64_t r = r0; r < r1; ++r) {
            to_float(src + r * src_row, row.data(), n);
            if (!std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); })) {
              bad_row.store(r);
              return;
            }
            const std::vector<float>* w = weighted ? &qw[static_cast<size_t>(r / t.ne[1])] : nullptr;
            if (w && !w->empty()) {
              weighted(row.data(), out + r * dst_row, n, w->data());
            } else {
              quantize(row.data(), out + r * dst_row, n);
            }
          }
        });
        if (bad_row.load() >= 0)
          return err("tensor %s: row %lld holds a non-finite value (inf or nan); not converted",
                     t.name.c_str(), static_cast<long long>(bad_row.load()));
      }
      if (progress) progress(i + 1, total, tp);
      return {};
    };
    int dims = 1;  // as ggml writes them: up to the last dim above 1
    for (int d = 1; d < kMaxDims; ++d) dims = t.ne[d] > 1 ? d + 1 : dims;
    STRATA_TRY(w.add_tensor(t.name, tp.choice.type, std::vector<int64_t>(t.ne, t.ne + dims), fill));
  }
  return w.write(out_path);
}

}  // namespace strata
