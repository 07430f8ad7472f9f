#include "kv/kv_type.h"

namespace strata {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32:
      return "f32";
    case KvType::f16:
      return "f16";
    case KvType::bf16:
      return "bf16";
    case KvType::q8_0:
      return "q8_0";
    case KvType::fp8_e4m3:
      return "fp8_e4m3";
    case KvType::mxfp4:
      return "mxfp4";
    case KvType::nvfp4:
      return "nvfp4";
  }
  return "?";
}

bool kv_type_supported(KvType t) {
  return t == KvType::f32;
}

uint64_t kv_row_bytes(KvType t, int64_t width) {
  const uint64_t w = static_cast<uint64_t>(width);
  const uint64_t blocks = (w + 31) / 32;
  switch (t) {
    case KvType::f32:
      return 4 * w;
    case KvType::f16:
    case KvType::bf16:
      return 2 * w;
    case KvType::q8_0:
      return 34 * blocks;
    case KvType::fp8_e4m3:
      return 33 * blocks;
    case KvType::mxfp4:
      return 17 * blocks;
    case KvType::nvfp4:
      return 9 * ((w + 15) / 16);
  }
  return 0;
}

}  // namespace strata
