// ExpertCatalog over a checkpoint directory's safetensors shards (expert_store_catalog.h): each
// expert part's tensors found by the architecture's names and checked, their covers laid out in a
// slot, and the FP4 parts' transform to MXFP4 after the reads.
#include <algorithm>
#include <filesystem>
#include <map>

#include "base/assert.h"
#include "format/safetensors_dir.h"
#include "memory/experts/expert_store_catalog.h"
#include "memory/io/io_file.h"
#include "quant/fp8_fp4.h"
#include "quant/qtypes.h"

namespace strata {

namespace {

std::string shape_str(StDtype t, std::vector<int64_t> shape) {
  StTensor x;
  x.dtype = t;
  x.shape = std::move(shape);
  return x.shape_string();
}

uint64_t cover_of(uint64_t off, uint64_t len) {
  return io_align_up(off + len) - io_align_down(off);
}

}  // namespace

Result<ExpertCatalog> ExpertCatalog::build_safetensors(const SafetensorsDir& d, const StExpertNames& names,
                                                       int n_layer, int n_expert) {
  if (n_layer < 1 || n_expert < 1) return err("expert store: model has no routed experts");
  ExpertCatalog c;
  c.path_ = d.dir();
  c.n_expert_ = n_expert;
  c.st_names_ = names;
  c.layers_.resize(static_cast<size_t>(n_layer));
  c.st_seg_.resize(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert) * expert_part_count * 2);
  const char* D = d.dir().c_str();
  std::map<std::string, int> file_index;  // shard base name -> backing file
  auto file_of = [&](const std::string& tensor) -> int {
    const std::string f = d.file_of(tensor);
    auto [it, fresh] = file_index.emplace(f, static_cast<int>(c.files_.size()));
    if (fresh) {
      const std::string path = (std::filesystem::path(d.dir()) / f).string();
      uint64_t size = 0;
      for (const auto& s : d.shards())
        if (s->path() == path) size = s->file_size();
      c.files_.push_back(ExpertBackingFile{path, size});
    }
    return it->second;
  };
  size_t cover[expert_part_count][3] = {};  // per part: gap, codes (or BF16) cover, scale cover
  uint64_t expert_tensor_bytes = 0;
  for (int l = 0; l < n_layer; ++l) {
    ExpertLayerInfo& li = c.layers_[static_cast<size_t>(l)];
    li.present = true;
    for (int p = 0; p < expert_part_count; ++p) {
      const int64_t out = names.out[p], in = names.in[p];
      ExpertPart& q = li.part[p];
      for (int e = 0; e < n_expert; ++e) {
        const std::string wn = names.weight(l, e, p);
        const StTensor* w = d.find(wn);
        if (!w)
          return err(
              "checkpoint %s: routed expert tensor '%s' is missing (expected FP4 I8 [%lld, %lld] with its "
              "scale, or %s)",
              D, wn.c_str(), static_cast<long long>(out), static_cast<long long>(in / 2),
              shape_str(StDtype::bf16, {out, in}).c_str());
        const std::string wf = d.file_of(wn);
        const bool fp4 = w->dtype == StDtype::i8 || w->dtype == StDtype::u8;
        if (!fp4 && w->dtype != StDtype::bf16)
          return err(
              "checkpoint %s: %s: routed expert tensor '%s' is %s; the expert store reads FP4 (I8/U8 "
              "E2M1 pairs + F8_E8M0 scale) or BF16",
              D, wf.c_str(), wn.c_str(), w->shape_string().c_str());
        if (e == 0) {
          q.fp4 = fp4;
        } else if (fp4 != q.fp4) {
          return err(
              "checkpoint %s: %s: routed expert tensor '%s' is %s, but expert 0's is %s: the experts "
              "of one layer must be stored alike",
              D, wf.c_str(), wn.c_str(), w->shape_string().c_str(), q.fp4 ? "FP4" : "BF16");
        }
        const std::vector<int64_t> want =
            fp4 ? std::vector<int64_t>{out, in / 2} : std::vector<int64_t>{out, in};
        if (w->shape != want || (fp4 && in % 32 != 0))
          return err("checkpoint %s: %s: routed expert tensor '%s': expected %s, got %s", D, wf.c_str(),
                     wn.c_str(), shape_str(w->dtype, want).c_str(), w->shape_string().c_str());
        StSeg& sw = c.st_seg_[((static_cast<size_t>(l) * n_expert + e) * expert_part_count + p) * 2];
        sw = StSeg{file_of(wn), w->offset};
        expert_tensor_bytes += w->nbytes;
        if (!fp4) {
          cover[p][1] = std::max<size_t>(cover[p][1], cover_of(w->offset, w->nbytes));
          continue;
        }
        const std::string sn = names.scale(l, e, p);
        const StTensor* s = d.find(sn);
        if (!s)
          return err(
              "checkpoint %s: %s: FP4 expert weight '%s' needs its scale tensor '%s' (%s), which is "
              "missing",
              D, wf.c_str(), wn.c_str(), sn.c_str(), shape_str(StDtype::f8_e8m0, {out, in / 32}).c_str());
        if (s->dtype != StDtype::f8_e8m0 || s->shape != std::vector<int64_t>{out, in / 32})
          return err("checkpoint %s: %s: FP4 scale '%s' of '%s' (one per 32 weights): expected %s, got %s", D,
                     d.file_of(sn).c_str(), sn.c_str(), wn.c_str(),
                     shape_str(StDtype::f8_e8m0, {out, in / 32}).c_str(), s->shape_string().c_str());
        c.st_seg_[((static_cast<size_t>(l) * n_expert + e) * expert_part_count + p) * 2 + 1] =
            StSeg{file_of(sn), s->offset};
        expert_tensor_bytes += s->nbytes;
        cover[p][0] = std::max<size_t>(cover[p][0], io_align_up(s->nbytes));
        cover[p][1] = std::max<size_t>(cover[p][1], cover_of(w->offset, w->nbytes));
        cover[p][2] = std::max<size_t>(cover[p][2], cover_of(s->offset, s->nbytes));
      }
      q.slice0 = TensorView{};
      q.slice0.type = q.fp4 ? GgmlType::mxfp4 : GgmlType::bf16;
      q.slice0.n_dims = 2;
      q.slice0.ne[0] = in;
      q.slice0.ne[1] = out;
      tensor_view_set_contiguous(&q.slice0);
      q.slice0.data = nullptr;
      q.stride = q.slice0.nbytes;
      if (q.fp4) {
        q.codes_bytes = static_cast<size_t>(out * in / 2);
        q.scale_bytes = static_cast<size_t>(out * in / 32);
        STRATA_ASSERT(q.stride == q.codes_bytes + q.scale_bytes);  // 17 bytes per 32 weights either way
        li.expert_bytes += q.codes_bytes + q.scale_bytes;
      } else {
        li.expert_bytes += q.stride;
      }
    }
    c.routed_bytes_ += static_cast<uint64_t>(li.expert_bytes) * static_cast<uint64_t>(n_expert);
  }
  // One layout for every layer (the layers' shapes are the same): per part its region, FP4 parts
  // [gap | codes cover | scale cover], BF16 parts their cover.
  size_t off = 0;
  for (int p = 0; p < expert_part_count; ++p) {
    for (ExpertLayerInfo& li : c.layers_) {
      ExpertPart& q = li.part[p];
      q.slot_offset = off;
      q.codes_slot = off + cover[p][0];
      q.scale_slot = q.codes_slot + cover[p][1];
      c.has_fp4_ = c.has_fp4_ || q.fp4;
    }
    off += cover[p][0] + cover[p][1] + cover[p][2];
  }
  c.slot_bytes_ = off;
  uint64_t all = 0;
  for (const auto& s : d.shards())
    for (const StTensor& t : s->tensors()) all += t.nbytes;
  c.dense_bytes_ = all - expert_tensor_bytes;
  return c;
}

