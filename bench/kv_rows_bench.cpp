// Attention's products over typed KV rows (kernels/ops.h KvRowOps) per type × ISA, in one run so
// the ratios share the machine's load: one query head against a depth of keys in key blocks of
// 64 (q·k, then Σ p·v over the same rows), as a decode step reads one kv head's cache.
//   strata_bench_kernels --benchmark_filter=KvRows
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/ops.h"
#include "quant/quant_ref.h"

namespace strata {
namespace {

// args: type, isa, depth. Rows of one 128-wide head.
void BM_KvRows(benchmark::State& state) {
  const GgmlType t = static_cast<GgmlType>(state.range(0));
  const Isa isa = static_cast<Isa>(state.range(1));
  const int64_t depth = state.range(2), n = 128, kb = 64;
  if (!isa_supported(isa)) {
    state.SkipWithError("CPU lacks this ISA");
    return;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(depth * n)), q(n), y(n), s(kb);
  for (float& v : x) v = nd(rng);
  for (float& v : q) v = nd(rng);
  for (float& v : s) v = 0.01f * nd(rng);
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> rows(rb * static_cast<size_t>(depth));
  quant_ref(t)->from_float(x.data(), rows.data(), depth * n);  // rows of whole blocks: one call
  std::vector<const void*> p(static_cast<size_t>(depth));
  for (int64_t j = 0; j < depth; ++j) p[j] = rows.data() + static_cast<size_t>(j) * rb;
  const KvRowOps& ops = ops_table(isa).kv_rows(t);
  float sc[64];
  for (auto _ : state) {
    for (int64_t j = 0; j < depth; j += kb) {
      ops.dot_rows(q.data(), p.data() + j, kb, n, sc);
      ops.add_scaled_rows(y.data(), p.data() + j, s.data(), kb, n);
    }
    benchmark::DoNotOptimize(sc);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(type_name(t)) + "/" + isa_name(isa));
  state.SetItemsProcessed(state.iterations() * depth);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * rows.size()));
}

void kv_rows_args(benchmark::internal::Benchmark* b) {
  for (GgmlType t : {GgmlType::f16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::iq4_nl})
    for (Isa isa : {Isa::avx2, Isa::avx512})
      b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 4096});
}
BENCHMARK(BM_KvRows)->Apply(kv_rows_args);

}  // namespace
}  // namespace strata
