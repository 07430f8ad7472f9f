// Expert bundle writer and co-activation order (pack.h).
#include "memory/experts/pack.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "format/tensor_names.h"

namespace strata {

namespace {

// gate, up, down first (the order the FFN reads them), then anything else per expert by name.
int part_rank(const std::string& name) {
  const int p = routed_expert_part(name);
  return p < 0 ? kRoutedExpertParts : p;
}

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t align_up(uint64_t x) {
  return (x + kPackAlignment - 1) / kPackAlignment * kPackAlignment;
}

struct Out {
  std::string path;
  FILE* f = nullptr;
  uint64_t pos = 0;
  Status write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n)
      return err("writing %s failed at offset %llu: %s", path.c_str(), (unsigned long long)pos,
                 std::strerror(errno));
    pos += n;
    return {};
  }
  Status pad_to(uint64_t off) {
    static const uint8_t zeros[kPackAlignment] = {};
    while (pos < off)
      STRATA_TRY(write(zeros, static_cast<size_t>(std::min<uint64_t>(off - pos, kPackAlignment))));
    return {};
  }
};

}  // namespace

const PackExpert* PackIndex::find(int layer, int expert) const {
  auto it = std::lower_bound(experts.begin(), experts.end(), std::make_pair(layer, expert),
                             [](const PackExpert& e, const std::pair<int, int>& k) {
                               return std::make_pair(e.layer, e.expert) < k;
                             });
  return it != experts.end() && it->layer == layer && it->expert == expert ? &*it : nullptr;
}

std::vector<int> pack_coactivation_order(const RoutingTrace& t, int layer, int n_experts) {
  const size_t n = static_cast<size_t>(n_experts);
  std::vector<uint64_t> count(n, 0), co(n * n, 0);
  for (const RoutingRecord& r : t.records) {
    if (r.layer != layer) continue;
    for (int32_t a : r.experts) {
      if (a < 0 || a >= n_experts) continue;
      ++count[a];
      for (int32_t b : r.experts)
        if (b != a && b >= 0 && b < n_experts) ++co[static_cast<size_t>(a) * n + static_cast<size_t>(b)];
    }
  }
  std::vector<int> order;
  std::vector<char> placed(n, 0);
  int last = -1;
  for (size_t step = 0; step < n; ++step) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e) {
      if (placed[e]) continue;
      if (best < 0) {
        best = e;
        continue;
      }
      const uint64_t ce = last >= 0 ? co[static_cast<size_t>(last) * n + e] : 0;
      const uint64_t cb = last >= 0 ? co[static_cast<size_t>(last) * n + best] : 0;
      if (ce > cb || (ce == cb && count[e] > count[best])) best = e;
    }
    placed[best] = 1;
    order.push_back(best);
    last = best;
  }
  return order;
}

