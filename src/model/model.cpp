// Model::load and the Session that runs an Architecture over one sequence.
#include "model/model.h"

#include <algorithm>
#include <vector>

#include "format/safetensors_dir.h"
#include "model/arch.h"
#include "model/hparams.h"
#include "model/engram_tiered.h"
#include "model/v41_arch.h"

namespace strata {

namespace {

class SessionImpl final : public Session {
 public:
  SessionImpl(const Model& m, std::unique_ptr<ArchState> st, int n_ctx, int n_batch)
      : m_(m), st_(std::move(st)), n_ctx_(n_ctx), n_batch_(n_batch) {}

  Status eval(std::span<const int32_t> tokens, float* logits_out, bool all_logits) override {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) return err("eval: no tokens");
    if (!logits_out) return err("eval: logits_out is null");
    const int n_vocab = m_.n_vocab();
    for (int64_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= n_vocab)
        return err("eval: token id %d at position %lld is out of range [0, %d)", tokens[i],
                   static_cast<long long>(n_past_ + i), n_vocab);
    }
    if (n_past_ + n > n_ctx_)
      return err("eval: context full: %d positions used + %lld new tokens > n_ctx %d", n_past_,
                 static_cast<long long>(n), n_ctx_);
    // Split into chunks of n_batch; every chunk is the same forward path.
    for (int64_t i0 = 0; i0 < n; i0 += n_batch_) {
      const int64_t m = std::min<int64_t>(n_batch_, n - i0);
      Batch b;
      b.tokens = tokens.subspan(i0, m);
      b.pos0 = n_past_;
      b.all_logits = all_logits;
      // Without all_logits every chunk writes its last row to logits_out; the final chunk's wins.
      float* dst = all_logits ? logits_out + i0 * n_vocab : logits_out;
      Status s = m_.arch().forward(*st_, b, dst, m_.pool());
      if (!s.ok()) {
        // A failed step may have written cache rows past n_past_: they are simply overwritten later.
        return s;
      }
      n_past_ += static_cast<int>(m);
    }
    return {};
  }

  Memory memory() const override {
    const ArchMemory a = st_->memory();
    return {a.kv_cache, a.scratch};
  }
  int n_past() const override { return n_past_; }
  int n_ctx() const override { return n_ctx_; }
  void reset() override {
    n_past_ = 0;
    st_->reset();
  }

  const Model& model() const { return m_; }
  ArchState& state() { return *st_; }
  int n_batch() const { return n_batch_; }
  void advance() { ++n_past_; }

 private:
  const Model& m_;
  std::unique_ptr<ArchState> st_;
  int n_ctx_;
  int n_batch_;
  int n_past_ = 0;
};

}  // namespace

Model::~Model() = default;

bool Model::can_decode_batch() const {
  return arch_->can_decode_batch();
}

Status Model::decode_batch(std::span<Session* const> sessions, std::span<const int32_t> tokens,
                           float* logits) const {
  const size_t n = sessions.size();
  if (n == 0 || tokens.size() != n) return err("decode_batch: %zu sessions but %zu tokens", n, tokens.size());
  if (!logits) return err("decode_batch: logits is null");
  if (!arch_->can_decode_batch()) return err("architecture '%s' has no batched decode", arch_name().c_str());
  std::vector<ArchState*> states(n);
  std::vector<int64_t> pos(n);
  for (size_t i = 0; i < n; ++i) {
    auto* s = dynamic_cast<SessionImpl*>(sessions[i]);
    if (!s || &s->model() != this) return err("decode_batch: session %zu is not a session of this model", i);
    for (size_t j = 0; j < i; ++j)
      if (sessions[j] == sessions[i]) return err("decode_batch: session %zu is listed twice", i);
    if (tokens[i] < 0 || tokens[i] >= n_vocab())
      return err("decode_batch: token id %d of session %zu is out of range [0, %d)", tokens[i], i, n_vocab());
    if (s->n_past() >= s->n_ctx())
      return err("decode_batch: session %zu: context full (n_ctx %d)", i, s->n_ctx());
    if (static_cast<int>(n) > s->n_batch())
      return err("decode_batch: %zu sequences but session %zu takes at most %d tokens per step", n, i,
                 s->n_batch());
    states[i] = &s->state();
    pos[i] = s->n_past();
  }
  STRATA_TRY(arch_->forward_decode_batch(states, tokens, pos, logits, *pool_));
  for (size_t i = 0; i < n; ++i) static_cast<SessionImpl*>(sessions[i])->advance();
  return {};
}

