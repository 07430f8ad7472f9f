// PlanModel of a checkpoint directory (`strata plan -m DIR`, the memory report of a directory
// model): the config.json estimate at the types the fast path holds (dense matrices BF16, routed
// experts as stored), with the routed experts' bytes and the expert store's slot taken from the
// store's own catalog of the shards (v41_expert_catalog), so a budget is billed in the slots the
// tier will allocate (an FP4 expert's staging included).
#include <filesystem>

#include "format/safetensors_dir.h"
#include "model/arch.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_experts.h"
#include "plan/planner.h"

namespace strata {

Result<PlanModel> plan_model_from_checkpoint_dir(const std::string& dir) {
  const std::string cfg_path = (std::filesystem::path(dir) / "config.json").string();
  STRATA_ASSIGN(std::string text, read_text_file(cfg_path));
  STRATA_ASSIGN(const ArchEntry* e, arch_find_config_text(text, cfg_path));
  if (std::string(e->name) != "deepseek_v41")
    return err("%s: strata plan bills checkpoint directories of deepseek_v41, not %s", dir.c_str(), e->name);
  PlanTypes ty;
  ty.dense = GgmlType::bf16;
  ty.expert = GgmlType::mxfp4;
  STRATA_ASSIGN(PlanModel m, plan_model_from_hf_config_text(text, cfg_path, ty));
  m.source = dir;
  m.from_config = false;
  STRATA_ASSIGN(v41::Config c, v41::parse_config(text, cfg_path));
  STRATA_ASSIGN(std::unique_ptr<SafetensorsDir> d, SafetensorsDir::open(dir));
  STRATA_ASSIGN(ExpertCatalog cat, v41::v41_expert_catalog(*d, c));
  m.class_bytes[plan_class_routed] = cat.routed_bytes();
  m.expert_bytes = cat.expert_bytes(0);
  m.slot_bytes = cat.slot_bytes();
  m.types = std::string("dense matrices as the fast path holds them, assumed BF16; routed experts ") +
            (cat.layer(0).part[expert_part_gate].fp4 ? "FP4 (held as MXFP4)" : "BF16") +
            " from the shards (slot: the expert store's layout)";
  return m;
}

}  // namespace strata
