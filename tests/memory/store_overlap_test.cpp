// The expert store with a budget: dense weights copied into anonymous RAM (same addresses, same
// bytes, all resident, no longer the file's pages), and wait_any() handing out a layer's misses in
// the order their reads complete, never in a fixed order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "memory/experts/expert_store.h"
#include "memory/io_test_util.h"
#include "memory/tier/mem_resident.h"
#include "memory/store_test_util.h"

namespace strata {
namespace {

class StoreOverlap : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new SynthModelFile("store_overlap", 3, 8, 2, "q8_0"); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static SynthModelFile* model_;
  const GgufFile& f() { return *model_->file; }
  ExpertStoreOptions options(int slots) {
    ExpertStoreOptions o;
    ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
    o.budget_bytes = c.slot_bytes() * static_cast<uint64_t>(slots);
    o.io_backend = "threads";
    o.io_threads = 2;
    o.io_depth = 4;
    return o;
  }
};
SynthModelFile* StoreOverlap::model_ = nullptr;

// The /proc/self/maps line of the mapping holding address p ("" if none).
std::string maps_line(const void* p) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && a >= lo && a < hi) return line;
  }
  return "";
}

bool is_dense(const TensorView& t) {
  return t.nbytes > 0 && t.name.find("_exps.") == std::string::npos;
}

TEST_F(StoreOverlap, DenseWeightsAreLoadedIntoAnonymousRam) {
  // A private copy of every dense tensor, and where the file mapping had it.
  std::vector<std::vector<uint8_t>> want;
  uint64_t dense = 0;
  for (const TensorView& t : f().tensors()) {
    if (!is_dense(t)) continue;
    const uint8_t* p = static_cast<const uint8_t*>(t.data);
    want.emplace_back(p, p + t.nbytes);
    dense += t.nbytes;
  }
  ASSERT_GT(want.size(), 3u);
  const TensorView* embd = f().find_tensor("token_embd.weight");
  ASSERT_TRUE(embd);
  ExpertStoreOptions o = options(4);
  o.dense_resident = false;  // mapping kept: the dense pages are the file's
  {
    auto s = ExpertStore::open(f(), 3, 8, 2, o, std::make_unique<TestLru>());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ((*s)->dense_loaded_bytes(), 0u);
    EXPECT_NE(maps_line(embd->data).find(model_->path), std::string::npos) << maps_line(embd->data);
  }
  o.dense_resident = true;
  auto s = ExpertStore::open(f(), 3, 8, 2, o, std::make_unique<TestLru>());
  ASSERT_TRUE(s.ok()) << s.message();
  // Whole pages, each dense tensor in full; pages shared with expert tensors come along.
  const uint64_t loaded = (*s)->dense_loaded_bytes();
  EXPECT_GE(loaded, dense);
  EXPECT_EQ(loaded % kIoAlign, 0u);
  EXPECT_LE(loaded, dense + 2 * kIoAlign * want.size());
  size_t i = 0;
  for (const TensorView& t : f().tensors()) {
    if (!is_dense(t)) continue;
    // Same address, same bytes, resident, and no longer a mapping of the model file.
    EXPECT_EQ(std::memcmp(t.data, want[i].data(), t.nbytes), 0) << t.name;
    const uintptr_t p = reinterpret_cast<uintptr_t>(t.data);
    EXPECT_EQ(mem_resident_bytes(t.data, t.nbytes), io_align_up(p + t.nbytes) - io_align_down(p)) << t.name;
    EXPECT_EQ(maps_line(t.data).find(model_->path), std::string::npos) << t.name << ": " << maps_line(t.data);
    ++i;
  }
  // The experts are still read right (their pages of the mapping are untouched).
  StoreDriver d(**s, f(), 3, 8, 2, 3);
  for (int step = 0; step < 10; ++step) ASSERT_TRUE(d.step()) << "step " << step;
}

TEST_F(StoreOverlap, DenseLoadOfAChangedFileIsAnError) {
  TempFile other(4096 * 3, 9);
  auto io = io_open_file(other.path, true);
  ASSERT_TRUE(io.ok()) << io.message();
  auto r = gguf_load_dense_resident(f(), **io);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find(other.path), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("bytes"), std::string::npos) << r.message();
}

