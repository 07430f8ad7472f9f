// Element-wise ops (kernels/ops.h OpsTable) per ISA: the scalar reference against the AVX2 and
// AVX-512 tables, in one run so the ratios share the machine's load. Elements per second, and
// bytes per second for the streaming ones (compare with BM_MemoryRead).
//   strata_bench_kernels --benchmark_filter=Ops
// The shapes are pp64's on the issue-5 synth model: SwiGLU over 64-row slices, RMSNorm and the
// residual add over 1024-wide rows, attention key blocks of head_dim 64.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "base/cpu_features.h"
#include "kernels/ops.h"

namespace strata {
namespace {

enum Op : int {
  op_exp,
  op_swiglu,
  op_rms_norm,
  op_softmax,
  op_vec_add,
  op_vec_add_scaled,
  op_dot,
  op_attn_keys,
  op_rope,
};
const char* const kOpNames[] = {"exp",  "swiglu",  "rms_norm",       "softmax_mask", "vec_add",
                                "axpy", "dot_f32", "attn_key_block", "rope_neox"};

// n N(0, 1) floats, 64-byte aligned (as arena and KV rows are).
AlignedPtr<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  AlignedPtr<float> v = aligned_alloc_array<float>(static_cast<size_t>(std::max<int64_t>(n, 1)));
  for (int64_t i = 0; i < n; ++i) v[i] = nd(rng);
  return v;
}

// args: op, isa, n. attn_key_block: n keys of a 64-wide head (one query row against a key
// block: scores, exp, weighted sum of the values).
void BM_Ops(benchmark::State& state) {
  const Op op = static_cast<Op>(state.range(0));
  const Isa isa = static_cast<Isa>(state.range(1));
  const int64_t n = state.range(2);
  if (!isa_supported(isa)) {
    state.SkipWithError("CPU lacks this ISA");
    return;
  }
  const OpsTable& t = ops_table(isa);
  state.SetLabel(std::string(kOpNames[op]) + "/" + isa_name(isa));
  const AlignedPtr<float> x = normal(n, 1), y = normal(n, 2), w = normal(n, 3), out = normal(n, 4);
  const AlignedPtr<float> mask = normal(n, 5);
  for (int64_t i = 0; i < n; ++i) mask[i] = i < n / 2 ? 0.0f : -std::numeric_limits<float>::infinity();
  constexpr int64_t kHd = 64;
  const AlignedPtr<float> keys = normal(n * kHd, 6), vals = normal(n * kHd, 7), q = normal(kHd, 8);
  const AlignedPtr<float> s = normal(n, 9), o = normal(kHd, 10);
  std::vector<const float*> kp(static_cast<size_t>(n)), vp(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) kp[j] = keys.get() + j * kHd, vp[j] = vals.get() + j * kHd;
  std::vector<float> rope(static_cast<size_t>(n + n % 2));
  if (op == op_rope) {
    RopeParams p;
    p.n_rot = static_cast<int>(n + n % 2);
    rope_cache(p, 37, 1.0f, rope.data());
  }
  int64_t bytes = 0;  // streamed per iteration
  for (auto _ : state) {
    switch (op) {
      case op_exp:
        t.exp(x.get(), out.get(), n);
        break;
      case op_swiglu:
        t.swiglu(x.get(), y.get(), out.get(), n);
        break;
      case op_rms_norm:
        t.rms_norm(x.get(), w.get(), out.get(), n, 1e-6f);
        break;
      case op_softmax:
        std::copy(x.get(), x.get() + n, out.get());
        t.softmax_scaled(out.get(), n, 0.125f, mask.get(), nullptr);
        break;
      case op_vec_add:
        t.vec_add(y.get(), x.get(), n);
        bytes = 12 * n;
        break;
      case op_vec_add_scaled:
        t.vec_add_scaled(y.get(), x.get(), 1e-3f, n);
        bytes = 12 * n;
        break;
      case op_dot:
        benchmark::DoNotOptimize(t.dot_f32(x.get(), y.get(), n));
        bytes = 8 * n;
        break;
      case op_attn_keys:
        t.dot_f32_rows(q.get(), kp.data(), n, kHd, s.get());
        benchmark::DoNotOptimize(t.exp_shift_sum(s.get(), n, 4.0f));
        t.vec_add_scaled_rows(o.get(), vp.data(), s.get(), n, kHd);
        bytes = 8 * kHd * n;
        break;
      case op_rope:  // n = n_rot
        t.rope_apply(RopeStyle::rope_style_neox, static_cast<int>(n), rope.data(), y.get());
        break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  if (bytes) state.SetBytesProcessed(state.iterations() * bytes);
}

void ops_args(benchmark::internal::Benchmark* b) {
  const std::pair<Op, int64_t> shapes[] = {
      {op_exp, 4096},   {op_swiglu, 64},    {op_swiglu, 4096},   {op_rms_norm, 1024},
      {op_softmax, 32}, {op_softmax, 1024}, {op_vec_add, 65536}, {op_vec_add_scaled, 64},
      {op_dot, 64},     {op_dot, 1024},     {op_attn_keys, 64},  {op_rope, 64},
  };
  for (const auto& [op, n] : shapes)
    for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) b->Args({op, static_cast<int64_t>(isa), n});
}
BENCHMARK(BM_Ops)->Apply(ops_args);

}  // namespace
}  // namespace strata
