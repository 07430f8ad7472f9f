// VulkanDevice::run_attention against CpuDevice::run_attention (kernels/attention_block.h) on
// several shapes: GQA with q / k norms and biases (NEOX RoPE), a sliding window with sinks over
// ring caches (NORM RoPE over part of the head, head_dim_v != head_dim_k), and mixed weight
// types with an output bias; each over a series of calls with two sequences at different
// positions (prefill, decode, both in one batch). Each device keeps its own caches, so later
// calls read the K / V rows that device wrote. Per output of a call,
//   |Δ| <= tol · (Σ_j |wo[r][j]| · max|V| + |bo[r]|)
// (o is a convex combination of V rows, less with a sink), tol 1e-5 for F32 weights and 1e-3
// when o is rounded for a quantized wo (a value may land on the neighbouring step, as in the
// FFN tests); every cache row written within 1e-5 of its largest value. Two shapes again with f16
// K / V rows (the default KV type): rows within 1e-3 of their largest value, outputs within 1e-3.
// Paged rows (a KV pool's blocks, kv/kv_pool.h): both sequences' rows in one region of each
// device, each sequence's block table out of order and interleaved with the other's (blocks
// 3, 0, 2, 1 ... of its own), for f32, f16, q8_0 and q4_0 rows. q8_0 / q4_0 rows: the CPU's numerics
// (kernels/kv_row_ops.cpp: the query as Q8_0, integer block dots, fma per value); a row value may land
// on the neighbouring step where the device's division rounds differently, so rows within one step
// (1/127 of a block's largest value for q8_0, 1/8 for q4_0) and outputs within 1e-2; once with
// Hadamard-rotated q8_0 rows (llama.cpp's default for quantized K / V). bf16, iq4_nl, fp8_e4m3 and
// mxfp4 rows (ring, paged, rotated) the same way: rows within one step of their type, outputs
// within 1e-2. VulkanKvRows: from the same f32 values every type's rows are the CPU's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/fixtures.h"
#include "kernels/cpu_device.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if STRATA_HAVE_VULKAN

using kernel_test::normal;

struct Shape {
  const char* name;
  int n_embd, n_head, n_kv, hdk, hdv, n_rot;
  RopeStyle style;
  int window;
  bool norms, biases, sinks, ring;
  int64_t capacity;
  GgmlType tq, tk, tv, to;
  // calls: per call, per sequence the tokens it adds (0: not in that call)
  std::vector<std::vector<int64_t>> calls;
  GgmlType kv = GgmlType::f32;  // the K / V rows' type
  int64_t block_rows = 0;       // > 0: paged rows in blocks of this many rows
  bool rotated = false;         // the rows' head slices Hadamard-rotated (kernels/kv_rows.h)
};

// Paged shapes: sequence s's table entry e names block n_seq·perm(e) + s of the region, perm
// taking each run of four entries to blocks 3, 0, 2, 1 of that run.
int32_t paged_block(int n_seq, int s, int64_t e) {
  static constexpr int64_t kPerm[4] = {3, 0, 2, 1};
  return static_cast<int32_t>(n_seq * (e / 4 * 4 + kPerm[e % 4]) + s);
}

// A matrix {in, out} of type t on both devices, and its dequantized values.
struct DevMat {
  std::vector<uint8_t> bytes;
  std::vector<float> dq;
  DeviceBuffer cpu_buf, vk_buf;
  DeviceMat mat;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.name;
}

class VulkanAttention : public ::testing::TestWithParam<Shape> {};

