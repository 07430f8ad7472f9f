// Matmul throughput per weight type × ISA × kernel: decode shapes (BM_Matmul, BM_Gemv) as GB/s of
// weight bytes streamed and as a fraction of this machine's measured read bandwidth (style.md §4:
// every number says how far from the limit it is); prefill shapes (BM_Gemm, BM_GemmK) as GFLOP/s,
// the AVX2 and AVX-512 kernels side by side (an AVX-512 CPU runs both).
//   strata_bench_kernels --benchmark_filter=Matmul
//   strata_bench_kernels --benchmark_filter='BM_Gemm/' --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <cstring>
#include <random>
#include <vector>

#include "base/aligned.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace strata {
namespace {

// Thread CPU seconds: the machine may be shared, and Google Benchmark's rates use CPU time too.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Single-thread streaming read bandwidth over a buffer far larger than the caches (bytes/s).
double read_bandwidth() {
  static const double bw = [] {
    const size_t n = size_t{256} << 20;
    auto buf = aligned_alloc_array<uint64_t>(n / 8);
    std::memset(buf.get(), 1, n);
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const double t0 = thread_seconds();
      uint64_t s = 0;
      for (size_t i = 0; i < n / 8; i += 4) s += buf[i] + buf[i + 1] + buf[i + 2] + buf[i + 3];
      benchmark::DoNotOptimize(s);
      const double dt = thread_seconds() - t0;
      best = std::max(best, double(n) / dt);
    }
    return best;
  }();
  return bw;
}

void BM_MemoryRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(read_bandwidth());
  state.counters["GB/s"] = read_bandwidth() / 1e9;
}
BENCHMARK(BM_MemoryRead)->Iterations(1);

// args: type id, isa, in, out. One token, one thread: W streamed once per call (4096 × 1024
// weights are 2–16 MiB, so the smaller types may run partly from cache: of_bw > 1 then).
void BM_Matmul(benchmark::State& state) {
  const GgmlType t = static_cast<GgmlType>(state.range(0));
  const Isa isa = static_cast<Isa>(state.range(1));
  const int64_t in = state.range(2), out = state.range(3);
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  const KernelTraits& k = kernel_traits(t, isa);
  const KernelTraits& kx = kernel_traits(k.vec_dot_type, isa);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> row(static_cast<size_t>(in)), x(static_cast<size_t>(in));
  for (auto& v : x) v = nd(rng);
  const size_t rb = row_bytes(t, in);
  std::vector<uint8_t> w(rb * static_cast<size_t>(out));
  for (int64_t r = 0; r < out; ++r) {
    for (auto& v : row) v = nd(rng);
    quant_ref(t)->from_float(row.data(), w.data() + r * rb, in);
  }
  std::vector<uint8_t> xq(row_bytes(k.vec_dot_type, in));
  std::vector<float> y(static_cast<size_t>(out));
  for (auto _ : state) {
    if (kx.from_float) kx.from_float(x.data(), xq.data(), in);
    for (int64_t r = 0; r < out; ++r) y[r] = k.vec_dot(in, w.data() + r * rb, xq.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = double(w.size()) * double(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["of_bw"] = benchmark::Counter(bytes / read_bandwidth(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(type_name(t)) + "/" + isa_name(isa));
}

void matmul_args(benchmark::internal::Benchmark* b) {
  for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::mxfp4, GgmlType::q4_k, GgmlType::q6_k}) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 4096, 1024});
    }
  }
}
BENCHMARK(BM_Matmul)->Apply(matmul_args)->Unit(benchmark::kMicrosecond);

// Which many-token kernel a case measures: the register tiles alone (the panel and gemv kernels
// removed from the traits), the panel alone (gemv removed, so one token runs the panel too), or one
// vec_dot per output (every multi-output kernel removed). The traits are those of `isa`, so the
// AVX2 kernels are measured on an AVX-512 machine too.
enum GemmKernel : int64_t { kGemmVecDot = 0, kGemmTiles = 1, kGemmPanel = 2 };
const char* gemm_kernel_name(int64_t k) {
  return k == kGemmVecDot ? "vec_dot" : k == kGemmTiles ? "tiles" : "panel";
}

