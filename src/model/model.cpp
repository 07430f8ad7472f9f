// Model::load and the Session that runs an Architecture over one sequence.
#include "model/model.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "format/safetensors_dir.h"
#include "kv/block_pool.h"
#include "kernels/cpu_device.h"
#include "memory/experts/device_experts.h"
#include "model/arch.h"
#include "model/hparams.h"
#include "model/engram_tiered.h"

namespace strata {

class SessionImpl final : public Session {
 public:
  SessionImpl(const Model& m, std::unique_ptr<ArchState> st, int n_ctx, int n_batch)
      : m_(m), st_(std::move(st)), n_ctx_(n_ctx), n_batch_(n_batch) {}

  Status eval(std::span<const int32_t> tokens, float* logits_out, bool all_logits) override {
    if (tokens.empty()) return err("eval: no tokens");
    if (!logits_out) return err("eval: logits_out is null");
    TokenBatch b;
    b.tokens = tokens;
    std::vector<uint8_t> want;
    if (all_logits) {
      want.assign(tokens.size(), 1);
      b.logits = want;
    }
    Session* self = this;
    return m_.forward(std::span<Session* const>(&self, 1), b, logits_out);
  }

  Memory memory() const override {
    const ArchMemory a = st_->memory();
    return {a.kv_cache, a.scratch, a.kv};
  }
  int n_past() const override { return n_past_; }
  int n_ctx() const override { return n_ctx_; }
  void reset() override {
    n_past_ = 0;
    st_->reset();
  }
  BlockTable* kv_blocks() override { return st_->kv_blocks(); }
  Status assume_prefix(int n) override {
    const BlockTable* t = st_->kv_blocks();
    if (!t) return err("assume_prefix: not a paged session");
    if (n_past_ != 0 || n < 0 || n >= n_ctx_ || n > t->rows())
      return err("assume_prefix: %d positions, but the session holds %d and its blocks cover %lld", n,
                 n_past_, static_cast<long long>(t->rows()));
    if (Status st = st_->restore_checkpoint(n); !st.ok()) return st;
    n_past_ = n;
    return {};
  }
  Status checkpoint() override { return st_->save_checkpoint(n_past_); }

  const Model& model() const { return m_; }
  ArchState& state() { return *st_; }
  int n_batch() const { return n_batch_; }
  void advance(int n) { n_past_ += n; }

