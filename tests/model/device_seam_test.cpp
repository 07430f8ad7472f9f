// The device seam from the model's side: an expert source that places every odd expert of every
// layer on a second device (its bytes uploaded into that device's buffers; the host sees no view of
// them) gives logits bit-identical to the plain forward, for a prompt in one batch and token by
// token, on fixture models of three MoE architectures (qwen3moe Q4_0, gpt-oss MXFP4 with expert
// biases, deepseek4 MXFP4 with its shared expert and clamped SwiGLU): the MoE loop hands those
// experts to the device and nothing else changes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstring>
#include <span>
#include <map>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "format/tensor_names.h"
#include "kernels/cpu_device.h"
#include "kv/kv_pool.h"
#include "model/arch.h"
#include "model/arch_chunks.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/synth.h"

namespace strata {
namespace {

// A device that counts the work it is handed (and otherwise is the CPU device; host_visible false:
// one whose memory the process cannot address, as a GPU's).
class CountingDevice final : public Device {
 public:
  explicit CountingDevice(ThreadPool& pool, bool host_visible = true) : cpu_(pool, "CPU1", 0, host_visible) {}
  const std::string& name() const override { return cpu_.name(); }
  DeviceKind kind() const override { return cpu_.kind(); }
  DeviceMemory memory() const override { return cpu_.memory(); }
  Result<DeviceBuffer> alloc(size_t bytes, std::string_view what) override { return cpu_.alloc(bytes, what); }
  Result<DeviceBuffer> import(const void* host, size_t bytes, std::string_view what) override {
    ++imports;
    return cpu_.import(host, bytes, what);
  }
  void free(DeviceBuffer& b) override { cpu_.free(b); }
  Result<DeviceTicket> upload(const DeviceBuffer& d, size_t o, const void* s, size_t n) override {
    return cpu_.upload(d, o, s, n);
  }
  Result<DeviceTicket> download(void* d, const DeviceBuffer& s, size_t o, size_t n) override {
    return cpu_.download(d, s, o, n);
  }
  Result<DeviceTicket> run_experts(const DeviceExpertWork& w) override {
    ++calls;
    experts += w.n_run;
    return cpu_.run_experts(w);
  }
  Result<DeviceTicket> run_attention(const DeviceAttnWork& w) override {
    ++attention;
    return cpu_.run_attention(w);
  }
  Result<DeviceTicket> run_sparse_attention(const DeviceSparseAttnWork& w) override {
    ++sparse;
    return cpu_.run_sparse_attention(w);
  }
  Result<DeviceTicket> run_ffn(const DeviceFfnWork& w) override {
    ++ffn;
    return cpu_.run_ffn(w);
  }
  Result<DeviceTicket> run_linear(const DeviceLinearWork& w) override {
    ++linear;
    return cpu_.run_linear(w);
  }
  bool reached(DeviceTicket t) const override { return cpu_.reached(t); }
  Status wait(DeviceTicket t) override { return cpu_.wait(t); }
  int64_t calls = 0, experts = 0, imports = 0, attention = 0, sparse = 0, ffn = 0, linear = 0;

