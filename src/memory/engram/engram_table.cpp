#include "memory/engram/engram_table.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/fp16.h"
#include "format/safetensors_dir.h"
#include "quant/fp8_fp4.h"

namespace strata {

int engram_staging_count(int io_depth, int io_threads) {
  return std::max(2 * io_depth, 2 * io_threads);
}

uint64_t engram_staging_bytes(uint32_t value_row_bytes, uint32_t scale_row_bytes) {
  constexpr uint64_t kPage = 4096;  // memory/io_file.h kIoAlign
  auto cover = [](uint64_t n) { return (n + kPage - 1) / kPage * kPage + kPage; };  // worst-case alignment
  return cover(value_row_bytes) + cover(scale_row_bytes);
}

namespace {

bool parse_value_type(StDtype d, EngramValueType* out) {
  if (d == StDtype::f32) return *out = EngramValueType::f32, true;
  if (d == StDtype::f8_e4m3) return *out = EngramValueType::f8_e4m3, true;
  return false;
}

bool parse_scale_type(StDtype d, EngramScaleType* out) {
  if (d == StDtype::f32) return *out = EngramScaleType::f32, true;
  if (d == StDtype::f8_e8m0 || d == StDtype::u8) return *out = EngramScaleType::e8m0, true;
  return false;
}

}  // namespace

Result<EngramTable> engram_table_from_checkpoint(const SafetensorsDir& dir, int layer, int64_t rows,
                                                 int head_dim) {
  if (rows <= 0 || head_dim <= 0 || head_dim % 32)
    return err(
        "%s: Engram layer %d: rows %lld / head_dim %d invalid (head_dim must be a positive multiple of 32)",
        dir.dir().c_str(), layer, static_cast<long long>(rows), head_dim);
  EngramTable t;
  const std::string p = "layers." + std::to_string(layer) + ".engram.embed.";
  t.name = p + "weight";
  const std::string sname = p + "scale";
  const StTensor* v = dir.find(t.name);
  const StTensor* s = dir.find(sname);
  if (!v) return err("%s: Engram table tensor %s is missing", dir.dir().c_str(), t.name.c_str());
  if (!s) return err("%s: Engram scale tensor %s is missing", dir.dir().c_str(), sname.c_str());
  const std::string vfile = dir.file_of(t.name), sfile = dir.file_of(sname);
  const std::string where = (std::filesystem::path(dir.dir()) / vfile).string();
  if (vfile != sfile)
    return err("%s: %s is in %s but %s is in %s (a row's values and scales must share a shard)",
               dir.dir().c_str(), t.name.c_str(), vfile.c_str(), sname.c_str(), sfile.c_str());
  if (!parse_value_type(v->dtype, &t.vtype))
    return err("%s: tensor %s: dtype %s, expected F32 (e4m3-grid values) or F8_E4M3", where.c_str(),
               t.name.c_str(), st_dtype_name(v->dtype));
  if (!parse_scale_type(s->dtype, &t.stype))
    return err("%s: tensor %s: dtype %s, expected F32 (powers of two), F8_E8M0 or U8 (UE8M0 exponents)",
               where.c_str(), sname.c_str(), st_dtype_name(s->dtype));
  if (v->shape != std::vector<int64_t>{rows, head_dim})
    return err("%s: tensor %s: shape %s, expected [%lld, %d]", where.c_str(), t.name.c_str(),
               v->shape_string().c_str(), static_cast<long long>(rows), head_dim);
  if (s->shape != std::vector<int64_t>{rows, head_dim / 32})
    return err("%s: tensor %s: shape %s, expected [%lld, %d]", where.c_str(), sname.c_str(),
               s->shape_string().c_str(), static_cast<long long>(rows), head_dim / 32);
  t.path = where;
  t.rows = rows;
  t.head_dim = head_dim;
  t.values_offset = v->offset;
  t.scales_offset = s->offset;
  return t;
}

void engram_row_dequant(const EngramTable& t, const uint8_t* values, const uint8_t* scales, float* out) {
  const int nb = t.head_dim / 32;
  float sc[64];
  float* scale = sc;
  std::vector<float> big;
  if (nb > 64) {
    big.resize(static_cast<size_t>(nb));
    scale = big.data();
  }
  for (int b = 0; b < nb; ++b) {
    if (t.stype == EngramScaleType::f32)
      std::memcpy(&scale[b], scales + 4 * b, 4);
    else
      scale[b] = ue8m0_to_f32(scales[b]);
  }
  for (int i = 0; i < t.head_dim; ++i) {
    float v;
    if (t.vtype == EngramValueType::f32)
      std::memcpy(&v, values + 4 * i, 4);
    else
      v = e4m3_to_f32(values[i]);
    out[i] = bf16_to_f32(f32_to_bf16(v * scale[i / 32]));
  }
}

}  // namespace strata
