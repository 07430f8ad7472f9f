#include "quantize/imatrix_file.h"

#include <cmath>
#include <cstring>

#include "format/gguf.h"

namespace strata {
namespace {

constexpr std::string_view kSum2 = ".in_sum2", kCounts = ".counts";

bool strip(std::string* s, std::string_view tail) {
  if (s->size() <= tail.size() || s->compare(s->size() - tail.size(), tail.size(), tail) != 0) return false;
  s->resize(s->size() - tail.size());
  return true;
}

Result<std::vector<float>> f32_values(const TensorView& t, const std::string& path) {
  if (t.type != GgmlType::f32)
    return err("imatrix %s: tensor %s is %s, expected f32", path.c_str(), t.name.c_str(), type_name(t.type));
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  for (float x : v) {
    if (!std::isfinite(x) || x < 0)
      return err("imatrix %s: tensor %s holds %g (expected finite values >= 0)", path.c_str(), t.name.c_str(),
                 x);
  }
  return v;
}

}  // namespace

std::vector<float> ImatrixEntry::importance(int64_t e) const {
  const float c = counts[static_cast<size_t>(e)];
  if (!(c > 0)) return {};
  std::vector<float> v(static_cast<size_t>(n_per_row));
  for (int64_t j = 0; j < n_per_row; ++j)
    v[static_cast<size_t>(j)] = sum2[static_cast<size_t>(e * n_per_row + j)] / c;
  return v;
}

Result<Imatrix> read_imatrix(const std::string& path) {
  STRATA_ASSIGN(auto f, GgufFile::open(path));
  STRATA_ASSIGN(const std::string type, f->get_string_or("general.type", ""));
  if (type != "imatrix")
    return err(
        "imatrix %s: general.type is '%s', not 'imatrix' (a GGUF imatrix of llama-imatrix or strata imatrix)",
        path.c_str(), type.c_str());
  Imatrix m;
  if (f->find("imatrix.datasets")) {
    STRATA_ASSIGN(m.datasets, f->get_string_array("imatrix.datasets"));
  }
  STRATA_ASSIGN(const int64_t cc, f->get_int_or("imatrix.chunk_count", 0));
  STRATA_ASSIGN(const int64_t cs, f->get_int_or("imatrix.chunk_size", 0));
  m.chunk_count = static_cast<uint32_t>(cc);
  m.chunk_size = static_cast<uint32_t>(cs);
  std::map<std::string, std::pair<const TensorView*, const TensorView*>> pairs;
  for (const TensorView& t : f->tensors()) {
    std::string name = t.name;
    if (strip(&name, kSum2)) {
      pairs[name].first = &t;
    } else if (strip(&name, kCounts)) {
      pairs[name].second = &t;
    }
  }
  if (pairs.empty()) return err("imatrix %s: no <name>.in_sum2 / <name>.counts tensors", path.c_str());
  for (const auto& [name, p] : pairs) {
    if (!p.first || !p.second)
      return err("imatrix %s: %s has %s but no %s", path.c_str(), name.c_str(),
                 p.first ? "in_sum2" : "counts", p.first ? "counts" : "in_sum2");
    ImatrixEntry e;
    e.n_per_row = p.first->ne[0];
    STRATA_ASSIGN(e.sum2, f32_values(*p.first, path));
    STRATA_ASSIGN(e.counts, f32_values(*p.second, path));
    if (p.first->rows() != p.second->n_elements())
      return err("imatrix %s: %s has %lld matrices of sums but %lld counts", path.c_str(), name.c_str(),
                 static_cast<long long>(p.first->rows()), static_cast<long long>(p.second->n_elements()));
    m.entries.emplace(name, std::move(e));
  }
  return m;
}

Status write_imatrix(const Imatrix& m, const std::string& path) {
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  w.set_array_string("imatrix.datasets", m.datasets);
  w.set_u32("imatrix.chunk_count", m.chunk_count);
  w.set_u32("imatrix.chunk_size", m.chunk_size);
  for (const auto& [name, e] : m.entries) {
    STRATA_TRY(
        w.add_tensor(name + std::string(kSum2), GgmlType::f32, {e.n_per_row, e.n_mat()}, e.sum2.data()));
    STRATA_TRY(w.add_tensor(name + std::string(kCounts), GgmlType::f32, {1, e.n_mat()}, e.counts.data()));
  }
  return w.write(path);
}

}  // namespace strata