 private:
  CpuDevice cpu_;
};

// Odd experts on `dev` (copied into its buffers at construction), even ones from the file.
class OddExpertsOnDevice final : public ExpertSource {
 public:
  OddExpertsOnDevice(const GgufFile& f, int n_layer, Device& dev) : dev_(dev) {
    for (int l = 0; l < n_layer; ++l) {
      const TensorView* p[kRoutedExpertParts];
      bool all = true;
      for (int i = 0; i < kRoutedExpertParts; ++i) {
        p[i] = f.find_tensor(blk_name(l, kRoutedExpertPartNames[i]));
        all = all && p[i] != nullptr;
      }
      if (!all) continue;
      for (int i = 0; i < kRoutedExpertParts; ++i) parts_[l][i] = *p[i];
      for (int64_t e = 1; e < p[0]->ne[2]; e += 2) {
        size_t bytes = 0;
        for (const TensorView* t : p) bytes += t->nb[2];
        auto b = dev.alloc(bytes, "expert");
        if (!b.ok()) {
          ADD_FAILURE() << b.message();
          return;
        }
        Placed& pl = placed_[{l, static_cast<int>(e)}];
        pl.buf = *b;
        size_t o = 0;
        DeviceMat* m[kRoutedExpertParts] = {&pl.mats.gate, &pl.mats.up, &pl.mats.down};
        for (int i = 0; i < kRoutedExpertParts; ++i) {
          const TensorView& t = *p[i];
          auto tk = dev.upload(pl.buf, o, t.row(0, e), t.nb[2]);
          EXPECT_TRUE(tk.ok() && dev.wait(*tk).ok());
          *m[i] = DeviceMat{nullptr, o, t.nb[1], t.ne[0], t.ne[1], t.type};
          o += t.nb[2];
        }
        uploaded += bytes;
      }
    }
    for (auto& [key, pl] : placed_) pl.mats.gate.buf = pl.mats.up.buf = pl.mats.down.buf = &pl.buf;
  }
  ~OddExpertsOnDevice() override {
    for (auto& [key, pl] : placed_) dev_.free(pl.buf);
  }
  void begin_step(int64_t) override {}
  void end_step() override {}
  void on_route(int, const float*, int64_t, const int32_t*, const float*, int) override {}
  Result<ExpertViews> acquire(int layer, int e) override {
    ExpertViews v;
    auto it = placed_.find({layer, e});
    if (it != placed_.end()) {
      v.device = &dev_;
      v.on_device = it->second.mats;  // v.gate / up / down stay empty: the host cannot compute it
      return v;
    }
    v.gate = parts_.at(layer)[0].slice2d(e);
    v.up = parts_.at(layer)[1].slice2d(e);
    v.down = parts_.at(layer)[2].slice2d(e);
    return v;
  }
  void release(int, int) override {}
  uint64_t uploaded = 0;

 private:
  struct Placed {
    DeviceBuffer buf;
    DeviceExpert mats;
  };
  Device& dev_;
  std::map<int, TensorView[kRoutedExpertParts]> parts_;
  std::map<std::pair<int, int>, Placed> placed_;
};

std::vector<float> run(const Architecture& arch, Device& host, ExpertSource* src,
                       const std::vector<int32_t>& tokens, int chunk, ThreadPool& pool) {
  StateOptions so;
  so.n_ctx = 64;
  so.experts = src;
  so.device = &host;
  return testing::forward_chunks(arch, tokens, chunk, pool, so);
}

// "tiny-qwen3moe-Q4_0.gguf" → "qwen3moe_Q4_0"
std::string fixture_test_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  s = s.substr(5, s.size() - 10);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

class DeviceSeam : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceSeam, OddExpertsOnASecondDeviceKeepEveryBit) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto f = GgufFile::open(dir + "/models/" + GetParam());
  ASSERT_TRUE(f.ok()) << f.message();
  auto arch_name = (*f)->get_string("general.architecture");
  ASSERT_TRUE(arch_name.ok()) << arch_name.message();
  const ArchEntry* entry = arch_find(*arch_name);
  ASSERT_NE(entry, nullptr);
  ThreadPool pool(2);
  CpuDevice host(pool);  // before the architecture: it frees its buffers on it
  auto arch = entry->make(**f);
  ASSERT_TRUE(arch.ok()) << arch.message();
  const HParams& hp = (*arch)->hparams();
  ASSERT_TRUE((*arch)->place(host).ok());
  CountingDevice dev(pool);
  OddExpertsOnDevice src(**f, hp.n_layer, dev);
  ASSERT_GT(src.uploaded, 0u);
  EXPECT_EQ(dev.memory().allocated, src.uploaded);

