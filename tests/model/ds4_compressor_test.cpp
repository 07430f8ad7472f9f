// Compressors vs double-precision pooling written from deepseek-v4.md §2.3.2-2.3.3, and the
// decode-time rolling state vs the whole-sequence result (must be bit-identical).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/deepseek4/ds4_compressor.h"
#include "model/ds4_test_util.h"

namespace strata::ds4 {
namespace {

using testing::max_rel_err;
using testing::randn;

// Entry j, channel ch: softmax over candidate tokens of score, weighted sum of kv.
std::vector<double> ref_compress(int ratio, int width, bool overlap, const std::vector<float>& a,
                                 const std::vector<float>& b, int T) {
  const int cw = overlap ? 2 * width : width;
  const int nb = T / ratio;
  std::vector<double> out(size_t(nb) * width);
  for (int j = 0; j < nb; ++j) {
    for (int ch = 0; ch < width; ++ch) {
      std::vector<double> s, v;
      if (overlap && j > 0) {  // first halves of the previous block
        for (int i = 0; i < ratio; ++i) {
          const int t = (j - 1) * ratio + i;
          s.push_back(b[t * cw + ch]);
          v.push_back(a[t * cw + ch]);
        }
      }
      for (int i = 0; i < ratio; ++i) {  // second halves (overlap) / the channel (plain)
        const int t = j * ratio + i;
        const int c = overlap ? width + ch : ch;
        s.push_back(b[t * cw + c]);
        v.push_back(a[t * cw + c]);
      }
      double mx = -1e300, den = 0, num = 0;
      for (double x : s) mx = std::max(mx, x);
      for (size_t k = 0; k < s.size(); ++k) {
        den += std::exp(s[k] - mx);
        num += std::exp(s[k] - mx) * v[k];
      }
      out[size_t(j) * width + ch] = num / den;
    }
  }
  return out;
}

struct Case {
  int ratio, width;
  bool overlap;
  int T;
};

class Ds4Compressor : public ::testing::TestWithParam<Case> {};

TEST_P(Ds4Compressor, SequenceMatchesDoubleReference) {
  const Case c = GetParam();
  CompressorShape s{c.ratio, c.width, c.overlap};
  auto a = randn(size_t(c.T) * s.in_width(), 1);
  auto b = randn(size_t(c.T) * s.in_width(), 2, 2.0f);
  std::vector<float> out(size_t(c.T / c.ratio) * c.width);
  const int64_t nb = compress_sequence(s, a.data(), b.data(), c.T, out.data());
  ASSERT_EQ(nb, c.T / c.ratio);
  auto ref = ref_compress(c.ratio, c.width, c.overlap, a, b, c.T);
  EXPECT_LT(max_rel_err(out.data(), ref.data(), out.size()), 2e-6);
}

TEST_P(Ds4Compressor, TokenByTokenStateEqualsSequenceExactly) {
  const Case c = GetParam();
  CompressorShape s{c.ratio, c.width, c.overlap};
  const int cw = s.in_width();
  auto a = randn(size_t(c.T) * cw, 3);
  auto b = randn(size_t(c.T) * cw, 4, 2.0f);
  std::vector<float> batch(size_t(c.T / c.ratio) * c.width);
  compress_sequence(s, a.data(), b.data(), c.T, batch.data());
  RowCache rows(s.state_width(), s.state_rows(), /*ring=*/false);
  CompressorState st(s, &rows);
  std::vector<float> entry(c.width);
  int64_t n_out = 0;
  for (int t = 0; t < c.T; ++t) {
    const bool done = st.push(t, a.data() + size_t(t) * cw, b.data() + size_t(t) * cw, entry.data());
    ASSERT_EQ(done, (t + 1) % c.ratio == 0) << "pos " << t;
    if (!done) continue;
    ASSERT_EQ(std::memcmp(entry.data(), batch.data() + n_out * c.width, sizeof(float) * c.width), 0)
        << "entry " << n_out << " differs between incremental and batch";
    ++n_out;
  }
  EXPECT_EQ(n_out, c.T / c.ratio);
  EXPECT_EQ(st.bytes(), size_t(s.state_rows()) * cw * 2 * sizeof(float));
  // reset() forgets the sequence: feeding it again gives the same entries.
  if (c.T < c.ratio) return;
  st.reset();
  for (int t = 0; t < c.ratio; ++t)
    st.push(t, a.data() + size_t(t) * cw, b.data() + size_t(t) * cw, entry.data());
  EXPECT_EQ(std::memcmp(entry.data(), batch.data(), sizeof(float) * c.width), 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Ds4Compressor,
                         ::testing::Values(Case{4, 64, true, 4 * 21 + 3},       // CSA, tiny head
                                           Case{4, 16, true, 5},                // one block + 1 token
                                           Case{4, 64, true, 3},                // no complete block
                                           Case{128, 24, false, 128 * 2 + 61},  // HCA
                                           Case{128, 8, false, 127}));

TEST(Ds4CompressorBlock0, UsesOnlyTheCurrentBlocksSecondHalves) {
  // Block 0 of the overlapping compressor has no previous block: its entry must not depend on
  // the first-half channels of its own tokens.
  CompressorShape s{4, 8, true};
  auto a = randn(4 * 16, 5);
  auto b = randn(4 * 16, 6);
  std::vector<float> e0(8), e1(8);
  compress_sequence(s, a.data(), b.data(), 4, e0.data());
  for (int t = 0; t < 4; ++t)
    for (int ch = 0; ch < 8; ++ch) {
      a[t * 16 + ch] += 100.0f;
      b[t * 16 + ch] -= 50.0f;
    }
  compress_sequence(s, a.data(), b.data(), 4, e1.data());
  for (int ch = 0; ch < 8; ++ch) EXPECT_EQ(e0[ch], e1[ch]);
}

TEST(Ds4CompressorFinish, NormThenRopeAtBlockStart) {
  CompressorShape s{4, 32, true};
  auto e = randn(32, 9);
  auto w = testing::uniform(32, 10, 0.5f, 1.5f);
  RopeParams rp = rope_plain(8, 10000.0f);
  std::vector<float> got = e;
  compressor_finish(s, w.data(), 1e-6f, rp, /*block=*/5, got.data());
  // reference: RMSNorm in double, then rotate the last 8 dims at position 20 (= 5 * 4)
  double ss = 0;
  for (float x : e) ss += double(x) * x;
  const double inv = 1.0 / std::sqrt(ss / 32 + 1e-6);
  std::vector<double> ref(32);
  for (int i = 0; i < 32; ++i) ref[i] = e[i] * inv * w[i];
  for (int i = 0; i < 4; ++i) {
    const double th = 20.0 * std::pow(10000.0, -2.0 * i / 8);
    const double x0 = ref[24 + 2 * i], x1 = ref[25 + 2 * i];
    ref[24 + 2 * i] = x0 * std::cos(th) - x1 * std::sin(th);
    ref[25 + 2 * i] = x0 * std::sin(th) + x1 * std::cos(th);
  }
  EXPECT_LT(max_rel_err(got.data(), ref.data(), 32), 1e-5);
}

TEST(Ds4CompressorVisibility, EntryVisibleFromItsLastToken) {
  EXPECT_EQ(compressed_visible(0, 4), 0);
  EXPECT_EQ(compressed_visible(2, 4), 0);
  EXPECT_EQ(compressed_visible(3, 4), 1);  // block 0 = tokens 0..3, visible at 3
  EXPECT_EQ(compressed_visible(7, 4), 2);
  EXPECT_EQ(compressed_visible(126, 128), 0);
  EXPECT_EQ(compressed_visible(127, 128), 1);
  EXPECT_EQ(compressed_visible(319, 128), 2);
}

}  // namespace
}  // namespace strata::ds4