TEST_P(VulkanAttention, MatchesTheCpuDevice) {
  static Result<std::unique_ptr<VulkanDevice>> opened = VulkanDevice::open();
  if (!opened.ok()) {
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
    GTEST_SKIP() << "no Vulkan device: " << opened.message();
  }
  VulkanDevice& dev = **opened;
  const Shape& sh = GetParam();
  ThreadPool pool(1);
  CpuDevice cpu(pool);
  const int64_t d = sh.n_embd, q_w = int64_t{sh.n_head} * sh.hdk, k_w = int64_t{sh.n_kv} * sh.hdk,
                v_w = int64_t{sh.n_kv} * sh.hdv, o_w = int64_t{sh.n_head} * sh.hdv;
  std::vector<DeviceBuffer*> cpu_bufs, vk_bufs;
  auto both = [&](const void* data, size_t bytes, DeviceBuffer& cb, DeviceBuffer& vb) {
    auto c = cpu.import(data, bytes, "w");
    auto v = dev.import(data, bytes, "w");
    ASSERT_TRUE(c.ok() && v.ok()) << (c.ok() ? v.message() : c.message());
    cb = *c;
    vb = *v;
    cpu_bufs.push_back(&cb);
    vk_bufs.push_back(&vb);
  };
  DevMat m[4];
  const GgmlType types[4] = {sh.tq, sh.tk, sh.tv, sh.to};
  const int64_t ins[4] = {d, d, d, o_w}, outs[4] = {q_w, k_w, v_w, d};
  for (int i = 0; i < 4; ++i) {
    const size_t row = row_bytes(types[i], ins[i]);
    const auto v = normal(static_cast<size_t>(ins[i] * outs[i]), 20 + i, 0.3f);
    m[i].bytes.resize(row * static_cast<size_t>(outs[i]));
    m[i].dq.resize(v.size());
    for (int64_t r = 0; r < outs[i]; ++r) {
      uint8_t* dst = m[i].bytes.data() + row * static_cast<size_t>(r);
      if (types[i] == GgmlType::f32)
        std::memcpy(dst, v.data() + r * ins[i], row);
      else
        kernel_traits(types[i]).from_float(v.data() + r * ins[i], dst, ins[i]);
      kernel_traits(types[i]).to_float(dst, m[i].dq.data() + r * ins[i], ins[i]);
    }
    both(m[i].bytes.data(), m[i].bytes.size(), m[i].cpu_buf, m[i].vk_buf);
    m[i].mat = DeviceMat{nullptr, 0, row, ins[i], outs[i], types[i]};
  }
  // Optional vectors: biases, norms (around 1), sinks.
  const auto bq = normal(static_cast<size_t>(q_w), 30, 0.5f), bk = normal(static_cast<size_t>(k_w), 31, 0.5f),
             bv = normal(static_cast<size_t>(v_w), 32, 0.5f), bo = normal(static_cast<size_t>(d), 33, 0.5f);
  auto qn = normal(static_cast<size_t>(sh.hdk), 34, 0.2f), kn = normal(static_cast<size_t>(sh.hdk), 35, 0.2f);
  for (float& x : qn) x += 1.0f;
  for (float& x : kn) x += 1.0f;
  const auto sinks = normal(static_cast<size_t>(sh.n_head), 36, 1.0f);
  struct Vec {
    const std::vector<float>* v;
    bool on;
    DeviceBuffer cb, vb;
  } vecs[7] = {{&bq, sh.biases, {}, {}},  {&bk, sh.biases, {}, {}}, {&bv, sh.biases, {}, {}},
               {&bo, sh.biases, {}, {}},  {&qn, sh.norms, {}, {}},  {&kn, sh.norms, {}, {}},
               {&sinks, sh.sinks, {}, {}}};
  for (Vec& v : vecs)
    if (v.on) both(v.v->data(), sizeof(float) * v.v->size(), v.cb, v.vb);
  // Per sequence its K and V rows on each device (zeroed); paged: one region of every sequence's
  // rows per part, addressed through each sequence's table.
  const int n_seq = static_cast<int>(sh.calls[0].size());
  const bool paged = sh.block_rows > 0;
  const int n_bufs = paged ? 1 : n_seq;
  const int64_t stored = paged ? sh.capacity * n_seq : sh.capacity;  // rows of one buffer
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seq));
  if (paged)
    for (int s = 0; s < n_seq; ++s)
      for (int64_t e = 0; e < sh.capacity / sh.block_rows; ++e) tables[s].push_back(paged_block(n_seq, s, e));
  // Sequence s's row at position p: its buffer and slot.
  auto buf_of = [&](int s) { return paged ? 0 : s; };
  auto slot_of = [&](int s, int64_t p) -> int64_t {
    if (paged) return tables[s][p / sh.block_rows] * sh.block_rows + p % sh.block_rows;
    return sh.ring ? p % sh.capacity : p;
  };
  std::vector<DeviceBuffer> ck(n_bufs), cv(n_bufs), vk_k(n_bufs), vk_v(n_bufs);
  // Paged rows of halves start 2 bytes into their buffers, fp8 / mxfp4 rows (bytes) 3 (a KV pool's
  // regions follow each other, so a region may start mid-word).
  const bool byte_rows = sh.kv == GgmlType::fp8_e4m3 || sh.kv == GgmlType::mxfp4;
  const size_t row_off = paged && sh.kv != GgmlType::f32 ? (byte_rows ? 3 : 2) : 0;
  const size_t kb = row_off + row_bytes(sh.kv, k_w) * static_cast<size_t>(stored),
               vb = row_off + row_bytes(sh.kv, v_w) * static_cast<size_t>(stored);
  const std::vector<uint8_t> zeros(std::max(kb, vb), 0);
  auto cache = [&](size_t bytes, DeviceBuffer& cb, DeviceBuffer& vb) {  // allocated: imports alias
    auto c = cpu.alloc(bytes, "cache");
    auto v = dev.alloc(bytes, "cache");
    ASSERT_TRUE(c.ok() && v.ok()) << (c.ok() ? v.message() : c.message());
    cb = *c;
    vb = *v;
    cpu_bufs.push_back(&cb);
    vk_bufs.push_back(&vb);
    std::memset(cb.host, 0, bytes);
    auto t = dev.upload(vb, 0, zeros.data(), bytes);
    ASSERT_TRUE(t.ok() && dev.wait(*t).ok());
  };
  for (int s = 0; s < n_bufs; ++s) {
    cache(kb, ck[s], vk_k[s]);
    cache(vb, cv[s], vk_v[s]);
  }

  AttnConfig cfg;
  cfg.n_embd = sh.n_embd;
  cfg.n_head = sh.n_head;
  cfg.n_head_kv = sh.n_kv;
  cfg.head_dim_k = sh.hdk;
  cfg.head_dim_v = sh.hdv;
  cfg.rope_style = sh.style;
  cfg.rope.n_rot = sh.n_rot;
  cfg.rope.freq_base = 10000.0f;
  cfg.window = sh.window;
  cfg.scale = 1.0f / std::sqrt(static_cast<float>(sh.hdk));
  cfg.eps = 1e-6f;
  auto work_on = [&](bool vk_side) {
    DeviceAttnWork w;
    w.layer = 3;
    w.cfg = cfg;
    DeviceMat* mats[4] = {&w.wq, &w.wk, &w.wv, &w.wo};
    for (int i = 0; i < 4; ++i) {
      *mats[i] = m[i].mat;
      mats[i]->buf = vk_side ? &m[i].vk_buf : &m[i].cpu_buf;
    }
    DeviceVec* vs[7] = {&w.bq, &w.bk, &w.bv, &w.bo, &w.q_norm, &w.k_norm, &w.sinks};
    for (int i = 0; i < 7; ++i)
      if (vecs[i].on)
        *vs[i] = DeviceVec{vk_side ? &vecs[i].vb : &vecs[i].cb, 0, static_cast<int64_t>(vecs[i].v->size())};
    return w;
  };

  std::vector<int64_t> pos(static_cast<size_t>(n_seq), 0);
  // f16 / bf16 rows: a value may round to the neighbouring f16 / bf16 (2^-10 / 2^-7 of it) where
  // K / V differ in the last f32 bits; the output then as for rounded o (f16) or within 1e-2.
  // Block types: one step of the block's largest value (q8_0 1/127, q4_0 1/8, iq4_nl the widest
  // gap of its grid 24/127 of a scale of up to 1/120 of it, fp8 E4M3's 1/8, mxfp4 E2M1's 2 of 4).
  const bool blocks = type_info(sh.kv).block_size == 32;
  const double row_tol = sh.kv == GgmlType::f32      ? 1e-5
                         : sh.kv == GgmlType::f16    ? 1e-3
                         : sh.kv == GgmlType::bf16   ? 1.0 / 128 * 1.001
                         : sh.kv == GgmlType::q8_0   ? 1.0 / 127 * 1.001
                         : sh.kv == GgmlType::iq4_nl ? 24.0 / 120 * 1.001
                         : sh.kv == GgmlType::mxfp4  ? 0.5 * 1.001
                                                     : 1.0 / 8 * 1.001;
  const double tol = sh.kv != GgmlType::f32 && sh.kv != GgmlType::f16   ? 1e-2
                     : sh.to == GgmlType::f32 && sh.kv == GgmlType::f32 ? 1e-5
                                                                        : 1e-3;
  double worst = 0.0, worst_rows = 0.0;
  for (size_t call = 0; call < sh.calls.size(); ++call) {
    std::vector<DeviceAttnSeg> cs, vs;
    int64_t n = 0;
    for (int s = 0; s < n_seq; ++s) {
      const int64_t k = sh.calls[call][static_cast<size_t>(s)];
      if (k == 0) continue;
      auto rows = [&](const DeviceBuffer& b, int64_t width) {
        if (paged)
          return DeviceRows{&b,         row_off,          width,         sh.capacity, false, sh.kv,
                            sh.rotated, tables[s].data(), sh.block_rows, stored};
        return DeviceRows{&b, 0, width, sh.capacity, sh.ring, sh.kv, sh.rotated};
      };
      const int b = buf_of(s);
      cs.push_back(DeviceAttnSeg{rows(ck[b], k_w), rows(cv[b], v_w), pos[s], n, k});
      vs.push_back(DeviceAttnSeg{rows(vk_k[b], k_w), rows(vk_v[b], v_w), pos[s], n, k});
      n += k;
    }
    const auto x = normal(static_cast<size_t>(n * d), 100 + static_cast<uint32_t>(call), 1.0f);
    std::vector<float> want(static_cast<size_t>(n * d)), got(want.size(), NAN);
    DeviceAttnWork cw = work_on(false), vw = work_on(true);
    cw.segs = cs.data();
    vw.segs = vs.data();
    cw.n_seg = vw.n_seg = static_cast<int>(cs.size());
    cw.x = vw.x = x.data();
    cw.n = vw.n = n;
    cw.out = want.data();
    vw.out = got.data();
    auto ct = cpu.run_attention(cw);
    ASSERT_TRUE(ct.ok()) << ct.message();
    auto vt = dev.run_attention(vw);
    ASSERT_TRUE(vt.ok()) << vt.message();
    ASSERT_TRUE(dev.wait(*vt).ok());

    // The caches: every row written matches; max |V| bounds |o|.
    double vmax = 0.0;
    for (int s = 0; s < n_seq; ++s) {
      const int64_t k = sh.calls[call][static_cast<size_t>(s)];
      for (int part = 0; part < 2; ++part) {
        const int64_t width = part == 0 ? k_w : v_w;
        const int b = buf_of(s);
        const DeviceBuffer& cb = part == 0 ? ck[b] : cv[b];
        const size_t bytes = row_bytes(sh.kv, width) * static_cast<size_t>(stored);
        std::vector<uint8_t> raw(bytes);
        auto t = dev.download(raw.data(), part == 0 ? vk_k[b] : vk_v[b], row_off, bytes);
        ASSERT_TRUE(t.ok() && dev.wait(*t).ok());
        std::vector<float> back(static_cast<size_t>(width * stored)), host(back.size());
        kernel_traits(sh.kv).to_float(raw.data(), back.data(), static_cast<int64_t>(back.size()));
        kernel_traits(sh.kv).to_float(cb.host + row_off, host.data(), static_cast<int64_t>(host.size()));
        if (part == 1)
          for (size_t i = 0; i < back.size(); ++i) vmax = std::max(vmax, double(std::fabs(host[i])));
        for (int64_t p = pos[s]; p < pos[s] + k; ++p) {
          const int64_t slot = slot_of(s, p);
          for (int64_t e = 0; e < width; ++e) {
            // block types: a value's step is its block's (32 values); else the row's largest value
            const int64_t b0 = blocks ? e / 32 * 32 : 0, b1 = blocks ? b0 + 32 : width;
            double big = 0.0;
            for (int64_t x = b0; x < b1; ++x) big = std::max(big, double(std::fabs(host[slot * width + x])));
            const double diff = std::fabs(double(back[slot * width + e]) - host[slot * width + e]);
            worst_rows = std::max(worst_rows, diff / big);
            ASSERT_LE(diff, row_tol * big)
                << (part == 0 ? "K" : "V") << " row " << p << " of sequence " << s << " value " << e;
          }
        }
      }
    }
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < d; ++r) {
        double mag = sh.biases ? std::fabs(bo[static_cast<size_t>(r)]) : 0.0;
        for (int64_t j = 0; j < o_w; ++j) mag += std::fabs(m[3].dq[static_cast<size_t>(r * o_w + j)]) * vmax;
        const size_t i = static_cast<size_t>(t * d + r);
        const double rel = std::fabs(double(got[i]) - want[i]) / mag;
        worst = std::max(worst, rel);
        ASSERT_LE(rel, tol) << "call " << call << " token " << t << " output " << r << ": " << got[i]
                            << " vs " << want[i];
      }
    for (int s = 0; s < n_seq; ++s) pos[s] += sh.calls[call][static_cast<size_t>(s)];
  }
  std::printf("run_attention %s on %s: worst |vulkan - cpu| / bound = %.2e, cache rows %.2e\n", sh.name,
              dev.name().c_str(), worst, worst_rows);
  for (DeviceBuffer* b : vk_bufs) dev.free(*b);
  for (DeviceBuffer* b : cpu_bufs) cpu.free(*b);
}