  std::vector<int32_t> tokens(12);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % hp.n_vocab);
  const int n = static_cast<int>(tokens.size());
  for (int chunk : {n, 1}) {
    const auto ref = run(**arch, host, nullptr, tokens, chunk, pool);
    const int64_t before = dev.experts;
    const auto got = run(**arch, host, &src, tokens, chunk, pool);
    EXPECT_GT(dev.experts, before) << "no expert reached the device";
    EXPECT_EQ(std::memcmp(ref.data(), got.data(), sizeof(float) * ref.size()), 0)
        << GetParam() << ": experts on the device changed the logits (chunk " << chunk << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeviceSeam,
                         ::testing::Values("tiny-qwen3moe-Q4_0.gguf", "tiny-gpt-oss-MXFP4.gguf",
                                           "tiny-deepseek4-MXFP4_MOE.gguf"),
                         fixture_test_name);

// The standard decoders' layer ops through a device whose memory the process cannot address: the
// weights are copies in its buffers, the KV caches live there, and every layer's attention and
// the output head go through its queue — the logits keep every bit of the default CPU device's,
// prefill and token by token, so model/ reads those weights and caches only through the seam.
class DecoderOnDevice : public ::testing::TestWithParam<const char*> {};

// pool: the session's K / V in a paged KV pool on the model's device (blocks of 5 positions).
std::vector<float> eval_all(const Model& m, const std::vector<int32_t>& tokens, int chunk,
                            KvPool* pool = nullptr) {
  const int V = m.n_vocab(), n = static_cast<int>(tokens.size());
  std::vector<float> out(static_cast<size_t>(n) * V);
  auto s = m.new_session({.n_ctx = 64, .n_batch = chunk, .kv_pool = pool});
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return out;
  for (int i = 0; i < n; i += chunk) {
    const int k = std::min(chunk, n - i);
    if (pool) {
      EXPECT_TRUE(pool->reserve(*(*s)->kv_blocks(), i + k).ok());
    }
    const Status st =
        (*s)->eval(std::span<const int32_t>(tokens.data() + i, k), out.data() + size_t(i) * V, true);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

void expect_hidden_device_same_bits(const std::string& path) {
  auto ref = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(ref.ok()) << ref.message();
  ThreadPool pool(2);
  CountingDevice dev(pool, /*host_visible=*/false);
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = &dev;
  auto m = Model::load(path, lo);
  ASSERT_TRUE(m.ok()) << m.message();
  const HParams& hp = (*m)->hparams();
  EXPECT_GT(dev.imports, 4 * hp.n_layer);
  EXPECT_GT(dev.memory().allocated, 0u);  // imports are copies on a device of its own
  EXPECT_EQ(dev.memory().imported, 0u);

  std::vector<int32_t> tokens(12);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % hp.n_vocab);
  const int n = static_cast<int>(tokens.size());
  for (int chunk : {n, 1}) {
    const int64_t att = dev.attention, lin = dev.linear;
    const auto want = eval_all(**ref, tokens, chunk);
    const auto got = eval_all(**m, tokens, chunk);
    const int64_t steps = (n + chunk - 1) / chunk;
    EXPECT_EQ(dev.attention - att, steps * hp.n_layer);
    EXPECT_EQ(dev.linear - lin, steps);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
        << path << ": the hidden-memory device changed the logits (chunk " << chunk << ")";
    // Paged KV on that device: the block table travels with the rows (DeviceRows).
    auto kp = KvPool::create((*m)->arch().kv_spec(), dev, {.budget_bytes = 16 << 20, .block_size = 5});
    ASSERT_TRUE(kp.ok()) << kp.message();
    const auto paged = eval_all(**m, tokens, chunk, kp->get());
    EXPECT_EQ(std::memcmp(want.data(), paged.data(), sizeof(float) * want.size()), 0)
        << path << ": paged KV on the hidden-memory device changed the logits (chunk " << chunk << ")";
  }
  if (hp.n_expert == 0) {
    EXPECT_EQ(dev.ffn, dev.attention);  // dense: one FFN per attention
  }
}

TEST_P(DecoderOnDevice, HiddenMemoryKeepsEveryBit) {
  STRATA_REQUIRE_FIXTURES(dir);
  expect_hidden_device_same_bits(dir + "/models/" + GetParam());
}

TEST(DecoderOnDevice, DenseLlamaHiddenMemoryKeepsEveryBit) {
  SynthSpec s;
  s.arch = "llama";
  s.n_layer = 2;
  s.n_embd = 64;
  s.ffn = 128;
  s.n_vocab = 300;
  s.type = "f16";
  s.n_threads = 1;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("strata_dense_device_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  auto r = synth_write(s, path);
  ASSERT_TRUE(r.ok()) << r.message();
  expect_hidden_device_same_bits(path);
  std::filesystem::remove(path);
}

// deepseek4 runs every dense projection (run_linear) and each layer's attention core
// (run_sparse_attention) through the device, and its sessions keep their window and compressed
// rows there: on a device whose memory the host cannot address (any host read or write of those
// rows would fail its RowCache's assert) the logits keep every bit, each step submits the same
// number of projections (at least q_a, q_b, kv, an output group, output_b and the router per
// layer, plus the head) and one attention op per layer.
class Deepseek4OnDevice : public ::testing::TestWithParam<const char*> {};

TEST_P(Deepseek4OnDevice, HiddenMemoryKeepsEveryBit) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string path = dir + "/models/" + GetParam();
  auto ref = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(ref.ok()) << ref.message();
  ThreadPool pool(2);
  CountingDevice dev(pool, /*host_visible=*/false);
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = &dev;
  auto m = Model::load(path, lo);
  ASSERT_TRUE(m.ok()) << m.message();
  const HParams& hp = (*m)->hparams();
  EXPECT_GE(dev.imports, 6 * hp.n_layer + 1);
  EXPECT_EQ(dev.memory().imported, 0u);
  std::vector<int32_t> tokens(12);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % hp.n_vocab);
  const int n = static_cast<int>(tokens.size());
  // a session's window and compressed rows are buffers of the device
  uint64_t rows_bytes = 0;
  for (const KvLayerSpec& l : (*m)->arch().kv_spec().layers)
    for (const KvPartSpec& part : l.parts)
      if (part.kind == KvPartKind::window || part.kind == KvPartKind::compressed)
        rows_bytes += sizeof(float) * static_cast<uint64_t>(part.width * part.rows(64, 4));
  const uint64_t before = dev.memory().allocated;
  {
    auto s = (*m)->new_session({.n_ctx = 64, .n_batch = 4});
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(dev.memory().allocated - before, rows_bytes);
  }
  EXPECT_EQ(dev.memory().allocated, before);
  int64_t per_step = -1;
  for (int chunk : {n, 1, 5}) {
    const int64_t lin = dev.linear, sparse = dev.sparse;
    const auto want = eval_all(**ref, tokens, chunk);
    const auto got = eval_all(**m, tokens, chunk);
    const int64_t steps = (n + chunk - 1) / chunk, ops = dev.linear - lin;
    EXPECT_EQ(dev.sparse - sparse, steps * hp.n_layer) << "chunk " << chunk;
    EXPECT_EQ(ops % steps, 0) << "chunk " << chunk;
    if (per_step < 0) per_step = ops / steps;
    EXPECT_EQ(ops / steps, per_step) << "chunk " << chunk;
    EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
        << path << ": the hidden-memory device changed the logits (chunk " << chunk << ")";
  }
  EXPECT_GE(per_step, 6 * hp.n_layer + 1);
  EXPECT_EQ(dev.attention, 0);  // the standard attention block is not deepseek4's
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Deepseek4OnDevice,
                         ::testing::Values("tiny-deepseek4-f32.gguf", "tiny-deepseek4-MXFP4_MOE.gguf"),
                         fixture_test_name);

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderOnDevice,
                         ::testing::Values("tiny-qwen3moe-Q4_0.gguf", "tiny-gpt-oss-MXFP4.gguf",
                                           "tiny-llama-moe-Q8_0.gguf", "tiny-qwen2moe-Q8_0.gguf"),
                         fixture_test_name);

}  // namespace
}  // namespace strata