// The traits of (t, isa) reduced to one kernel kind; false (and the state skipped) when that
// kernel does not exist for the type on that ISA, or the CPU lacks the ISA.
bool gemm_traits(benchmark::State& state, GgmlType t, Isa isa, int64_t kernel, KernelTraits* k) {
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported by this CPU");
    return false;
  }
  *k = kernel_traits(t, isa);
  k->gemv = nullptr;
  if (kernel == kGemmVecDot) k->gemm = nullptr;
  if (kernel != kGemmPanel) k->gemm_panel = nullptr;
  if ((kernel == kGemmPanel && k->gemm_panel == nullptr) || (kernel == kGemmTiles && k->gemm == nullptr)) {
    state.SkipWithError("no such kernel for this type and ISA");
    return false;
  }
  return true;
}

// args: type id, tokens, kernel (GemmKernel), isa; one thread. W {1024, 4096} (2–8 MiB: L2/L3);
// activations converted inside the timed loop, as matmul does. GFLOP/s counts 2·in·out·tokens,
// GB/s the weight bytes per call.
void BM_Gemm(benchmark::State& state) {
  const GgmlType t = static_cast<GgmlType>(state.range(0));
  const int64_t nt = state.range(1), in = 1024, out = 4096;
  const Isa isa = static_cast<Isa>(state.range(3));
  KernelTraits k;
  if (!gemm_traits(state, t, isa, state.range(2), &k)) return;
  const KernelTraits& kx = kernel_traits(k.vec_dot_type, isa);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> row(static_cast<size_t>(in)), x(static_cast<size_t>(in * nt));
  for (auto& v : x) v = nd(rng);
  const size_t rb = row_bytes(t, in), xb = row_bytes(k.vec_dot_type, in);
  std::vector<uint8_t> w(rb * static_cast<size_t>(out)), xq(xb * static_cast<size_t>(nt));
  for (int64_t r = 0; r < out; ++r) {
    for (auto& v : row) v = nd(rng);
    quant_ref(t)->from_float(row.data(), w.data() + r * rb, in);
  }
  std::vector<float> y(static_cast<size_t>(out * nt));
  for (auto _ : state) {
    for (int64_t i = 0; i < nt; ++i) kx.from_float(x.data() + i * in, xq.data() + i * xb, in);
    matmul_rows(k, in, w.data(), rb, 0, out, xq.data(), xb, nt, y.data(), out);
    benchmark::DoNotOptimize(y.data());
  }
  const double it = double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(double(w.size()) * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * in * out * nt * it / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(type_name(t)) + "/" + isa_name(isa) + "/" + gemm_kernel_name(state.range(2)));
}

// Per type and token count, AVX2 tiles / AVX2 panel / AVX-512 tiles / AVX-512 panel side by
// side (vec_dot at one token only: the floor every kernel must beat).
void gemm_args(benchmark::internal::Benchmark* b) {
  for (GgmlType t : {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4}) {
    for (int64_t nt : {1, 8, 64}) {
      for (Isa isa : {Isa::avx2, Isa::avx512}) {
        for (int64_t kernel : {kGemmVecDot, kGemmTiles, kGemmPanel}) {
          if (kernel == kGemmVecDot && nt != 1) continue;
          b->Args({static_cast<int64_t>(t), nt, kernel, static_cast<int64_t>(isa)});
        }
      }
    }
  }
}
BENCHMARK(BM_Gemm)->Apply(gemm_args)->Unit(benchmark::kMillisecond);

