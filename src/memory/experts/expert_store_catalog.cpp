#include "memory/experts/expert_store_catalog.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "memory/io/io_file.h"
#include "memory/experts/pack.h"

namespace strata {

namespace {

// Whether the mapped bytes at `base` are the file's first page (read back with pread).
bool same_as_file_start(const GgufFile& f, const uint8_t* base) {
  const size_t n = std::min<size_t>(kIoAlign, f.file_size());
  std::vector<uint8_t> buf(n);
  const int fd = ::open(f.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t r = ::pread(fd, buf.data(), n, 0);
  ::close(fd);
  return r == static_cast<ssize_t>(n) && std::memcmp(buf.data(), base, n) == 0;
}

// GgufFile does not expose its mapping base. The mapping starts at a page boundary with the
// magic "GGUF"; tensor data starts at data_offset() + (tensor offset) from there. Walk down from
// the lowest tensor address page by page (bounded by the file size) until the magic is found at
// a base from which every tensor lies inside the file.
Result<const uint8_t*> mapping_base(const GgufFile& f) {
  const uint8_t* lo = nullptr;
  const uint8_t* hi = nullptr;
  for (const TensorView& t : f.tensors()) {
    if (t.nbytes == 0) continue;
    const uint8_t* p = static_cast<const uint8_t*>(t.data);
    if (!lo || p < lo) lo = p;
    if (!hi || p + t.nbytes > hi) hi = p + t.nbytes;
  }
  if (!lo) return err("%s: no tensor data", f.path().c_str());
  const uintptr_t first = reinterpret_cast<uintptr_t>(lo) - f.data_offset();
  for (uintptr_t b = first & ~uintptr_t{kIoAlign - 1};; b -= kIoAlign) {
    const uint8_t* base = reinterpret_cast<const uint8_t*>(b);
    if (hi <= base + f.file_size() && lo >= base + f.data_offset() && std::memcmp(base, "GGUF", 4) == 0 &&
        same_as_file_start(f, base))
      return base;
    if (reinterpret_cast<uintptr_t>(lo) - b >= f.file_size() || b < kIoAlign) break;
  }
  return err("%s: cannot locate tensor file offsets in the mapping", f.path().c_str());
}

}  // namespace

Status gguf_advise_streamed_experts(const GgufFile& f, bool dense_willneed) {
  STRATA_ASSIGN(const uint8_t* base, mapping_base(f));
  uint8_t* b = const_cast<uint8_t*>(base);  // madvise takes a non-const pointer; nothing is written
  if (::madvise(b, f.file_size(), MADV_RANDOM) != 0)
    return err("%s: madvise(MADV_RANDOM) failed: %s", f.path().c_str(), std::strerror(errno));
  if (!dense_willneed) return {};
  for (const TensorView& t : f.tensors()) {
    if (t.nbytes == 0 || is_routed_expert(t.name)) continue;
    const uintptr_t p = reinterpret_cast<uintptr_t>(t.data);
    const uintptr_t p0 = p & ~uintptr_t{kIoAlign - 1}, p1 = io_align_up(p + t.nbytes);
    ::madvise(reinterpret_cast<void*>(p0), p1 - p0, MADV_WILLNEED);  // advisory: failure is harmless
  }
  return {};
}

Result<uint64_t> gguf_tensor_file_offset(const GgufFile& f, const TensorView& t) {
  STRATA_ASSIGN(const uint8_t* base, mapping_base(f));
  return static_cast<uint64_t>(static_cast<const uint8_t*>(t.data) - base);
}

int ExpertCatalog::n_present_layers() const {
  int n = 0;
  for (const ExpertLayerInfo& l : layers_) n += l.present ? 1 : 0;
  return n;
}

Result<ExpertCatalog> ExpertCatalog::build(const GgufFile& f, int n_layer, int n_expert) {
  if (n_layer < 1 || n_expert < 1) return err("expert store: model has no routed experts");
  ExpertCatalog c;
  c.path_ = f.path();
  c.files_ = {ExpertBackingFile{f.path(), f.file_size()}};
  c.n_expert_ = n_expert;
  c.layers_.resize(static_cast<size_t>(n_layer));
  STRATA_ASSIGN(const uint8_t* base, mapping_base(f));
  size_t cover[expert_part_count] = {0, 0, 0};
  uint64_t expert_tensor_bytes = 0;
  for (int l = 0; l < n_layer; ++l) {
    ExpertLayerInfo& li = c.layers_[static_cast<size_t>(l)];
    const TensorView* t[expert_part_count];
    int found = 0;
    for (int p = 0; p < expert_part_count; ++p) {
      t[p] = f.find_tensor(blk_name(l, kRoutedExpertPartNames[p]));
      found += t[p] ? 1 : 0;
    }
    if (found == 0) continue;
    if (found != expert_part_count)
      return err("expert store: layer %d has only %d of the 3 expert tensors (gate/up/down)", l, found);
    li.present = true;
    for (int p = 0; p < expert_part_count; ++p) {
      const TensorView& x = *t[p];
      if (x.ne[2] != n_expert || x.ne[3] != 1)
        return err("expert store: tensor 'blk.%d.%s' is %s, expected %d experts in dim 2", l,
                   kRoutedExpertPartNames[p], x.shape_string().c_str(), n_expert);
      ExpertPart& q = li.part[p];
      q.slice0 = x.slice2d(0);
      q.slice0.name.clear();
      q.stride = x.nb[2];
      q.file_offset = static_cast<uint64_t>(static_cast<const uint8_t*>(x.data) - base);
      if (x.nb[2] != q.slice0.nbytes)
        return err("expert store: tensor 'blk.%d.%s' is not contiguous per expert", l,
                   kRoutedExpertPartNames[p]);
      for (int e = 0; e < n_expert; ++e) {
        const uint64_t off = q.file_offset + q.stride * static_cast<uint64_t>(e);
        cover[p] = std::max<size_t>(cover[p], io_align_up(off + q.stride) - io_align_down(off));
      }
      li.expert_bytes += q.stride;
      expert_tensor_bytes += x.nbytes;
    }
    c.routed_bytes_ += static_cast<uint64_t>(li.expert_bytes) * static_cast<uint64_t>(n_expert);
  }
  if (c.n_present_layers() == 0)
    return err("expert store: %s has no routed expert tensors", f.path().c_str());
  size_t off = 0;
  for (int p = 0; p < expert_part_count; ++p) {
    for (ExpertLayerInfo& li : c.layers_) li.part[p].slot_offset = off;
    off += cover[p];
  }
  c.slot_bytes_ = off;
  uint64_t all = 0;
  for (const TensorView& x : f.tensors()) all += x.nbytes;
  c.dense_bytes_ = all - expert_tensor_bytes;
  return c;
}

TensorView ExpertCatalog::view(int l, int e, int p, const uint8_t* slot) const {
  const ExpertPart& q = layer(l).part[p];
  TensorView v = q.slice0;
  const uint64_t off = part_offset(l, e, p);
  if (slot && bundled()) {
    v.data = slot + blob_part_[static_cast<size_t>(l)][static_cast<size_t>(p)];
  } else if (slot && checkpoint_dir()) {  // FP4: the MXFP4 blocks at the region's start
    v.data = slot + q.slot_offset + (q.fp4 ? 0 : st_seg(l, e, p, 0).off % kIoAlign);
  } else if (slot) {
    v.data = slot + q.slot_offset + (off - io_align_down(off));
  } else {
    STRATA_ASSERT(q.slice0.data != nullptr);  // a directory's experts: set_resident first
    v.data = static_cast<const uint8_t*>(q.slice0.data) + q.stride * static_cast<size_t>(e);
  }
  return v;
}

}  // namespace strata

namespace strata {

Status ExpertCatalog::attach_bundle(const PackIndex& ix, const GgufFile& f) {
  const char* b = ix.path.c_str();
  if (ix.source_size != f.file_size() || ix.source_tensors != static_cast<int64_t>(f.tensors().size()))
    return err(
        "expert bundle %s was packed from a different file (%llu bytes, %lld tensors) than %s (%zu bytes, "
        "%zu tensors)",
        b, static_cast<unsigned long long>(ix.source_size), static_cast<long long>(ix.source_tensors),
        f.path().c_str(), f.file_size(), f.tensors().size());
  if (ix.n_layers != n_layer() || ix.n_experts != n_expert_)
    return err("expert bundle %s has %d layers x %d experts, the model %d x %d", b, ix.n_layers, ix.n_experts,
               n_layer(), n_expert_);
  const size_t n = static_cast<size_t>(n_layer()) * static_cast<size_t>(n_expert_);
  std::vector<uint64_t> off(n, 0), len(n, 0);
  std::vector<std::array<size_t, expert_part_count>> part(static_cast<size_t>(n_layer()));
  size_t slot = 0;
  for (int l = 0; l < n_layer(); ++l) {
    const ExpertLayerInfo& li = layer(l);
    if (!li.present) continue;
    for (int e = 0; e < n_expert_; ++e) {
      const PackExpert* pe = ix.find(l, e);
      if (!pe) return err("expert bundle %s has no blob for layer %d expert %d", b, l, e);
      if (pe->parts.size() < expert_part_count)
        return err("expert bundle %s: layer %d expert %d has %zu parts, expected gate, up, down", b, l, e,
                   pe->parts.size());
      for (int p = 0; p < expert_part_count; ++p) {
        const PackPart& pp = pe->parts[static_cast<size_t>(p)];
        const std::string want = blk_name(l, kRoutedExpertPartNames[p]);
        const ExpertPart& q = li.part[p];
        if (pp.name != want || pp.type != q.slice0.type || pp.size != q.stride)
          return err(
              "expert bundle %s: layer %d expert %d part %d is '%s' (%s, %llu bytes), expected '%s' (%s, %zu "
              "bytes)",
              b, l, e, p, pp.name.c_str(), type_name(pp.type), static_cast<unsigned long long>(pp.size),
              want.c_str(), type_name(q.slice0.type), q.stride);
        if (pp.offset % 32 != 0)
          return err(
              "expert bundle %s: layer %d expert %d part '%s' at blob offset %llu is not 32-byte aligned", b,
              l, e, pp.name.c_str(), static_cast<unsigned long long>(pp.offset));
        if (e == 0) {
          part[static_cast<size_t>(l)][static_cast<size_t>(p)] = static_cast<size_t>(pp.offset);
        } else if (part[static_cast<size_t>(l)][static_cast<size_t>(p)] != pp.offset) {
          return err(
              "expert bundle %s: layer %d expert %d part '%s' is at blob offset %llu, expert 0's at %zu", b,
              l, e, pp.name.c_str(), static_cast<unsigned long long>(pp.offset),
              part[static_cast<size_t>(l)][static_cast<size_t>(p)]);
        }
      }
      const size_t i = static_cast<size_t>(l) * static_cast<size_t>(n_expert_) + static_cast<size_t>(e);
      off[i] = ix.data_offset + pe->offset;
      len[i] = pe->size;
      slot = std::max<size_t>(slot, static_cast<size_t>(pe->padded_size()));
    }
  }
  blob_off_ = std::move(off);
  blob_len_ = std::move(len);
  blob_part_ = std::move(part);
  bundle_path_ = ix.path;
  files_ = {ExpertBackingFile{ix.path, ix.file_size}};
  slot_bytes_ = slot;
  return {};
}

int ExpertCatalog::fill_segments(int l, int e, ExpertSegment* seg) const {
  if (bundled()) {
    const size_t i = static_cast<size_t>(l) * static_cast<size_t>(n_expert_) + static_cast<size_t>(e);
    seg[0] = ExpertSegment{0, blob_off_[i], static_cast<size_t>(blob_len_[i]), 0};
    return 1;
  }
  if (checkpoint_dir()) {
    int n = 0;
    for (int p = 0; p < expert_part_count; ++p) {
      const ExpertPart& q = layer(l).part[p];
      const StSeg& w = st_seg(l, e, p, 0);
      if (!q.fp4) {
        seg[n++] = ExpertSegment{w.file, w.off, q.stride, q.slot_offset};
        continue;
      }
      const StSeg& sc = st_seg(l, e, p, 1);
      seg[n++] = ExpertSegment{w.file, w.off, q.codes_bytes, q.codes_slot};
      seg[n++] = ExpertSegment{sc.file, sc.off, q.scale_bytes, q.scale_slot};
    }
    return n;
  }
  for (int p = 0; p < expert_part_count; ++p)
    seg[p] = ExpertSegment{0, part_offset(l, e, p), layer(l).part[p].stride, layer(l).part[p].slot_offset};
  return expert_part_count;
}

}  // namespace strata