 private:
  SessionImpl* impl() override { return this; }
  const Model& m_;
  std::unique_ptr<ArchState> st_;
  int n_ctx_;
  int n_batch_;
  int n_past_ = 0;
};

Model::~Model() = default;

Status Model::forward(std::span<Session* const> sessions, const TokenBatch& b, float* logits) const {
  const size_t n = b.tokens.size(), n_seq = sessions.size();
  if (n == 0) return err("forward: empty batch");
  if (n_seq == 0) return err("forward: no sessions");
  if (!logits) return err("forward: logits is null");
  if ((!b.seq.empty() && b.seq.size() != n) || (!b.pos.empty() && b.pos.size() != n) ||
      (!b.logits.empty() && b.logits.size() != n))
    return err("forward: %zu tokens but %zu sequence ids, %zu positions and %zu logit flags", n, b.seq.size(),
               b.pos.size(), b.logits.size());
  std::vector<SessionImpl*> impl(n_seq);
  for (size_t i = 0; i < n_seq; ++i) {
    impl[i] = sessions[i] ? sessions[i]->impl() : nullptr;
    if (!impl[i] || &impl[i]->model() != this)
      return err("forward: session %zu is not a session of this model", i);
    for (size_t j = 0; j < i; ++j)
      if (sessions[j] == sessions[i]) return err("forward: session %zu is listed twice", i);
  }
  // Runs: one per sequence, its tokens contiguous, its positions continuing it.
  struct Run {
    size_t s, t0, n;
  };
  std::vector<Run> runs;
  std::vector<uint8_t> seen(n_seq, 0);
  for (size_t t = 0; t < n; ++t) {
    const int32_t sq = b.seq.empty() ? 0 : b.seq[t];
    if (sq < 0 || static_cast<size_t>(sq) >= n_seq)
      return err("forward: token %zu names sequence %d, but the batch has %zu sessions", t, sq, n_seq);
    const size_t s = static_cast<size_t>(sq);
    if (runs.empty() || runs.back().s != s) {
      if (seen[s]) return err("forward: the tokens of sequence %zu are not contiguous in the batch", s);
      seen[s] = 1;
      runs.push_back({s, t, 0});
    }
    const int64_t want_pos = impl[s]->n_past() + static_cast<int64_t>(runs.back().n);
    if (!b.pos.empty() && b.pos[t] != want_pos)
      return err("forward: token %zu of sequence %zu is at position %lld, but the sequence continues at %lld",
                 t, s, static_cast<long long>(b.pos[t]), static_cast<long long>(want_pos));
    const int32_t id = b.tokens[t];
    if (id < 0 || id >= n_vocab())
      return err("token id %d at position %lld (sequence %zu, batch row %zu) is out of range [0, %d)", id,
                 static_cast<long long>(want_pos), s, t, n_vocab());
    ++runs.back().n;
  }
  for (const Run& r : runs) {
    const SessionImpl& si = *impl[r.s];
    if (si.n_past() + static_cast<int64_t>(r.n) > si.n_ctx())
      return err("context full: %d positions used + %zu new tokens > n_ctx %d (sequence %zu)", si.n_past(),
                 r.n, si.n_ctx(), r.s);
    if (const BlockTable* bt = impl[r.s]->state().kv_blocks();
        bt && si.n_past() + static_cast<int64_t>(r.n) > bt->rows())
      return err(
          "sequence %zu: its KV blocks cover %lld positions, the batch needs %lld (reserve them first)", r.s,
          static_cast<long long>(bt->rows()), static_cast<long long>(si.n_past() + r.n));
  }
  std::vector<int32_t> out_rows;
  for (const Run& r : runs)
    for (size_t t = r.t0; t < r.t0 + r.n; ++t)
      if (b.logits.empty() ? t == r.t0 + r.n - 1 : b.logits[t] != 0)
        out_rows.push_back(static_cast<int32_t>(t));

  // Steps of at most n_batch tokens of every session in the batch (a step's first run lends its
  // scratch); a run cut by a step boundary continues in the next.
  size_t cap = n;
  for (const Run& ru : runs) cap = std::min(cap, static_cast<size_t>(impl[ru.s]->n_batch()));
  std::vector<SeqRun> step_runs;
  std::vector<int32_t> step_out;
  std::vector<std::pair<size_t, size_t>> adv;  // (session, tokens) the step appends
  size_t r = 0, r_done = 0, k = 0;             // run r has r_done tokens evaluated; k: next out row
  for (size_t t0 = 0; t0 < n; t0 += cap) {
    const size_t t1 = std::min(n, t0 + cap);
    step_runs.clear();
    step_out.clear();
    adv.clear();
    while (r < runs.size() && runs[r].t0 + r_done < t1) {
      const Run& ru = runs[r];
      const size_t a = ru.t0 + r_done, e = std::min(t1, ru.t0 + ru.n);
      step_runs.push_back(SeqRun{&impl[ru.s]->state(), impl[ru.s]->n_past(), static_cast<int64_t>(a - t0),
                                 static_cast<int64_t>(e - a), impl[ru.s]->knobs()});
      adv.emplace_back(ru.s, e - a);
      if (e == ru.t0 + ru.n) {
        ++r;
        r_done = 0;
      } else {
        r_done = e - ru.t0;
      }
    }
    while (k < out_rows.size() && static_cast<size_t>(out_rows[k]) < t1)
      step_out.push_back(out_rows[k++] - static_cast<int32_t>(t0));
    Batch sb;
    sb.tokens = b.tokens.subspan(t0, t1 - t0);
    sb.runs = step_runs;
    sb.out_rows = step_out;
    float* dst = logits + (k - step_out.size()) * static_cast<size_t>(n_vocab());
    // A failed step may have written cache rows past n_past: they are simply overwritten later.
    STRATA_TRY(arch_->forward(sb, dst, *pool_));
    for (auto [s, m] : adv) impl[s]->advance(static_cast<int>(m));
  }
  return {};
}

const EngramStore* Model::engram_store() const {
  return engram_ ? &engram_->store() : nullptr;
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const LoadOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  if (is_checkpoint_dir(path)) {
    const std::string cfg_path = (std::filesystem::path(path) / "config.json").string();
    auto text = read_text_file(cfg_path);
    if (!text.ok()) return err_context("loading " + path, text.error());
    auto e = arch_find_config_text(text.value(), cfg_path);
    if (!e.ok()) return err_context("loading " + path, e.error());
    auto d = e.value()->make_dir(
        path, DirLoadOptions{opts.engram, opts.v41_oracle, opts.experts, opts.expert_stats});
    if (!d.ok()) return err_context("loading " + path, d.error());
    m->engram_ = std::move(d.value().engram);
    m->store_ = std::move(d.value().experts);
    m->st_dir_ = std::move(d.value().dir);
    m->arch_ = std::move(d.value().arch);
    const std::string tok_path = (std::filesystem::path(path) / "tokenizer.json").string();
    if (!opts.tokenizer_path.empty() || std::filesystem::exists(tok_path))
      STRATA_TRY(m->load_json_tokenizer(path, opts.tokenizer_path.empty() ? tok_path : opts.tokenizer_path));
    m->pool_ = std::make_unique<ThreadPool>(opts.n_threads);
    STRATA_TRY(m->place(path, opts));
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
  if (!e)
    return err("loading %s: architecture '%s' is not supported (known: %s)", path.c_str(),
               arch_name.value().c_str(), arch_names(ArchSource::gguf).c_str());
  auto arch = e->make(*m->file_);
  if (!arch.ok()) return err_context("loading " + path, arch.error());
  m->arch_ = std::move(arch).value();
  if (!opts.tokenizer_path.empty()) {
    STRATA_TRY(m->load_json_tokenizer(path, opts.tokenizer_path));
  } else {
    auto tok = Tokenizer::from_gguf(*m->file_);
    if (!tok.ok()) return err_context("loading " + path + ": tokenizer", tok.error());
    m->tokenizer_ = std::move(tok).value();
  }
  m->pool_ = std::make_unique<ThreadPool>(opts.n_threads);
  STRATA_TRY(m->place(path, opts));
  const HParams& hp = m->arch_->hparams();
  if (opts.experts.budget_bytes > 0 && hp.n_expert == 0)
    return err("loading %s: --expert-budget given, but the model has no routed experts", path.c_str());
  if (hp.n_expert > 0 && (opts.experts.budget_bytes > 0 || opts.expert_stats) && m->file_->n_shards() > 1)
    return err(
        "loading %s: the expert store reads experts from one GGUF file, and this model is split in %d shards "
        "(join them with `strata split --merge`)",
        path.c_str(), m->file_->n_shards());
  if (hp.n_expert > 0 && (opts.experts.budget_bytes > 0 || opts.expert_stats)) {
    auto st = expert_store_open(*m->file_, hp.n_layer, hp.n_expert, hp.n_expert_used, opts.experts);
    if (!st.ok()) return err_context("loading " + path, st.error());
    m->store_ = std::move(st).value();
  }
  return m;
}

Status Model::load_json_tokenizer(const std::string& path, const std::string& tokenizer_json) {
  auto tok = Tokenizer::from_json_file(tokenizer_json);
  if (!tok.ok()) return err_context("loading " + path + ": tokenizer", tok.error());
  if ((*tok)->n_vocab() > n_vocab())
    return err("loading %s: tokenizer %s has %d tokens, the model's vocabulary only %d", path.c_str(),
               tokenizer_json.c_str(), (*tok)->n_vocab(), n_vocab());
  tokenizer_ = std::move(tok).value();
  return {};
}

Status Model::place(const std::string& path, const LoadOptions& opts) {
  if (opts.device) {
    device_ = opts.device;
  } else {
    own_device_ = std::make_unique<CpuDevice>(*pool_);
    device_ = own_device_.get();
  }
  const int64_t buffers = device_->memory().buffers;
  const Status s = arch_->place(*device_);
  if (!s.ok())
    return err_context("loading " + path + ": placing the weights on " + device_->name(), s.error());
  // An architecture that places nothing (deepseek4, deepseek_v41: not behind the seam yet) would
  // run on the host whatever was asked: a GPU is refused by name instead.
  if (device_->kind() == DeviceKind::device_gpu && device_->memory().buffers == buffers)
    return err(
        "loading %s: %s does not run through the device seam yet: its layers run on the CPU only "
        "(--device none, not %s)",
        path.c_str(), arch_->hparams().arch.c_str(), device_->name().c_str());
  return {};
}

Status Model::place_experts(const DeviceExpertOptions& o) {
  const HParams& hp = arch_->hparams();
  if (gpu_experts_) return err("placing the experts on %s: placed already", device_->name().c_str());
  if (hp.n_expert == 0) return {};
  if (!file_) return err("placing the experts: a checkpoint directory keeps its routed experts on the host");
  if (device_->kind() != DeviceKind::device_gpu)
    return err("placing the experts: the model runs on %s, not a GPU", device_->name().c_str());
  STRATA_ASSIGN(DeviceExpertPlan plan, choose_device_experts(*file_, hp.n_layer, hp.n_expert, o));
  if (store_ && !store_->info().resident) {
    if (o.miss == MissPolicy::miss_copy)
      return err(
          "--miss-policy copy: the expert store's RAM budget (--expert-budget) and miss slots on %s are not "
          "combined yet (use --miss-policy cpu, or drop --expert-budget)",
          device_->name().c_str());
    if (plan.n_placed == 0) return {};  // every expert on the host: the store serves them all
    return err(
        "placing the experts on %s: the expert store's RAM budget (--expert-budget) and experts on the GPU "
        "are not combined yet (keep the experts on the host with --n-cpu-moe %d, or drop --expert-budget)",
        device_->name().c_str(), hp.n_layer);
  }
  STRATA_ASSIGN(gpu_experts_, DeviceExperts::open(*file_, *device_, std::move(plan), store_.get()));
  return {};
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

Result<uint64_t> Model::session_kv_bytes(const SessionOptions& opts) const {
  const int n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min(n_ctx_train(), 4096);
  if (n_ctx < 1 || opts.n_batch < 1) return uint64_t{0};
  STRATA_ASSIGN(const KvSpec spec, arch_->kv_spec_for(opts.kv));
  return spec.bytes(n_ctx, std::min(opts.n_batch, n_ctx));
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
  so.kv = opts.kv;
  so.experts = gpu_experts_ ? static_cast<ExpertSource*>(gpu_experts_.get()) : store_.get();
  so.device = device_;
  so.kv_pool = opts.kv_pool;
  if (opts.kv_pool && !arch_->paged_kv())
    return err("new_session: %s keeps its KV per sequence (no paged KV pool yet)", arch_name().c_str());
  if (opts.share_scratch) {
    auto* other = const_cast<Session*>(opts.share_scratch)->impl();
    if (!other || &other->model() != this)
      return err("new_session: share_scratch is a session of another model");
    if (other->n_ctx() != n_ctx || other->n_batch() != n_batch)
      return err("new_session: share_scratch has n_ctx %d / n_batch %d, this session %d / %d", other->n_ctx(),
                 other->n_batch(), n_ctx, n_batch);
    so.share_scratch = &other->state();
  }
  STRATA_ASSIGN(std::unique_ptr<ArchState> st, arch_->new_state(so));
  return std::unique_ptr<Session>(new SessionImpl(*this, std::move(st), n_ctx, n_batch));
}

}  // namespace strata