// args: type id (Q4_K, Q6_K), tokens, kernel (GemmKernel: tiles or panel), out rows, isa; one
// thread, in = 2048: 256 rows (0.3–0.4 MiB, in L2) show the kernel's compute, 2048 rows (2.3–3.4 MiB)
// stream from L3/DRAM. Activations in Q8_K quantized outside the timed loop, so the numbers are the
// product alone; tok·rows/s counts the outputs (tokens × rows) per second, GFLOP/s 2·in per output,
// GB/s the weight bytes per call.
void BM_GemmK(benchmark::State& state) {
  const GgmlType t = static_cast<GgmlType>(state.range(0));
  const int64_t nt = state.range(1), in = 2048, out = state.range(3);
  const Isa isa = static_cast<Isa>(state.range(4));
  KernelTraits k;
  if (!gemm_traits(state, t, isa, state.range(2), &k)) return;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> row(static_cast<size_t>(in));
  const size_t rb = row_bytes(t, in), xb = row_bytes(GgmlType::q8_k, in);
  std::vector<uint8_t> w(rb * static_cast<size_t>(out)), xq(xb * static_cast<size_t>(nt));
  // Rows repeat every 64 (the scalar K-quant quantizer is slow); their addresses do not.
  for (int64_t r = 0; r < std::min<int64_t>(out, 64); ++r) {
    for (auto& v : row) v = nd(rng);
    quant_ref(t)->from_float(row.data(), w.data() + r * rb, in);
  }
  for (int64_t r = 64; r < out; ++r) std::memcpy(w.data() + r * rb, w.data() + (r % 64) * rb, rb);
  for (int64_t i = 0; i < nt; ++i) {
    for (auto& v : row) v = nd(rng);
    quant_ref(GgmlType::q8_k)->from_float(row.data(), xq.data() + i * xb, in);
  }
  std::vector<float> y(static_cast<size_t>(out * nt));
  for (auto _ : state) {
    matmul_rows(k, in, w.data(), rb, 0, out, xq.data(), xb, nt, y.data(), out);
    benchmark::DoNotOptimize(y.data());
  }
  const double it = double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(double(w.size()) * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["tok_rows/s"] = benchmark::Counter(double(out * nt) * it, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * in * out * nt * it / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(type_name(t)) + "/" + isa_name(isa) + "/" + gemm_kernel_name(state.range(2)));
}

void gemm_k_args(benchmark::internal::Benchmark* b) {
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q6_k}) {
    for (int64_t out : {256, 2048})
      for (int64_t nt : {1, 2, 3, 4, 8, 16, 64})
        for (Isa isa : {Isa::avx2, Isa::avx512})
          for (int64_t kernel : {kGemmTiles, kGemmPanel})
            b->Args({static_cast<int64_t>(t), nt, kernel, out, static_cast<int64_t>(isa)});
  }
}
BENCHMARK(BM_GemmK)->Apply(gemm_k_args)->Unit(benchmark::kMillisecond);

// args: type id, kernel (0: the register tile with one token, 1: the gemv kernel), out rows, isa.
// One token, one thread, in = 1024: the decode product matmul_rows runs per work item (64 rows),
// item after item. GB/s counts the weight bytes per call: 512 rows (74 KiB–1 MiB, in L2) show the
// kernel's compute speed, 4096 rows (0.6–8 MiB) L2/L3, 65536 rows (9–128 MiB) mostly DRAM.
void BM_Gemv(benchmark::State& state) {
  const GgmlType t = static_cast<GgmlType>(state.range(0));
  const bool gemv = state.range(1) != 0;
  const int64_t in = 1024, out = state.range(2), item = 64;
  const Isa isa = static_cast<Isa>(state.range(3));
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  KernelTraits k = kernel_traits(t, isa);
  if (!gemv) k.gemv = nullptr, k.gemm_panel = nullptr;
  if (gemv && k.gemv == nullptr) {
    state.SkipWithError("no gemv kernel for this type");
    return;
  }
  const KernelTraits& kx = kernel_traits(k.vec_dot_type, isa);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> row(static_cast<size_t>(in)), x(static_cast<size_t>(in));
  for (auto& v : x) v = nd(rng);
  const size_t rb = row_bytes(t, in);
  std::vector<uint8_t> w(rb * static_cast<size_t>(out)), xq(row_bytes(k.vec_dot_type, in));
  // Rows repeat every 64 (quantizing 65536 K-quant rows in scalar code takes longer than the run).
  for (int64_t r = 0; r < std::min<int64_t>(out, 64); ++r) {
    for (auto& v : row) v = nd(rng);
    quant_ref(t)->from_float(row.data(), w.data() + r * rb, in);
  }
  for (int64_t r = 64; r < out; ++r) std::memcpy(w.data() + r * rb, w.data() + (r % 64) * rb, rb);
  kx.from_float(x.data(), xq.data(), in);
  std::vector<float> y(static_cast<size_t>(out));
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < out; r0 += item)
      matmul_rows(k, in, w.data(), rb, r0, std::min(out, r0 + item), xq.data(), 0, 1, y.data(), out);
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = double(w.size()) * double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["of_bw"] = benchmark::Counter(bytes / read_bandwidth(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(type_name(t)) + "/" + isa_name(isa) + (gemv ? "/gemv" : "/tile"));
}

void gemv_args(benchmark::internal::Benchmark* b) {
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    for (GgmlType t : {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4,
                       GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q6_k}) {
      for (int64_t rows : {512, 4096, 65536})
        for (int64_t gemv : {0, 1}) b->Args({static_cast<int64_t>(t), gemv, rows, static_cast<int64_t>(isa)});
    }
  }
}
BENCHMARK(BM_Gemv)->Apply(gemv_args)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