Status ExpertCatalog::transform(int l, int e, uint8_t* slot) const {
  for (int p = 0; p < expert_part_count; ++p) {
    const ExpertPart& q = layer(l).part[p];
    if (!q.fp4) continue;
    const StSeg& w = st_seg(l, e, p, 0);
    const StSeg& s = st_seg(l, e, p, 1);
    const uint8_t* codes = slot + q.codes_slot + w.off % kIoAlign;
    const uint8_t* scales = slot + q.scale_slot + s.off % kIoAlign;
    const int64_t bad =
        e2m1_pairs_to_mxfp4(codes, scales, static_cast<int64_t>(q.scale_bytes), slot + q.slot_offset);
    if (bad >= 0) {
      const int64_t nb = q.slice0.ne[0] / 32;
      return err("%s: FP4 scale '%s' is NaN (0xff) at [%lld, %lld]",
                 files_[static_cast<size_t>(s.file)].path.c_str(), st_names_.scale(l, e, p).c_str(),
                 static_cast<long long>(bad / nb), static_cast<long long>(bad % nb));
    }
  }
  return {};
}

Status ExpertCatalog::set_resident(int l, int p, const TensorView& stack) {
  ExpertPart& q = layers_[static_cast<size_t>(l)].part[p];
  if (stack.type != q.slice0.type || stack.ne[0] != q.slice0.ne[0] || stack.ne[1] != q.slice0.ne[1] ||
      stack.ne[2] != n_expert_ || stack.nb[2] != q.stride)
    return err("expert store: layer %d part %d is held as %s, the catalog has %s experts of %s", l, p,
               stack.shape_string().c_str(), type_name(q.slice0.type), q.slice0.shape_string().c_str());
  q.slice0.data = stack.data;
  return {};
}

}  // namespace strata
