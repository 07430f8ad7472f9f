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
    case KvType::q4_0:
      return "q4_0";
    case KvType::iq4_nl:
      return "iq4_nl";
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
  return t == KvType::f32 || t == KvType::f16 || t == KvType::bf16 || t == KvType::q8_0 ||
         t == KvType::q4_0 || t == KvType::iq4_nl || t == KvType::fp8_e4m3 || t == KvType::mxfp4 ||
         t == KvType::nvfp4;
}

GgmlType kv_storage_type(KvType t) {
  switch (t) {
    case KvType::f16:
      return GgmlType::f16;
    case KvType::bf16:
      return GgmlType::bf16;
    case KvType::q8_0:
      return GgmlType::q8_0;
    case KvType::q4_0:
      return GgmlType::q4_0;
    case KvType::iq4_nl:
      return GgmlType::iq4_nl;
    case KvType::fp8_e4m3:
      return GgmlType::fp8_e4m3;
    case KvType::mxfp4:
      return GgmlType::mxfp4;
    case KvType::nvfp4:
      return GgmlType::nvfp4;
    default:
      return GgmlType::f32;
  }
}

bool kv_type_quantized(KvType t) {
  return t != KvType::f32 && t != KvType::f16 && t != KvType::bf16;
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
    case KvType::q4_0:
    case KvType::iq4_nl:
      return 18 * blocks;
    case KvType::fp8_e4m3:
      return 33 * blocks;
    case KvType::mxfp4:
      return 17 * blocks;
    case KvType::nvfp4:
      return 9 * ((w + 15) / 16);
  }
  return 0;
}

std::string kv_supported_names() {
  std::string s;
  for (KvType t : kAllKvTypes)
    if (kv_type_supported(t)) s += std::string(s.empty() ? "" : ", ") + kv_type_name(t);
  return s;
}

Status kv_types_f32_only(const KvTypes& t, const char* arch) {
  if (t.is_default) return {};
  for (KvType x : {t.k, t.v})
    if (x != KvType::f32)
      return err(
          "%s: KV type %s is not supported by this architecture (its caches are f32: use -ctk f32 -ctv f32)",
          arch, kv_type_name(x));
  return {};
}

Result<KvType> kv_type_from_name(std::string_view name, bool planned) {
  if (name == "fp8") name = "fp8_e4m3";
  for (KvType t : kAllKvTypes)
    if (name == kv_type_name(t)) {
      if (!planned && !kv_type_supported(t))
        return err("KV type %s is not implemented yet (KV types: %s)", kv_type_name(t),
                   kv_supported_names().c_str());
      return t;
    }
  std::string all;
  for (KvType t : kAllKvTypes) all += std::string(all.empty() ? "" : ", ") + kv_type_name(t);
  return err("unknown KV type '%.*s' (KV types: %s)", static_cast<int>(name.size()), name.data(),
             planned ? all.c_str() : kv_supported_names().c_str());
}

}  // namespace strata
