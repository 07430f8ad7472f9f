// The GGUF tensor-name table (format/tensor_names.h): block names and indices, routed experts and
// their parts, the router.
#include <gtest/gtest.h>

#include <string>

#include "format/tensor_names.h"

namespace strata {
namespace {

TEST(TensorNames, BlockNameAndIndex) {
  EXPECT_EQ(blk_name(3, "attn_q.weight"), "blk.3.attn_q.weight");
  EXPECT_EQ(blk_name(0, std::string("ffn_norm.weight")), "blk.0.ffn_norm.weight");
  EXPECT_EQ(blk_index("blk.12.attn_q.weight"), 12);
  EXPECT_EQ(blk_index(blk_name(47, kRouterWeight)), 47);
  EXPECT_EQ(blk_index("blk.0.x"), 0);
  for (const char* no : {"token_embd.weight", "output_norm.weight", "blk.x.attn_q.weight", "blk.12",
                         "blk.12x.a", "blk..a", "blk.", "", "xblk.1.a", "blk.99999999999999.a"})
    EXPECT_EQ(blk_index(no), -1) << no;
}

TEST(TensorNames, RoutedExperts) {
  for (int p = 0; p < kRoutedExpertParts; ++p) {
    const std::string n = blk_name(5, kRoutedExpertPartNames[p]);
    EXPECT_TRUE(is_routed_expert(n)) << n;
    EXPECT_EQ(routed_expert_part(n), p) << n;
  }
  EXPECT_EQ(routed_expert_part("blk.1.ffn_gate_exps.weight"), routed_expert_gate);
  EXPECT_EQ(routed_expert_part("blk.1.ffn_up_exps.weight"), routed_expert_up);
  EXPECT_EQ(routed_expert_part("blk.1.ffn_down_exps.weight"), routed_expert_down);
  EXPECT_TRUE(is_routed_expert("blk.1.ffn_gate_exps.bias"));  // gpt-oss's expert biases
  EXPECT_EQ(routed_expert_part("blk.1.ffn_gate_exps.bias"), -1);
  EXPECT_TRUE(is_routed_expert("blk.1.ffn_down_exps"));
  for (const char* no : {"blk.1.ffn_gate_shexp.weight", "blk.1.ffn_gate_inp.weight", "blk.1.ffn_up.weight",
                         "blk.1.exp_probs_b.bias", "token_embd.weight"}) {
    EXPECT_FALSE(is_routed_expert(no)) << no;
    EXPECT_EQ(routed_expert_part(no), -1) << no;
  }
}

TEST(TensorNames, Router) {
  EXPECT_EQ(blk_name(2, kRouterWeight), "blk.2.ffn_gate_inp.weight");
  EXPECT_EQ(blk_name(2, kRouterBias), "blk.2.ffn_gate_inp.bias");
  EXPECT_FALSE(is_routed_expert(blk_name(2, kRouterWeight)));
}

}  // namespace
}  // namespace strata
