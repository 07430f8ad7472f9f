#include "model/deepseek_v41/v41_ckpt_quant.h"

#include <cmath>
#include <cstring>

#include "quant/fp8_fp4.h"
#include "quant/qtypes.h"

namespace strata::v41 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

Status expect(const StTensor& t, StDtype dtype, const std::vector<int64_t>& shape, const std::string& where,
              const char* role) {
  if (t.dtype == dtype && t.shape == shape) return {};
  StTensor e;
  e.dtype = dtype;
  e.shape = shape;
  return err("%s: %s '%s': expected %s, got %s", where.c_str(), role, t.name.c_str(),
             e.shape_string().c_str(), t.shape_string().c_str());
}

}  // namespace

std::string scale_name_of(const std::string& weight_name) {
  static const std::string kSuffix = ".weight";
  if (weight_name.size() > kSuffix.size() &&
      weight_name.compare(weight_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return weight_name.substr(0, weight_name.size() - kSuffix.size()) + ".scale";
  return weight_name + ".scale";
}

Status dequant_fp8_blocks(const StTensor& w, const StTensor& scale, int64_t out, int64_t in, int block_r,
                          int block_c, const std::string& where, std::vector<float>* dst) {
  if (block_r <= 0 || block_c <= 0)
    return err("%s: FP8 block size %dx%d must be positive", where.c_str(), block_r, block_c);
  STRATA_TRY(expect(w, StDtype::f8_e4m3, {out, in}, where, "FP8 weight"));
  const int64_t sr = ceil_div(out, block_r), sc = ceil_div(in, block_c);
  STRATA_TRY(expect(scale, StDtype::f8_e8m0, {sr, sc}, where, "FP8 block scale"));
  dst->resize(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < out; ++r) {
    const uint8_t* srow = scale.data + (r / block_r) * sc;
    for (int64_t c = 0; c < in; ++c) {
      const float v = e4m3_to_f32(w.data[r * in + c]) * ue8m0_to_f32(srow[c / block_c]);
      if (!std::isfinite(v))
        return err("%s: FP8 weight '%s' decodes to a non-finite value at [%lld, %lld]", where.c_str(),
                   w.name.c_str(), static_cast<long long>(r), static_cast<long long>(c));
      (*dst)[static_cast<size_t>(r * in + c)] = v;
    }
  }
  return {};
}

// An FP4 weight [out][in/2] (E2M1 pairs) and its UE8M0 scales [out][in/32], as the checkpoint holds them.
static Status check_fp4(const StTensor& w, const StTensor& scale, int64_t out, int64_t in,
                        const std::string& where) {
  if (in % 32 != 0)
    return err("%s: FP4 weight '%s': %lld columns is not a multiple of 32", where.c_str(), w.name.c_str(),
               static_cast<long long>(in));
  if (w.dtype != StDtype::i8 && w.dtype != StDtype::u8)
    return err("%s: FP4 weight '%s': expected I8 or U8 [%lld, %lld] (E2M1 pairs), got %s", where.c_str(),
               w.name.c_str(), static_cast<long long>(out), static_cast<long long>(in / 2),
               w.shape_string().c_str());
  STRATA_TRY(expect(w, w.dtype, {out, in / 2}, where, "FP4 weight"));
  STRATA_TRY(expect(scale, StDtype::f8_e8m0, {out, in / 32}, where, "FP4 scale"));
  return {};
}

Status dequant_fp4_mx(const StTensor& w, const StTensor& scale, int64_t out, int64_t in,
                      const std::string& where, std::vector<float>* dst) {
  STRATA_TRY(check_fp4(w, scale, out, in, where));
  dst->resize(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t c = 0; c < in; c += 2) {
      const uint8_t b = w.data[(r * in + c) / 2];
      const float s = ue8m0_to_f32(scale.data[r * (in / 32) + c / 32]);
      if (!std::isfinite(s))
        return err("%s: FP4 scale '%s' is NaN at [%lld, %lld]", where.c_str(), scale.name.c_str(),
                   static_cast<long long>(r), static_cast<long long>(c / 32));
      (*dst)[static_cast<size_t>(r * in + c)] = e2m1_to_f32(static_cast<uint8_t>(b & 15)) * s;
      (*dst)[static_cast<size_t>(r * in + c + 1)] = e2m1_to_f32(static_cast<uint8_t>(b >> 4)) * s;
    }
  }
  return {};
}

Status fp4_to_mxfp4(const StTensor& w, const StTensor& scale, int64_t out, int64_t in,
                    const std::string& where, uint8_t* dst) {
  STRATA_TRY(check_fp4(w, scale, out, in, where));
  const int64_t nb = in / 32;
  // [out][in/2] codes are [out * nb] blocks of 16 bytes in row order, as the scales [out][nb]
  const int64_t bad = e2m1_pairs_to_mxfp4(w.data, scale.data, out * nb, dst);
  if (bad >= 0)
    return err("%s: FP4 scale '%s' is NaN at [%lld, %lld]", where.c_str(), scale.name.c_str(),
               static_cast<long long>(bad / nb), static_cast<long long>(bad % nb));
  return {};
}

void decode_e4m3(const StTensor& t, std::vector<float>* dst) {
  dst->resize(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) (*dst)[static_cast<size_t>(i)] = e4m3_to_f32(t.data[i]);
}

void decode_ue8m0(const StTensor& t, std::vector<float>* dst) {
  dst->resize(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) (*dst)[static_cast<size_t>(i)] = ue8m0_to_f32(t.data[i]);
}

}  // namespace strata::v41
