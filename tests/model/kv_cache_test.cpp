// kv/: RowCache addressing (linear and ring), KvCache layer layouts, KV types (names, typed
// caches priced as the spec says, what cannot be stored is an error naming it).
#include <gtest/gtest.h>

#include "kv/kv_cache.h"
#include "kv/row_cache.h"

namespace strata {
namespace {

TEST(KvCache, RingKeepsTheLastCapacityRows) {
  RowCache c(3, 5, /*ring=*/true);
  for (int64_t i = 0; i < 12; ++i)
    for (int j = 0; j < 3; ++j) c.row(i)[j] = static_cast<float>(i * 10 + j);
  for (int64_t i = 7; i < 12; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(c.row(i)[j], static_cast<float>(i * 10 + j));
  EXPECT_EQ(c.row(2), c.row(7));  // slot reuse
}

TEST(KvCache, BuiltFromTheSpecRingOrLinear) {
  KvSpec spec;
  spec.layers.push_back(kv_layer_attention(4, 8, 8, /*window=*/128));  // ring: 127 + 16
  spec.layers.push_back(kv_layer_attention(4, 8, 4, 0));               // full: linear
  spec.layers[1].parts.push_back(kv_part_every(KvPartKind::compressed, "comp", "c", 64, 4));
  spec.layers[1].parts.push_back(kv_part_state("comp_state", "s", 10, 8));
  const KvCache kv(spec, /*n_ctx=*/1024, /*n_batch=*/16);
  const KvLayer& l0 = kv.layer(0);
  const KvLayer& l1 = kv.layer(1);
  ASSERT_GE(l0.find("k"), 0);
  EXPECT_EQ(l0.find(KvPartKind::window), l0.find("k"));
  EXPECT_TRUE(l0.part(l0.find("k")).ring());
  EXPECT_EQ(l0.part(l0.find("k")).capacity(), 143);
  EXPECT_FALSE(l1.part(l1.find("v")).ring());
  EXPECT_EQ(l1.part(l1.find("v")).width(), 16);
  EXPECT_EQ(l1.part(l1.find(KvPartKind::compressed)).capacity(), 256);  // ceil(1024 / 4)
  EXPECT_EQ(l1.part(l1.find("comp_state")).capacity(), 8);
  EXPECT_EQ(l0.find(KvPartKind::compressed), -1);
  EXPECT_EQ(l0.find("nope"), -1);
  const size_t want = sizeof(float) * (2 * 32 * 143 + (32 + 16) * 1024 + 64 * 256 + 10 * 8);
  EXPECT_EQ(kv.bytes(), want);
  EXPECT_EQ(spec.bytes(1024, 16), want);  // the spec prices what the cache allocates
  EXPECT_EQ(spec.bytes(KvType::f16, 1024, 16), want / 2 + 10 * 8 * 2);  // state stays f32
  // A window wider than the context needs no ring; a window part costs nothing per token.
  const KvCache small(spec, 64, 64);
  EXPECT_FALSE(small.layer(0).part(0).ring());
  EXPECT_EQ(small.layer(0).part(0).capacity(), 64);
  EXPECT_EQ(spec.layers[0].parts[0].bytes_per_token(KvType::f32), 0.0);
  EXPECT_EQ(spec.layers[1].parts[2].bytes_per_token(KvType::f32), 64.0);  // 256 B per 4 positions
  // Token by token (V4.1's reference path) a window ring is exactly the window.
  KvPartSpec w = kv_part_window("window", "w", 8, 128);
  w.step_in_ring = false;
  EXPECT_EQ(w.rows(4096, 512), 128);
  EXPECT_EQ(w.rows(100, 512), 100);
}

TEST(KvCache, TypedPartsAllocateWhatTheSpecPrices) {
  KvSpec spec;
  spec.layers.push_back(kv_layer_attention(2, 64, 64, 0));
  spec.layers.push_back(kv_layer_attention(2, 64, 32, 16));
  for (KvType k : {KvType::f16, KvType::bf16, KvType::q8_0, KvType::q4_0})
    for (KvType v : {KvType::f32, KvType::q4_0}) {
      KvSpec s = spec;
      for (KvLayerSpec& l : s.layers)
        for (KvPartSpec& p : l.parts) p.type = p.name == "v" ? v : k;
      ASSERT_TRUE(kv_spec_check(s, "test", 32).ok());
      for (bool rotate : {true, false}) {
        const KvCache kv(s, 100, 8, rotate);
        EXPECT_EQ(kv.bytes(), s.bytes(100, 8)) << kv_type_name(k) << "/" << kv_type_name(v);
        const RowCache& kr = kv.layer(0).part(0);
        EXPECT_EQ(kr.type(), kv_storage_type(k));
        EXPECT_EQ(kr.view().row_bytes, kv_row_bytes(k, 128));
        EXPECT_EQ(kr.view().hadamard, rotate && kv_type_quantized(k));  // llama.cpp rotates quantized rows
        EXPECT_EQ(kv.layer(1).part(1).view().hadamard, rotate && v == KvType::q4_0);
      }
    }
}

TEST(KvCache, TypesByNameAndWhatCannotBeStored) {
  auto q8 = kv_type_from_name("q8_0");
  auto fp8 = kv_type_from_name("fp8");  // E4M3 + UE8M0 per 32 (DeepSeek's layout)
  ASSERT_TRUE(q8.ok() && fp8.ok());
  EXPECT_EQ(*q8, KvType::q8_0);
  EXPECT_EQ(*fp8, KvType::fp8_e4m3);
  auto bad = kv_type_from_name("q9_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(
                "unknown KV type 'q9_0' (KV types: f32, f16, bf16, q8_0, q4_0, iq4_nl, fp8_e4m3, mxfp4)"),
            std::string::npos)
      << bad.message();
  auto mx = kv_type_from_name("mxfp4");
  ASSERT_TRUE(mx.ok()) << mx.message();
  EXPECT_EQ(kv_row_bytes(*mx, 512), 272u);
  EXPECT_EQ(kv_row_bytes(*fp8, 512), 528u);
  KvSpec spec;
  spec.layers.push_back(kv_layer_attention(2, 48, 48, 0));  // heads of 48: not whole 32-blocks
  for (KvPartSpec& p : spec.layers[0].parts) p.type = KvType::q8_0;
  const Status st = kv_spec_check(spec, "llama", 48);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("llama: KV type q8_0"), std::string::npos) << st.message();
  for (KvPartSpec& p : spec.layers[0].parts) p.type = KvType::f16;
  EXPECT_TRUE(kv_spec_check(spec, "llama", 48).ok());
  const Status ds = kv_types_f32_only({KvType::f16, KvType::f32}, "f32_arch");
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.message().find("f32_arch: KV type f16 is not supported"), std::string::npos) << ds.message();
  KvTypes tool_default{KvType::f16, KvType::f16};
  tool_default.is_default = true;  // run / serve / bench's f16 when not asked: f32-only caches take f32
  EXPECT_TRUE(kv_types_f32_only(tool_default, "f32_arch").ok());
}

}  // namespace
}  // namespace strata
