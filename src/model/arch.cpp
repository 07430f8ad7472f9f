#include "model/arch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/assert.h"
#include "format/safetensors_dir.h"
#include "model/deepseek4/ds4_arch.h"
#include "model/engram_tiered.h"

namespace strata {

bool Batch::expert_min_shares(float* out) const {
  bool any = false;
  for (const SeqRun& r : runs) any = any || r.knobs.expert_min_share > 0.0f;
  if (!any) return false;
  for (const SeqRun& r : runs) std::fill(out + r.t0, out + r.t0 + r.n, r.knobs.expert_min_share);
  return true;
}

int64_t SeqKnobs::index_topk(int64_t model_topk) const {
  if (!(index_topk_share > 0.0f && index_topk_share < 1.0f)) return model_topk;
  const auto k = static_cast<int64_t>(std::ceil(static_cast<double>(index_topk_share) * model_topk));
  return std::clamp<int64_t>(k, 1, model_topk);
}

uint64_t SeqKnobs::salt() const {
  if (is_default()) return 0;
  uint32_t bits = 0, topk_bits = 0;
  static_assert(sizeof bits == sizeof expert_min_share && sizeof topk_bits == sizeof index_topk_share);
  std::memcpy(&bits, &expert_min_share, sizeof bits);
  std::memcpy(&topk_bits, &index_topk_share, sizeof topk_bits);
  // (Knobs without an index top-k share keep the salt they had before it existed: saved prefix
  // blocks stay valid.)
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t{bits} * 0x100000001b3ull);
  if (topk_bits != 0) h ^= (uint64_t{topk_bits} + 0x2545f4914f6cdd1dull) * 0xff51afd7ed558ccdull;
  return h;
}

namespace {

// An explicit table rather than self-registering statics: arch files live in a static library,
// and an object file nothing references would be dropped by the linker with its registrar.
constexpr ArchSource kGguf = ArchSource::gguf, kDir = ArchSource::checkpoint_dir;
const std::array kArchs = {
    ArchEntry{"qwen3moe", kGguf, &make_arch_qwen3moe, &kv_spec_qwen3moe},
    ArchEntry{"llama", kGguf, &make_arch_llama, &kv_spec_llama},
    ArchEntry{"qwen2moe", kGguf, &make_arch_qwen2moe, &kv_spec_qwen2moe},
    ArchEntry{"gpt-oss", kGguf, &make_arch_gpt_oss, &kv_spec_gpt_oss},
    ArchEntry{"deepseek4", kGguf, &make_arch_deepseek4, &kv_spec_deepseek4},
    ArchEntry{"deepseek_v41", kDir, nullptr, nullptr, &matches_deepseek_v41, &make_arch_deepseek_v41,
              &kv_spec_deepseek_v41},
};

}  // namespace

std::span<const ArchEntry> arch_registry() {
  return kArchs;
}

Status forward_one(const Architecture& arch, ArchState& st, std::span<const int32_t> tokens, int64_t pos0,
                   bool all_logits, float* logits, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  STRATA_ASSERT(n >= 1 && n <= (int64_t{1} << 30));
  const SeqRun run{&st, pos0, 0, n};
  std::vector<int32_t> rows;
  if (all_logits) {
    rows.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  } else {
    rows.push_back(static_cast<int32_t>(n - 1));
  }
  Batch b;
  b.tokens = tokens;
  b.runs = std::span<const SeqRun>(&run, 1);
  b.out_rows = rows;
  return arch.forward(b, logits, pool);
}

DirModel::DirModel() = default;
DirModel::DirModel(DirModel&&) noexcept = default;
DirModel& DirModel::operator=(DirModel&&) noexcept = default;
DirModel::~DirModel() = default;

const ArchEntry* arch_find(std::string_view name, ArchSource source) {
  for (const ArchEntry& e : kArchs)
    if (e.source == source && name == e.name) return &e;
  return nullptr;
}

std::string arch_names(ArchSource source) {
  std::string s;
  for (const ArchEntry& e : kArchs)
    if (e.source == source) s += std::string(s.empty() ? "" : ", ") + e.name;
  return s;
}

Result<KvSpec> arch_kv_spec(const GgufFile& f) {
  STRATA_ASSIGN(std::string arch, f.get_string("general.architecture"));
  const ArchEntry* e = arch_find(arch);
  if (!e) return err("architecture '%s' is not supported", arch.c_str());
  return e->kv_spec(f);
}

bool is_checkpoint_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json", ec);
}

const ArchEntry* arch_find_config(const nlohmann::json& config) {
  for (const ArchEntry& e : kArchs)
    if (e.source == ArchSource::checkpoint_dir && e.matches(config)) return &e;
  return nullptr;
}

Result<const ArchEntry*> arch_find_config_text(const std::string& config_text, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return err("%s: not a JSON object", source.c_str());
  const ArchEntry* e = arch_find_config(j);
  if (!e) {
    const std::string mt = j.contains("model_type") && j["model_type"].is_string()
                               ? "model_type '" + j["model_type"].get<std::string>() + "'"
                               : std::string("no model_type");
    return err("%s names no architecture strata loads from a checkpoint directory (%s; known: %s)",
               source.c_str(), mt.c_str(), arch_names(ArchSource::checkpoint_dir).c_str());
  }
  return e;
}

}  // namespace strata
