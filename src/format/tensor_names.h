// GGUF tensor names (llama.cpp's naming) that code outside an architecture's weight binding
// recognises, one definition each: the per-block name, its block index, the routed-expert
// tensors (one 3-D tensor per part and layer, the experts in the last dimension) and the router.
#pragma once

#include <string>
#include <string_view>

namespace strata {

// "blk.<il>.<suffix>", e.g. blk_name(3, "attn_q.weight") = "blk.3.attn_q.weight".
std::string blk_name(int il, std::string_view suffix);

// The block index of "blk.<digits>.<rest>" ("blk.12.attn_q.weight" -> 12), or -1 for any other
// name (token_embd.weight, output_norm.weight, "blk.x.y", "blk.12").
int blk_index(std::string_view name);

// Routed experts: a name with a component ending in "_exps" ("blk.0.ffn_up_exps.weight",
// "blk.0.ffn_gate_exps.bias"). Shared experts ("_shexp") are dense tensors.
bool is_routed_expert(std::string_view name);

// The three routed-expert matrices per layer, in the order the FFN reads them.
enum RoutedExpertPart { routed_expert_gate = 0, routed_expert_up = 1, routed_expert_down = 2 };
inline constexpr int kRoutedExpertParts = 3;
inline constexpr const char* kRoutedExpertPartNames[kRoutedExpertParts] = {
    "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
// The part (RoutedExpertPart) a block tensor name ends in ("blk.3.ffn_up_exps.weight" -> 1), or
// -1 (other tensors, the experts' biases included).
int routed_expert_part(std::string_view name);

// The router of a MoE block: logits = W · x (+ b), one row per expert.
inline constexpr const char* kRouterWeight = "ffn_gate_inp.weight";
inline constexpr const char* kRouterBias = "ffn_gate_inp.bias";

}  // namespace strata