TEST(VulkanAttentionErrors, NameTheProblem) {
  static Result<std::unique_ptr<VulkanDevice>> opened = VulkanDevice::open();
  if (!opened.ok()) GTEST_SKIP() << "no Vulkan device: " << opened.message();
  VulkanDevice& dev = **opened;
  auto empty = dev.run_attention(DeviceAttnWork{});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("run_attention on layer 0"), std::string::npos) << empty.message();
  // A segment whose rows are not rows of the cache's width (or of a type the device does not
  // store) is refused by name.
  std::vector<uint8_t> w(static_cast<size_t>(64 * 64 * 4), 0);
  auto b = dev.import(w.data(), w.size(), "w");
  ASSERT_TRUE(b.ok()) << b.message();
  DeviceAttnWork aw;
  aw.cfg.n_embd = 64;
  aw.cfg.n_head = aw.cfg.n_head_kv = 1;
  aw.cfg.head_dim_k = aw.cfg.head_dim_v = 64;
  aw.wq = aw.wk = aw.wv = aw.wo = DeviceMat{&*b, 0, 256, 64, 64, GgmlType::f32};
  const DeviceAttnSeg seg{DeviceRows{&*b, 0, 32, 8, false}, DeviceRows{&*b, 0, 64, 8, false}, 0, 0, 1};
  std::vector<float> x(64), out(64);
  aw.segs = &seg;
  aw.n_seg = 1;
  aw.x = x.data();
  aw.n = 1;
  aw.out = out.data();
  auto rows = dev.run_attention(aw);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.message().find("segment 0's K rows"), std::string::npos) << rows.message();
  // A paged segment whose table names a block its rows do not hold.
  const int32_t table[2] = {1, 9};
  const DeviceRows pr{&*b, 0, 64, 8, false, GgmlType::f32, false, table, 4, 8};
  const DeviceAttnSeg paged{pr, pr, 4, 0, 1};
  aw.segs = &paged;
  auto bad = dev.run_attention(aw);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(
                "segment 0's K block table entry 1 (positions 4..) is block 9, outside the 2 blocks"),
            std::string::npos)
      << bad.message();
  dev.free(*b);
}