Result<PackIndex> pack_write(const GgufFile& f, const std::string& path, const PackOptions& opts) {
  STRATA_ASSIGN(const std::string arch, f.get_string("general.architecture"));
  STRATA_ASSIGN(const int64_t n_expert, f.get_int_or(arch + ".expert_count", 0));
  STRATA_ASSIGN(const int64_t n_block, f.get_int_or(arch + ".block_count", 0));
  if (n_expert <= 0 || n_block <= 0)
    return err("pack: %s has no routed experts (%s.expert_count = %lld)", f.path().c_str(), arch.c_str(),
               (long long)n_expert);
  if (n_expert > (1 << 20) || n_block > (1 << 20))
    return err("pack: %s: implausible expert grid", f.path().c_str());
  PackIndex ix;
  ix.path = path;
  ix.source_path = f.path();
  ix.source_size = f.file_size();
  ix.source_tensors = static_cast<int64_t>(f.tensors().size());
  ix.n_layers = static_cast<int>(n_block);
  ix.n_experts = static_cast<int>(n_expert);
  if (opts.trace && (opts.trace->meta.n_layers > ix.n_layers || opts.trace->meta.n_experts > ix.n_experts))
    return err("pack: the routing trace's grid (%d layers x %d experts) does not match the model (%d x %d)",
               opts.trace->meta.n_layers, opts.trace->meta.n_experts, ix.n_layers, ix.n_experts);

  std::vector<std::vector<const TensorView*>> parts(static_cast<size_t>(n_block));
  for (const TensorView& t : f.tensors()) {
    if (!is_routed_expert(t.name)) continue;
    const int blk = blk_index(t.name);
    if (blk < 0 || blk >= n_block)
      return err("pack: tensor '%s' is not in a block < %lld", t.name.c_str(), (long long)n_block);
    if (t.n_dims < 2 || t.ne[t.n_dims - 1] != n_expert)
      return err("pack: tensor '%s' (%s): last dimension must be the %lld experts", t.name.c_str(),
                 t.shape_string().c_str(), (long long)n_expert);
    parts[blk].push_back(&t);
  }
  // Layout: per layer in expert order, each blob 4 KiB aligned.
  uint64_t off = 0;
  size_t n_blobs = 0;
  ix.order.resize(static_cast<size_t>(n_block));
  for (int l = 0; l < n_block; ++l) {
    auto& ps = parts[l];
    if (ps.empty()) continue;
    std::stable_sort(ps.begin(), ps.end(), [](const TensorView* a, const TensorView* b) {
      const int ra = part_rank(a->name), rb = part_rank(b->name);
      return ra != rb ? ra < rb : a->name < b->name;
    });
    std::vector<int> order;
    if (opts.trace) {
      order = pack_coactivation_order(*opts.trace, l, ix.n_experts);
    } else {
      for (int e = 0; e < ix.n_experts; ++e) order.push_back(e);
    }
    ix.order[l] = order;
    for (int e : order) {
      PackExpert pe;
      pe.layer = l;
      pe.expert = e;
      pe.offset = off;
      for (const TensorView* t : ps) {
        PackPart pp;
        pp.name = t->name;
        pp.type = t->type;
        pp.ne.assign(t->ne, t->ne + t->n_dims - 1);
        pp.offset = pe.size;
        pp.size = t->nb[t->n_dims - 1];
        pe.size += pp.size;
        pe.parts.push_back(std::move(pp));
      }
      off += pe.padded_size();
      ix.experts.push_back(std::move(pe));
      ++n_blobs;
    }
  }
  if (n_blobs == 0) return err("pack: %s has no routed expert tensors (*_exps)", f.path().c_str());

  // Index JSON (offsets relative to the data section, so its own size does not matter).
  nlohmann::json j;
  j["format"] = "strata-pack";
  j["version"] = kPackVersion;
  j["alignment"] = kPackAlignment;
  j["source"] = {{"path", ix.source_path}, {"size", ix.source_size}, {"tensors", ix.source_tensors}};
  j["n_layers"] = ix.n_layers;
  j["n_experts"] = ix.n_experts;
  j["order"] = ix.order;
  j["experts"] = nlohmann::json::array();
  for (const PackExpert& pe : ix.experts) {
    nlohmann::json je = {
        {"layer", pe.layer}, {"expert", pe.expert}, {"offset", pe.offset}, {"size", pe.size}};
    for (const PackPart& pp : pe.parts)
      je["parts"].push_back({{"name", pp.name},
                             {"type", type_name(pp.type)},
                             {"ne", pp.ne},
                             {"offset", pp.offset},
                             {"size", pp.size}});
    j["experts"].push_back(std::move(je));
  }
  const std::string index = j.dump();
  const uint64_t index_offset = 64;
  ix.data_offset = align_up(index_offset + index.size());
  ix.file_size = ix.data_offset + off;
  std::sort(ix.experts.begin(), ix.experts.end(), [](const PackExpert& a, const PackExpert& b) {
    return std::tie(a.layer, a.expert) < std::tie(b.layer, b.expert);
  });

  uint8_t header[64] = {};
  std::memcpy(header, "STRATAPK", 8);
  put_u32(header + 8, kPackVersion);
  put_u32(header + 12, kPackAlignment);
  put_u64(header + 16, index_offset);
  put_u64(header + 24, index.size());
  put_u64(header + 32, ix.data_offset);
  put_u64(header + 40, ix.file_size);

  Out out{path + ".tmp"};
  out.f = std::fopen(out.path.c_str(), "wb");
  if (!out.f) return err("cannot create %s: %s", out.path.c_str(), std::strerror(errno));
  auto body = [&]() -> Status {
    STRATA_TRY(out.write(header, sizeof header));
    STRATA_TRY(out.write(index.data(), index.size()));
    STRATA_TRY(out.pad_to(ix.data_offset));
    for (int l = 0; l < ix.n_layers; ++l) {  // file order: per layer in bundle order
      for (int e : ix.order[l]) {
        const PackExpert* pe = ix.find(l, e);
        STRATA_ASSERT(pe && out.pos == ix.data_offset + pe->offset);
        for (size_t i = 0; i < pe->parts.size(); ++i) {
          const TensorView* t = parts[l][i];
          const uint8_t* src =
              static_cast<const uint8_t*>(t->data) + static_cast<uint64_t>(e) * pe->parts[i].size;
          STRATA_TRY(out.write(src, pe->parts[i].size));
        }
        STRATA_TRY(out.pad_to(ix.data_offset + pe->offset + pe->padded_size()));
      }
    }
    if (std::fflush(out.f) != 0) return err("writing %s failed: %s", out.path.c_str(), std::strerror(errno));
    return {};
  };
  Status st = body();
  if (std::fclose(out.f) != 0 && st.ok())
    st = err("closing %s failed: %s", out.path.c_str(), std::strerror(errno));
  std::error_code ec;
  if (!st.ok()) {
    std::filesystem::remove(out.path, ec);
    return st.error();
  }
  std::filesystem::rename(out.path, path, ec);
  if (ec) return err("renaming %s to %s failed: %s", out.path.c_str(), path.c_str(), ec.message().c_str());
  return ix;
}

}  // namespace strata