const EngramStore* Model::engram_store() const {
  return engram_ ? &engram_->store() : nullptr;
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const LoadOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  if (is_v41_checkpoint_dir(path)) {
    if (opts.experts.budget_bytes > 0 || opts.expert_stats)
      return err(
          "loading %s: the expert store options need a GGUF model (a checkpoint directory keeps its "
          "experts resident)",
          path.c_str());
    auto v = load_deepseek_v41_dir(path, opts.engram);
    if (!v.ok()) return err_context("loading " + path, v.error());
    m->engram_ = std::move(v.value().engram);
    m->st_dir_ = std::move(v.value().dir);
    m->arch_ = std::move(v.value().arch);
    m->pool_ = std::make_unique<ThreadPool>(opts.n_threads);
    return m;
  }
  {
    auto f = GgufFile::open(path);
    if (!f.ok()) return err_context("loading " + path, f.error());
    m->file_ = std::move(f).value();
  }
  auto arch_name = m->file_->get_string("general.architecture");
  if (!arch_name.ok()) return err_context("loading " + path, arch_name.error());
  const ArchEntry* e = arch_find(arch_name.value());
  if (!e) {
    std::string known;
    for (const ArchEntry& a : arch_registry()) known += std::string(known.empty() ? "" : ", ") + a.name;
    return err("loading %s: architecture '%s' is not supported (known: %s)", path.c_str(),
               arch_name.value().c_str(), known.c_str());
  }
  auto arch = e->make(*m->file_);
  if (!arch.ok()) return err_context("loading " + path, arch.error());
  m->arch_ = std::move(arch).value();
  auto tok = Tokenizer::from_gguf(*m->file_);
  if (!tok.ok()) return err_context("loading " + path + ": tokenizer", tok.error());
  m->tokenizer_ = std::move(tok).value();
  m->pool_ = std::make_unique<ThreadPool>(opts.n_threads);
  const HParams& hp = m->arch_->hparams();
  if (opts.experts.budget_bytes > 0 && hp.n_expert == 0)
    return err("loading %s: --expert-budget given, but the model has no routed experts", path.c_str());
  if (hp.n_expert > 0 && (opts.experts.budget_bytes > 0 || opts.expert_stats)) {
    auto st = expert_store_open(*m->file_, hp.n_layer, hp.n_expert, hp.n_expert_used, opts.experts);
    if (!st.ok()) return err_context("loading " + path, st.error());
    m->store_ = std::move(st).value();
  }
  return m;
}

const std::string& Model::arch_name() const {
  return arch_->hparams().arch;
}
const HParams& Model::hparams() const {
  return arch_->hparams();
}
int Model::n_vocab() const {
  return arch_->hparams().n_vocab;
}
int Model::n_ctx_train() const {
  return arch_->hparams().n_ctx_train;
}

Result<std::unique_ptr<Session>> Model::new_session(const SessionOptions& opts) const {
  int n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min(n_ctx_train(), 4096);
  if (n_ctx < 1) return err("new_session: n_ctx %d must be >= 1", n_ctx);
  if (n_ctx > (1 << 24)) return err("new_session: n_ctx %d too large", n_ctx);
  if (opts.n_batch < 1) return err("new_session: n_batch %d must be >= 1", opts.n_batch);
  const int n_batch = std::min(opts.n_batch, n_ctx);
  StateOptions so;
  so.n_ctx = n_ctx;
  so.n_batch = n_batch;
  so.n_threads = pool_->size();
  so.experts = store_.get();
  STRATA_ASSIGN(std::unique_ptr<ArchState> st, arch_->new_state(so));
  return std::unique_ptr<Session>(new SessionImpl(*this, std::move(st), n_ctx, n_batch));
}

}  // namespace strata
