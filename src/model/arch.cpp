#include "model/arch.h"

#include <array>
#include <vector>

#include "base/assert.h"

#include "model/deepseek4/ds4_arch.h"

namespace strata {

namespace {

// An explicit table rather than self-registering statics: arch files live in a static library,
// and an object file nothing references would be dropped by the linker with its registrar.
const std::array kArchs = {
    ArchEntry{"qwen3moe", &make_arch_qwen3moe, &kv_spec_qwen3moe},
    ArchEntry{"llama", &make_arch_llama, &kv_spec_llama},
    ArchEntry{"qwen2moe", &make_arch_qwen2moe, &kv_spec_qwen2moe},
    ArchEntry{"gpt-oss", &make_arch_gpt_oss, &kv_spec_gpt_oss},
    ArchEntry{"deepseek4", &make_arch_deepseek4, &kv_spec_deepseek4},
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

Status forward_run_by_run(const Batch& b, int n_vocab, float* logits, float* discard,
                          SeqForwardFn seq_forward) {
  size_t k = 0;  // next entry of out_rows
  for (const SeqRun& r : b.runs) {
    size_t want = 0;
    while (k + want < b.out_rows.size() && b.out_rows[k + want] < r.t0 + r.n) ++want;
    const bool all = want == static_cast<size_t>(r.n), last = want == 1 && b.out_rows[k] == r.t0 + r.n - 1;
    if (want != 0 && !all && !last)
      return err("this architecture gives the logits of every token of a sequence's run or of its last one");
    float* dst = want == 0 ? discard : logits + k * static_cast<size_t>(n_vocab);
    STRATA_TRY(seq_forward(*r.state, b.tokens.subspan(static_cast<size_t>(r.t0), static_cast<size_t>(r.n)),
                           r.pos0, all && r.n > 1, dst));
    k += want;
  }
  return {};
}

const ArchEntry* arch_find(std::string_view name) {
  for (const ArchEntry& e : kArchs)
    if (name == e.name) return &e;
  return nullptr;
}

Result<KvSpec> arch_kv_spec(const GgufFile& f) {
  STRATA_ASSIGN(std::string arch, f.get_string("general.architecture"));
  const ArchEntry* e = arch_find(arch);
  if (!e) return err("architecture '%s' is not supported", arch.c_str());
  return e->kv_spec(f);
}

}  // namespace strata