// Rows written from the same f32 values are the CPU's bytes for every KV type: identity
// projections (F32; RoPE at angle 0) make K and V the inputs exactly on both devices, and the inputs are
// blocks built to hit the converters' edges: a largest magnitude a few ulps below a power of two
// (MXFP4's floor(log2 amax), whose rounding the shader reproduces), exact ties of the E2M1 / E4M3
// grids, a negative largest value (Q4_0), a zero block, tiny values (E4M3 subnormals), and
// random blocks of magnitudes 1e-3 .. 1e3; once more Hadamard-rotated (iq4_nl, fp8).
TEST(VulkanKvRows, EveryTypeConvertsLikeTheCpu) {
  static Result<std::unique_ptr<VulkanDevice>> opened = VulkanDevice::open();
  if (!opened.ok()) {
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
    GTEST_SKIP() << "no Vulkan device: " << opened.message();
  }
  VulkanDevice& dev = **opened;
  ThreadPool pool(1);
  CpuDevice cpu(pool);
  constexpr int64_t hd = 64, n = 16;
  std::vector<float> eye(static_cast<size_t>(hd * hd), 0.0f);
  for (int64_t i = 0; i < hd; ++i) eye[static_cast<size_t>(i * hd + i)] = 1.0f;
  // x: n rows of hd values, as 32 blocks of 32.
  std::vector<float> x = normal(static_cast<size_t>(n * hd), 7, 1.0f);
  int blk = 0;
  auto block = [&]() { return x.data() + 32 * blk++; };
  for (int e : {2, 4, 8, 12, -5, -9})  // largest magnitude 2^(e+1) less k ulps
    for (int k : {1, 2, 5, 6}) {
      float* b = block();
      for (int i = 0; i < 32; ++i) b[i] = std::ldexp(b[i] * 0.3f, e);
      b[k] = std::ldexp(1.0f - static_cast<float>(k) * 0x1p-24f, e + 1) * (k % 2 ? -1.0f : 1.0f);
    }
  const float ties[16] = {6,  5,     3.5f,    2.5f, 1.75f,      1.25f,          0.75f, 0.25f,
                          -5, -2.5f, 1.0625f, 448,  0.0078125f, -0.0029296875f, 0.0f,  -0.0f};
  float* tb = block();
  for (int i = 0; i < 32; ++i) tb[i] = ties[i % 16] * (i < 16 ? 1.0f : 0.5f);
  float* nb = block();  // the largest value negative
  for (int i = 0; i < 32; ++i) nb[i] = 0.1f * static_cast<float>(i % 7) - (i == 9 ? 4.0f : 0.0f);
  std::fill_n(block(), 32, 0.0f);
  float* small = block();  // E4M3 subnormals once scaled
  for (int i = 0; i < 32; ++i) small[i] = (i == 0 ? 1.0f : std::ldexp(static_cast<float>(i), -16));
  for (const float scale : {1e-3f, 1e3f, 30.0f, 1e-2f}) {
    float* b = block();
    for (int i = 0; i < 32; ++i) b[i] *= scale;
  }
  ASSERT_EQ(blk, 32);

  auto c_eye = cpu.import(eye.data(), sizeof(float) * eye.size(), "eye");
  auto v_eye = dev.import(eye.data(), sizeof(float) * eye.size(), "eye");
  ASSERT_TRUE(c_eye.ok() && v_eye.ok());
  for (GgmlType t : {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::iq4_nl,
                     GgmlType::fp8_e4m3, GgmlType::mxfp4})
    for (bool rotated : {false, true}) {
      if (rotated && t != GgmlType::iq4_nl && t != GgmlType::fp8_e4m3) continue;
      const size_t off = t == GgmlType::fp8_e4m3 || t == GgmlType::mxfp4 ? 1 : 2;  // mid-word rows
      const size_t bytes = off + row_bytes(t, hd) * static_cast<size_t>(n);
      std::vector<DeviceBuffer> bufs;
      for (int i = 0; i < 4; ++i) {
        auto b = i < 2 ? cpu.alloc(bytes, "rows") : dev.alloc(bytes, "rows");
        ASSERT_TRUE(b.ok()) << b.message();
        bufs.push_back(*b);
      }
      std::memset(bufs[0].host, 0, bytes);
      std::memset(bufs[1].host, 0, bytes);
      DeviceAttnWork w[2];
      DeviceAttnSeg seg[2];
      std::vector<float> out[2];
      for (int d = 0; d < 2; ++d) {
        const DeviceBuffer& eb = d == 0 ? *c_eye : *v_eye;
        w[d].cfg.n_embd = hd;
        w[d].cfg.n_head = w[d].cfg.n_head_kv = 1;
        w[d].cfg.head_dim_k = w[d].cfg.head_dim_v = hd;
        w[d].cfg.scale = 0.125f;
        w[d].cfg.rope.n_rot = 2;  // θ = 0: cos 1, sin 0 leave every value as it is
        w[d].cfg.rope.freq_scale = 0.0f;
        w[d].wq = w[d].wk = w[d].wv = w[d].wo = DeviceMat{&eb, 0, sizeof(float) * hd, hd, hd, GgmlType::f32};
        seg[d] = DeviceAttnSeg{DeviceRows{&bufs[2 * d], off, hd, n, false, t, rotated},
                               DeviceRows{&bufs[2 * d + 1], off, hd, n, false, t, rotated}, 0, 0, n};
        out[d].resize(x.size());
        w[d].segs = &seg[d];
        w[d].n_seg = 1;
        w[d].x = x.data();
        w[d].n = n;
        w[d].out = out[d].data();
      }
      std::vector<uint8_t> zeros(bytes, 0);
      for (int i = 2; i < 4; ++i) {
        auto z = dev.upload(bufs[i], 0, zeros.data(), bytes);
        ASSERT_TRUE(z.ok() && dev.wait(*z).ok());
      }
      auto ct = cpu.run_attention(w[0]);
      ASSERT_TRUE(ct.ok()) << ct.message();
      auto vt = dev.run_attention(w[1]);
      ASSERT_TRUE(vt.ok()) << vt.message();
      ASSERT_TRUE(dev.wait(*vt).ok());
      for (int part = 0; part < 2; ++part) {
        std::vector<uint8_t> got(bytes);
        auto dt = dev.download(got.data(), bufs[2 + part], 0, bytes);
        ASSERT_TRUE(dt.ok() && dev.wait(*dt).ok());
        const uint8_t* want = bufs[part].host;
        const size_t bb = row_bytes(t, type_info(t).block_size);
        for (size_t i = 0; i < bytes; ++i)
          ASSERT_EQ(got[i], want[i]) << type_name(t) << (rotated ? " rotated" : "") << (part ? " V" : " K")
                                     << " rows differ at byte " << i << " (block " << (i - off) / bb << ")";
      }
      for (int i = 0; i < 4; ++i) (i < 2 ? static_cast<Device&>(cpu) : dev).free(bufs[i]);
    }
  cpu.free(*c_eye);
  dev.free(*v_eye);
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Shapes, VulkanAttention, ::testing::Values(
    Shape{"gqa_norms_biases", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true, false, false, 32,
          GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}}},
    Shape{"window_sinks_ring", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false, true, true, 8,
          GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {1, 1}}},
    Shape{"mixed_types_sinks", 64, 8, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, false, true, true, false, 24,
          GgmlType::q4_0, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, {{6, 2}, {1, 1}, {3, 9}}},
    Shape{"mxfp4_window", 64, 4, 4, 32, 32, 32, RopeStyle::rope_style_neox, 3, true, false, false, false, 16,
          GgmlType::mxfp4, GgmlType::mxfp4, GgmlType::mxfp4, GgmlType::mxfp4, {{5, 1}, {1, 4}, {2, 1}}},
    Shape{"gqa_norms_biases_f16_kv", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true, false, false,
          32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}},
          GgmlType::f16},
    Shape{"window_sinks_ring_f16_kv", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false, true,
          true, 8, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {1, 1}}, GgmlType::f16},
    Shape{"paged_gqa_norms_biases", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true, false, false,
          32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}, {9, 13}},
          GgmlType::f32, 4},
    Shape{"paged_window_sinks_f16_kv", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false, true,
          false, 32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {10, 12}}, GgmlType::f16, 4},
    Shape{"paged_mixed_types_q8_0_kv", 64, 8, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, false, true, true,
          false, 32, GgmlType::q4_0, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, {{6, 2}, {1, 1}, {3, 9}, {11, 3}},
          GgmlType::q8_0, 8},
    Shape{"paged_gqa_norms_biases_q4_0_kv", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true, false,
          false, 32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}},
          GgmlType::q4_0, 4},
    Shape{"gqa_norms_biases_q8_0_kv_rotated", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true,
          false, false, 32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}},
          GgmlType::q8_0, 0, true},
    // The other KV types: bf16 (ring and paged), iq4_nl, fp8_e4m3 and mxfp4 rows (rotated, as
    // llama.cpp stores quantized rows by default, and not), contiguous and paged.
    Shape{"window_sinks_ring_bf16_kv", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false, true,
          true, 8, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {1, 1}}, GgmlType::bf16},
    Shape{"paged_gqa_norms_biases_bf16_kv", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true, false,
          false, 32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}},
          GgmlType::bf16, 4},
    Shape{"paged_gqa_norms_biases_iq4_nl_kv_rotated", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true,
          true, false, false, 32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{7, 0}, {0, 3}, {1, 1}, {2, 5}}, GgmlType::iq4_nl, 4, true},
    Shape{"window_sinks_ring_iq4_nl_kv", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false, true,
          true, 8, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {1, 1}}, GgmlType::iq4_nl},
    Shape{"paged_window_sinks_fp8_kv_rotated", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false,
          true, false, 32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {10, 12}}, GgmlType::fp8_e4m3, 4, true},
    Shape{"gqa_norms_biases_fp8_kv", 64, 4, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, true, true, false, false,
          32, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32, {{7, 0}, {0, 3}, {1, 1}, {2, 5}},
          GgmlType::fp8_e4m3},
    Shape{"paged_mixed_types_mxfp4_kv_rotated", 64, 8, 2, 32, 32, 32, RopeStyle::rope_style_neox, 0, false, true,
          true, false, 32, GgmlType::q4_0, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0,
          {{6, 2}, {1, 1}, {3, 9}, {11, 3}}, GgmlType::mxfp4, 8, true},
    Shape{"window_sinks_ring_mxfp4_kv", 64, 4, 1, 64, 32, 16, RopeStyle::rope_style_norm, 4, false, false, true,
          true, 8, GgmlType::f32, GgmlType::f32, GgmlType::f32, GgmlType::f32,
          {{5, 0}, {1, 0}, {3, 4}, {1, 1}, {4, 5}, {1, 1}}, GgmlType::mxfp4}),
    [](const auto& info) { return std::string(info.param.name); });
// clang-format on

#endif  // STRATA_HAVE_VULKAN

}  // namespace
}  // namespace strata
