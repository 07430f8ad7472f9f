#include "runtime/imatrix_collect.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/activation_tap.h"
#include "runtime/perplexity.h"

namespace strata {
namespace {

// Σ x² (double) per column per matrix of one weight tensor.
struct Acc {
  const TensorView* t = nullptr;
  int64_t n_per_row = 0, n_mat = 1;
  std::vector<double> sum2;
  std::vector<double> counts;
};

class Collector final : public ActivationTap {
 public:
  Collector(const GgufFile& f, bool process_output) : process_output_(process_output) {
    for (const TensorView& t : f.tensors()) {
      const std::string& n = t.name;
      if (t.ne[1] <= 1 || n.size() < 7 || n.compare(n.size() - 7, 7, ".weight") != 0) continue;
      Acc a;
      a.t = &t;
      a.n_per_row = t.ne[0];
      a.n_mat = t.ne[2] * t.ne[3];
      a.sum2.assign(static_cast<size_t>(a.n_per_row * a.n_mat), 0.0);
      a.counts.assign(static_cast<size_t>(a.n_mat), 0.0);
      by_name_.emplace(n, accs_.size());
      accs_.push_back(std::move(a));
    }
    for (size_t i = 0; i < accs_.size(); ++i) {
      const auto* p = static_cast<const uint8_t*>(accs_[i].t->data);
      by_addr_.emplace_back(p, i);
    }
    std::sort(by_addr_.begin(), by_addr_.end());
  }

  // By name, or (device views of the weights carry none) by the address of the first row.
  void on_linear(const TensorView& w, const float* x, int64_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    Acc* a = nullptr;
    int64_t e = 0;
    if (auto it = by_name_.find(w.name); !w.name.empty() && it != by_name_.end()) {
      a = &accs_[it->second];
    } else if (!w.name.empty()) {
      return;  // a matrix built at load, not in the file
    } else {
      a = by_address(w.data, &e);
    }
    if (!a) {
      unattributed_++;
      return;
    }
    if (w.ne[0] != a->n_per_row || e >= a->n_mat) return;
    for (int64_t r = 0; r < n; ++r) add(*a, e, x + r * a->n_per_row, 0, a->n_per_row, true);
  }

  void on_expert(const void* mat, const float* x, int64_t c0, int64_t nc, bool count_row) override {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t e = 0;
    Acc* a = by_address(mat, &e);
    if (a && c0 + nc <= a->n_per_row) {
      add(*a, e, x, c0, nc, count_row);
    } else if (!a) {
      unattributed_++;
    }
  }

  int64_t unattributed() const { return unattributed_; }

  Imatrix result(const ImatrixCollectOptions& o, int n_ctx, int chunks) const {
    Imatrix m;
    m.datasets = {o.dataset};
    m.chunk_size = static_cast<uint32_t>(n_ctx);
    m.chunk_count = static_cast<uint32_t>(chunks);
    for (const Acc& a : accs_) {
      if (std::all_of(a.counts.begin(), a.counts.end(), [](double c) { return c == 0; })) continue;
      if (!process_output_ && a.t->name == "output.weight") continue;
      ImatrixEntry e;
      e.n_per_row = a.n_per_row;
      e.sum2.assign(a.sum2.begin(), a.sum2.end());
      e.counts.assign(a.counts.begin(), a.counts.end());
      m.entries.emplace(a.t->name, std::move(e));
    }
    return m;
  }

 private:
  // The tensor whose data holds address p, and the matrix (expert) of it that p starts.
  Acc* by_address(const void* mat, int64_t* e) {
    const auto* p = static_cast<const uint8_t*>(mat);
    auto it = std::upper_bound(by_addr_.begin(), by_addr_.end(), std::make_pair(p, accs_.size()));
    if (it == by_addr_.begin()) return nullptr;
    Acc& a = accs_[std::prev(it)->second];
    const auto* base = static_cast<const uint8_t*>(a.t->data);
    if (p >= base + a.t->nbytes) return nullptr;
    *e = a.t->nb[2] > 0 ? static_cast<int64_t>(p - base) / static_cast<int64_t>(a.t->nb[2]) : 0;
    return *e < a.n_mat ? &a : nullptr;
  }

  static void add(Acc& a, int64_t e, const float* x, int64_t c0, int64_t nc, bool count_row) {
    double* s = a.sum2.data() + e * a.n_per_row + c0;
    for (int64_t j = 0; j < nc; ++j) s[j] += double{x[j]} * x[j];
    if (count_row) a.counts[static_cast<size_t>(e)] += 1;
  }

  bool process_output_;
  std::mutex mu_;
  std::vector<Acc> accs_;
  std::map<std::string, size_t, std::less<>> by_name_;
  std::vector<std::pair<const uint8_t*, size_t>> by_addr_;
  int64_t unattributed_ = 0;
};

// Clears the process-wide tap however collect_imatrix returns.
struct TapScope {
  explicit TapScope(ActivationTap* t) { set_activation_tap(t); }
  ~TapScope() { set_activation_tap(nullptr); }
  TapScope(const TapScope&) = delete;
  TapScope& operator=(const TapScope&) = delete;
};

}  // namespace

Result<Imatrix> collect_imatrix(const Model& model, std::string_view text, const ImatrixCollectOptions& o,
                                const ImatrixProgress& progress) {
  if (!model.has_gguf()) return err("imatrix: the model was not loaded from a GGUF file");
  if (!model.has_tokenizer()) return err("imatrix: the model has no tokenizer");
  if (activation_tap()) return err("imatrix: another collection is running in this process");
  PerplexityOptions po;
  po.n_ctx = o.n_ctx;
  po.n_batch = o.n_batch;
  const int n_ctx = perplexity_ctx(model, po);
  po.n_ctx = n_ctx;
  const std::vector<int32_t> ids =
      model.tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false);
  if (static_cast<int64_t>(ids.size()) < n_ctx)
    return err(
        "imatrix: the calibration text has %zu tokens, fewer than one chunk of %d (give a longer text or a "
        "smaller -c)",
        ids.size(), n_ctx);
  Collector c(model.file(), o.process_output);
  int chunks = 0;
  {
    TapScope scope(&c);
    auto r = perplexity(model, ids, po, [&](const PerplexityWindow& w) {
      chunks = w.index + 1;
      if (progress) progress(w.index, w.n_windows);
    });
    if (!r.ok()) return r.error();
    chunks = r->windows;
  }
  if (c.unattributed() > 0)
    return err(
        "imatrix: %lld activation rows entered expert matrices not mapped from the model file (load the "
        "experts resident)",
        static_cast<long long>(c.unattributed()));
  return c.result(o, n_ctx, chunks);
}

}  // namespace strata
