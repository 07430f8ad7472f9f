// The expert store reading a `strata pack` bundle (--expert-file): exact bytes under eviction with
// one read per expert, on both I/O backends; a bundle of another model is refused by name.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "memory/experts/expert_store.h"
#include "memory/io_test_util.h"
#include "memory/experts/pack.h"
#include "memory/store_test_util.h"

namespace strata {
namespace {

class StoreBundleTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (GetParam() == std::string("uring") && !io_uring_usable()) GTEST_SKIP() << "io_uring is not available";
  }
};

TEST_P(StoreBundleTest, OneReadPerExpertExactBytes) {
  SynthModelFile m("bundle_store", 3, 8, 2, "q8_0");
  const std::string bundle = m.path + ".strata-pack";
  auto ix = pack_write(*m.file, bundle);
  ASSERT_TRUE(ix.ok()) << ix.message();
  for (bool prefetch : {false, true}) {
    ExpertStoreOptions o;
    ExpertCatalog gguf = ExpertCatalog::build(*m.file, 3, 8).value();
    o.budget_bytes = gguf.slot_bytes() * 4;
    o.prefetch = prefetch;
    o.io_backend = GetParam();
    o.io_depth = 3;
    o.expert_file = bundle;
    auto s = ExpertStore::open(*m.file, 3, 8, 2, o, std::make_unique<TestLru>());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ((*s)->info().backing_path, bundle);
    EXPECT_EQ((*s)->catalog().slot_bytes(), ix->experts[0].padded_size());  // one blob per slot
    StoreDriver d(**s, *m.file, 3, 8, 2, 17);
    for (int step = 0; step < 25; ++step) ASSERT_TRUE(d.step());
    const ExpertTotals t = (*s)->stats().totals();
    ASSERT_GT(t.reads, 0u);
    EXPECT_EQ(t.bytes_read, t.reads * gguf.expert_bytes(0)) << "one blob (gate+up+down) per read";
  }
  std::remove(bundle.c_str());
}

TEST_P(StoreBundleTest, BundleOfAnotherModelIsRefused) {
  SynthModelFile a("bundle_a", 3, 8, 2, "q8_0"), b("bundle_b", 2, 8, 2, "q8_0");
  const std::string bundle = b.path + ".strata-pack";
  ASSERT_TRUE(pack_write(*b.file, bundle).ok());
  ExpertStoreOptions o;
  o.budget_bytes = 64 << 20;
  o.io_backend = GetParam();
  o.expert_file = bundle;
  auto s = ExpertStore::open(*a.file, 3, 8, 2, o, std::make_unique<TestLru>());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(bundle), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("different file"), std::string::npos) << s.message();
  o.expert_file = "/nonexistent/x.strata-pack";
  auto s2 = ExpertStore::open(*a.file, 3, 8, 2, o, std::make_unique<TestLru>());
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("/nonexistent/x.strata-pack"), std::string::npos) << s2.message();
  std::remove(bundle.c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreBundleTest, ::testing::Values("uring", "threads", "sync"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace strata
