// Test helpers for the expert store: a synth model on disk, a test-local LRU policy (the store
// tests do not depend on the policy set), a driver that routes random experts through a store
// and checks every acquired expert's bytes against the mapped file.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/gguf.h"
#include "memory/experts/expert_store.h"
#include "model/synth.h"

namespace strata {

struct SynthModelFile {
  std::string path;
  std::unique_ptr<GgufFile> file;
  SynthModelFile(const std::string& name, int n_layer, int n_expert, int k, const std::string& type,
                 const std::string& arch = "qwen3moe") {
    path = "/tmp/strata_" + name + "_" + std::to_string(::getpid()) + ".gguf";
    SynthSpec s;
    s.arch = arch;
    s.n_layer = n_layer;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_expert = n_expert;
    s.n_expert_used = k;
    s.expert_ffn = n_expert > 0 ? 96 : 0;
    s.ffn = n_expert > 0 ? 0 : 96;
    s.n_vocab = 512;
    s.type = type;
    s.router_skew = 1.0f;
    s.n_threads = 1;
    auto info = synth_write(s, path);
    if (!info.ok()) {
      std::fprintf(stderr, "synth: %s\n", info.message().c_str());
      std::abort();
    }
    file = std::move(GgufFile::open(path).value());
  }
  ~SynthModelFile() {
    file.reset();
    std::remove(path.c_str());
  }
};

// Least recently used by a private access counter (ticks can tie within a token).
class TestLru final : public ExpertPolicy {
 public:
  const char* name() const override { return "test-lru"; }
  void on_access(ExpertKey k, uint64_t) override { last_[k.packed()] = ++clock_; }
  void on_insert(ExpertKey k, uint64_t) override { last_[k.packed()] = ++clock_; }
  void on_evict(ExpertKey) override {}
  size_t choose_victim(std::span<const ExpertKey> c, uint64_t) override {
    size_t best = 0;
    for (size_t i = 1; i < c.size(); ++i)
      if (last_[c[i].packed()] < last_[c[best].packed()]) best = i;
    return best;
  }

 private:
  std::unordered_map<uint64_t, uint64_t> last_;
  uint64_t clock_ = 0;
};

inline bool views_match(const ExpertViews& v, const ExpertCatalog& c, int l, int e) {
  const TensorView* got[3] = {&v.gate, &v.up, &v.down};
  for (int p = 0; p < expert_part_count; ++p) {
    const TensorView want = c.view(l, e, p, nullptr);
    if (got[p]->type != want.type || got[p]->ne[0] != want.ne[0] || got[p]->ne[1] != want.ne[1] ||
        got[p]->nbytes != want.nbytes || std::memcmp(got[p]->data, want.data, want.nbytes) != 0)
      return false;
  }
  return true;
}

// Routes random (skewed) expert choices through a store, one token per step, checking bytes.
struct StoreDriver {
  ExpertStore& st;
  ExpertCatalog cat;
  int n_layer, n_expert, k;
  std::mt19937 rng;
  std::vector<float> x;
  StoreDriver(ExpertStore& s, const GgufFile& f, int L, int E, int K, uint32_t seed)
      : st(s), cat(ExpertCatalog::build(f, L, E).value()), n_layer(L), n_expert(E), k(K), rng(seed), x(64) {}

  bool step() {
    st.begin_step(1);
    std::normal_distribution<float> nd;
    for (float& v : x) v = nd(rng);
    for (int l = 0; l < n_layer; ++l) {
      std::vector<int32_t> sel;
      while (static_cast<int>(sel.size()) < k) {
        // Skewed: low ids more likely, so caches get hits.
        const int e =
            std::min<int>(n_expert - 1, static_cast<int>(std::exponential_distribution<float>(0.5f)(rng)));
        bool dup = false;
        for (int32_t s : sel) dup |= s == e;
        if (!dup) sel.push_back(e);
      }
      std::vector<float> w(static_cast<size_t>(k), 1.0f / k);
      st.on_route(l, x.data(), 1, sel.data(), w.data(), k);
      for (int32_t e : sel) {
        auto v = st.acquire(l, e);
        if (!v.ok()) {
          std::fprintf(stderr, "acquire: %s\n", v.message().c_str());
          return false;
        }
        if (!views_match(*v, cat, l, e)) {
          std::fprintf(stderr, "bytes differ: layer %d expert %d\n", l, e);
          return false;
        }
        st.release(l, e);
      }
    }
    st.end_step();
    return true;
  }
};

}  // namespace strata