// Reads at one file range take `delay` (threads backend: the reader thread sleeps).
class SlowFile final : public IoFile {
 public:
  SlowFile(std::unique_ptr<IoFile> in, uint64_t lo, uint64_t hi, std::chrono::milliseconds delay)
      : in_(std::move(in)), lo_(lo), hi_(hi), delay_(delay) {}
  const std::string& path() const override { return in_->path(); }
  bool direct() const override { return in_->direct(); }
  uint64_t opened_size() const override { return in_->opened_size(); }
  Result<uint64_t> current_size() override { return in_->current_size(); }
  int64_t pread(void* dst, size_t len, uint64_t off) override {
    if (off < hi_ && off + len > lo_) std::this_thread::sleep_for(delay_);
    return in_->pread(dst, len, off);
  }
  void drop_cache(uint64_t off, size_t len) override { in_->drop_cache(off, len); }

 private:
  std::unique_ptr<IoFile> in_;
  uint64_t lo_, hi_;
  std::chrono::milliseconds delay_;
};

TEST_F(StoreOverlap, WaitAnyHandsOutReadsAsTheyComplete) {
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  // Expert 1 of layer 0 is slow to read; expert 5 is not.
  const uint64_t lo = io_align_down(c.part_offset(0, 1, expert_part_gate));
  const uint64_t hi = c.part_offset(0, 1, expert_part_gate) + c.part_bytes(0, expert_part_gate);
  auto opener = [&](const std::string& path, bool direct) -> Result<std::unique_ptr<IoFile>> {
    STRATA_ASSIGN(auto inner, io_open_file(path, direct));
    return std::unique_ptr<IoFile>(new SlowFile(std::move(inner), lo, hi, std::chrono::milliseconds(300)));
  };
  ExpertStoreOptions o = options(4);
  auto s = ExpertStore::open(f(), 3, 8, 2, o, std::make_unique<TestLru>(), opener);
  ASSERT_TRUE(s.ok()) << s.message();
  ExpertStore& st = **s;
  st.begin_step(1);
  int32_t sel[2] = {1, 5};
  const float w[2] = {0.5f, 0.5f};
  std::vector<float> x(64, 0.1f);
  st.on_route(0, x.data(), 1, sel, w, 2);  // prefetch on: both reads start now
  EXPECT_FALSE(st.ready(0, 1));
  const auto t0 = std::chrono::steady_clock::now();
  const int first = st.wait_any(0, sel, 2);
  EXPECT_EQ(first, 1) << "the fast read (expert 5) must be handed out first";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  auto v5 = st.acquire(0, 5);
  ASSERT_TRUE(v5.ok()) << v5.message();
  EXPECT_TRUE(views_match(*v5, c, 0, 5));
  st.release(0, 5);
  const int second = st.wait_any(0, sel, 1);  // expert 1 alone: waits for its read
  EXPECT_EQ(second, 0);
  EXPECT_TRUE(st.ready(0, 1));
  auto v1 = st.acquire(0, 1);
  ASSERT_TRUE(v1.ok()) << v1.message();
  EXPECT_TRUE(views_match(*v1, c, 0, 1));
  st.release(0, 1);
  st.end_step();
  EXPECT_GT(st.stats().totals().stall_s, 0.05);  // the wait for expert 1 is stall time
  // An expert with no read under way (prefetch off: nothing started) is handed out at once:
  // acquire() starts its read itself.
  o.prefetch = false;
  auto naive = ExpertStore::open(f(), 3, 8, 2, o, std::make_unique<TestLru>());
  ASSERT_TRUE(naive.ok()) << naive.message();
  (*naive)->begin_step(1);
  sel[0] = 2;
  sel[1] = 3;
  (*naive)->on_route(1, x.data(), 1, sel, w, 2);
  EXPECT_EQ((*naive)->wait_any(1, sel, 2), 0);
  (*naive)->end_step();
}

}  // namespace
}  // namespace strata
