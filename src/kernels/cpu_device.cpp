#include "kernels/cpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>

#include "base/units.h"
#include "kernels/linear.h"
#include "kernels/sparse_attention.h"

namespace strata {

CpuDevice::CpuDevice(ThreadPool& pool, std::string name, uint64_t budget_bytes, bool host_visible)
    : pool_(pool), name_(std::move(name)), host_visible_(host_visible) {
  mem_.budget = budget_bytes;
}

CpuDevice::~CpuDevice() = default;

DeviceMemory CpuDevice::memory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mem_;
}

DeviceTicket CpuDevice::done() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++issued_;
}

Result<DeviceBuffer> CpuDevice::alloc(size_t bytes, std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes == 0)
    return err("%s: a buffer for %.*s of 0 bytes", name_.c_str(), int(what.size()), what.data());
  if (mem_.budget > 0 && mem_.allocated + bytes > mem_.budget)
    return err("%s: no room for %.*s (%s): %s of %s budget in use", name_.c_str(), int(what.size()),
               what.data(), format_bytes(bytes).c_str(), format_bytes(mem_.allocated).c_str(),
               format_bytes(mem_.budget).c_str());
  constexpr size_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (p == nullptr)
    return err("%s: allocating %s for %.*s failed", name_.c_str(), format_bytes(bytes).c_str(),
               int(what.size()), what.data());
  DeviceBuffer b;
  b.id = next_id_++;
  b.bytes = bytes;
  b.host = host_visible_ ? static_cast<uint8_t*>(p) : nullptr;
  buffers_.emplace(b.id,
                   Buffer{AlignedPtr<uint8_t>(static_cast<uint8_t*>(p)), static_cast<uint8_t*>(p), bytes});
  mem_.allocated += bytes;
  mem_.peak = std::max(mem_.peak, mem_.allocated);
  ++mem_.buffers;
  return b;
}

Result<DeviceBuffer> CpuDevice::import(const void* host, size_t bytes, std::string_view what) {
  if (host == nullptr || bytes == 0)
    return err("%s: importing %.*s: no memory (%zu bytes at %p)", name_.c_str(), int(what.size()),
               what.data(), bytes, host);
  if (!host_visible_) {  // as a device with memory of its own: a copy
    STRATA_ASSIGN(DeviceBuffer b, alloc(bytes, what));
    std::lock_guard<std::mutex> lock(mu_);
    std::memcpy(buffers_.at(b.id).mem, host, bytes);
    return b;
  }
  std::lock_guard<std::mutex> lock(mu_);
  DeviceBuffer b;
  b.id = next_id_++;
  b.bytes = bytes;
  b.host = static_cast<uint8_t*>(const_cast<void*>(host));  // read-only use: weights are never written
  buffers_.emplace(b.id, Buffer{AlignedPtr<uint8_t>(), b.host, bytes});
  mem_.imported += bytes;
  ++mem_.buffers;
  return b;
}

void CpuDevice::free(DeviceBuffer& b) {
  if (b.id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(b.id);
  if (it != buffers_.end()) {
    (it->second.owned ? mem_.allocated : mem_.imported) -= it->second.bytes;
    --mem_.buffers;
    buffers_.erase(it);
  }
  b = DeviceBuffer{};
}

Result<uint8_t*> CpuDevice::resolve(const DeviceBuffer& b, size_t offset, size_t bytes,
                                    const char* op) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(b.id);
  if (b.id == 0 || it == buffers_.end() || (b.host != nullptr && it->second.mem != b.host))
    return err("%s: %s: buffer %llu is not a live buffer of this device", name_.c_str(), op,
               static_cast<unsigned long long>(b.id));
  const size_t size = it->second.bytes;
  if (offset > size || bytes > size - offset)
    return err("%s: %s: %zu bytes at offset %zu are outside buffer %llu of %zu bytes", name_.c_str(), op,
               bytes, offset, static_cast<unsigned long long>(b.id), size);
  return it->second.mem + offset;
}

Result<TensorView> CpuDevice::mat_view(const DeviceMat& m, const char* op, const char* what) const {
  if (m.buf == nullptr) return err("%s: %s: %s has no buffer", name_.c_str(), op, what);
  if (m.out < 1 || m.in < 1 || m.row_stride < row_bytes(m.type, m.in))
    return err("%s: %s: %s has shape {%lld, %lld} with rows %zu bytes apart", name_.c_str(), op, what,
               static_cast<long long>(m.in), static_cast<long long>(m.out), m.row_stride);
  STRATA_ASSIGN(uint8_t * p,
                resolve(*m.buf, m.offset,
                        m.row_stride * static_cast<size_t>(m.out - 1) + row_bytes(m.type, m.in), what));
  TensorView v;
  v.type = m.type;
  v.n_dims = 2;
  v.ne[0] = m.in;
  v.ne[1] = m.out;
  tensor_view_set_contiguous(&v);
  v.nb[1] = m.row_stride;
  v.nb[2] = v.nb[3] = m.row_stride * static_cast<size_t>(m.out);
  v.data = p;
  v.nbytes = v.nb[2];
  return v;
}

Result<const float*> CpuDevice::vec_view(const DeviceVec& v, int64_t n, const char* op,
                                         const char* what) const {
  if (v.buf == nullptr) return static_cast<const float*>(nullptr);
  if (v.n != n)
    return err("%s: %s: %s has %lld values, expected %lld", name_.c_str(), op, what,
               static_cast<long long>(v.n), static_cast<long long>(n));
  STRATA_ASSIGN(uint8_t * p, resolve(*v.buf, v.offset, sizeof(float) * static_cast<size_t>(n), what));
  return reinterpret_cast<const float*>(p);
}

Result<KvRows> CpuDevice::rows_view(const DeviceRows& r, int64_t width, int64_t end, const char* op) const {
  if (r.buf == nullptr || r.width != width || r.capacity < 1)
    return err("%s: %s: cache rows of width %lld x %lld, expected width %lld", name_.c_str(), op,
               static_cast<long long>(r.width), static_cast<long long>(r.capacity),
               static_cast<long long>(width));
  if (!kv_rows_type_ok(r.type) || r.width % type_info(r.type).block_size != 0)
    return err("%s: %s: cache rows of type %s and width %lld cannot be read", name_.c_str(), op,
               type_name(r.type), static_cast<long long>(r.width));
  const bool paged = r.blocks != nullptr;
  if (paged && (r.ring || r.block_rows < 1 || r.capacity % r.block_rows != 0 || r.stored_rows < r.block_rows))
    return err("%s: %s: paged cache rows with blocks of %lld rows, capacity %lld, %lld rows stored",
               name_.c_str(), op, static_cast<long long>(r.block_rows), static_cast<long long>(r.capacity),
               static_cast<long long>(r.stored_rows));
  const int64_t stored = paged ? r.stored_rows : r.capacity;
  KvRows v = KvRows::typed(nullptr, r.width, r.capacity, r.ring, r.type);
  v.hadamard = r.hadamard;
  STRATA_ASSIGN(v.data, resolve(*r.buf, r.offset, v.row_bytes * static_cast<size_t>(stored), "cache rows"));
  // Paged: every block the op touches (rows < end) is one the region holds.
  for (int64_t b = 0; paged && b * r.block_rows < std::min(end, r.capacity); ++b)
    if (r.blocks[b] < 0 || r.blocks[b] >= stored / r.block_rows)
      return err("%s: %s: block table entry %lld (rows %lld..) is block %d of %lld", name_.c_str(), op,
                 static_cast<long long>(b), static_cast<long long>(b * r.block_rows), r.blocks[b],
                 static_cast<long long>(stored / r.block_rows));
  v.blocks = r.blocks;
  v.block_rows = r.block_rows;
  return v;
}

Result<DeviceTicket> CpuDevice::upload(const DeviceBuffer& dst, size_t offset, const void* src,
                                       size_t bytes) {
  STRATA_ASSIGN(uint8_t * p, resolve(dst, offset, bytes, "upload"));
  if (bytes > 0) std::memcpy(p, src, bytes);
  return done();
}

Result<DeviceTicket> CpuDevice::download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) {
  STRATA_ASSIGN(const uint8_t* p, resolve(src, offset, bytes, "download"));
  if (bytes > 0) std::memcpy(dst, p, bytes);
  return done();
}

Result<DeviceTicket> CpuDevice::run_experts(const DeviceExpertWork& w) {
  if (w.n_run < 0 || w.n_run > w.n_expert || w.K < 1 || w.n < 0 || w.step.d < 1 || w.step.F < 1)
    return err("%s: run_experts on layer %d: %d experts of %d, K %d, %lld tokens", name_.c_str(), w.layer,
               w.n_run, w.n_expert, w.K, static_cast<long long>(w.n));
  if (w.n_run == 0 || w.n == 0) return done();
  arena_.reset();
  const int E = w.n_expert;
  ExpertMat* gate = arena_.alloc<ExpertMat>(static_cast<size_t>(E));
  ExpertMat* up = arena_.alloc<ExpertMat>(static_cast<size_t>(E));
  ExpertMat* down = arena_.alloc<ExpertMat>(static_cast<size_t>(E));
  auto expert_mat_of = [&](const DeviceMat& m, const char* what, ExpertMat& out) -> Status {
    STRATA_ASSIGN(const TensorView v, mat_view(m, "run_experts", what));
    out = ExpertMat{static_cast<const uint8_t*>(v.data), m.row_stride, m.in, m.type};
    return {};
  };
  for (int i = 0; i < w.n_run; ++i) {
    const int e = w.experts[i];
    if (e < 0 || e >= E)
      return err("%s: run_experts on layer %d: expert %d of %d", name_.c_str(), w.layer, e, E);
    const DeviceExpert& m = w.mats[i];
    STRATA_TRY(expert_mat_of(m.gate, "gate", gate[e]));
    STRATA_TRY(expert_mat_of(m.up, "up", up[e]));
    STRATA_TRY(expert_mat_of(m.down, "down", down[e]));
    const int64_t d = w.step.d, F = w.step.F;
    if (m.gate.in != d || m.up.in != d || m.gate.out != F || m.up.out != F || m.down.in != F ||
        m.down.out != d || m.gate.type != w.mats[0].gate.type || m.up.type != w.mats[0].up.type ||
        m.down.type != w.mats[0].down.type)
      return err("%s: run_experts on layer %d: expert %d's matrices do not have the step's shapes and types",
                 name_.c_str(), w.layer, e);
  }
  ExpertFfn s;
  static_cast<ExpertFfnStep&>(s) = w.step;
  s.gate = gate;
  s.up = up;
  s.down = down;
  const int e0 = w.experts[0];
  expert_ffn_prepare(s, gate[e0], up[e0], down[e0], w.x, w.n, w.K, E, pool_.size(), arena_);
  const ExpertFfnJob job{&s, w.experts, w.n_run};
  expert_ffn_run(&job, 1, pool_);
  return done();
}

Result<DeviceTicket> CpuDevice::run_attention(const DeviceAttnWork& w) {
  const AttnConfig& c = w.cfg;
  if (w.n < 0 || w.n_seg < 1 || c.n_head < 1 || c.n_head_kv < 1 || c.n_head % c.n_head_kv != 0 ||
      c.head_dim_k < 1 || c.head_dim_v < 1)
    return err("%s: run_attention on layer %d: %lld tokens in %d segments, %d heads of %d kv heads",
               name_.c_str(), w.layer, static_cast<long long>(w.n), w.n_seg, c.n_head, c.n_head_kv);
  if (w.n == 0) return done();
  const int64_t d = c.n_embd, q_w = int64_t{c.n_head} * c.head_dim_k,
                k_w = int64_t{c.n_head_kv} * c.head_dim_k, v_w = int64_t{c.n_head_kv} * c.head_dim_v,
                o_w = int64_t{c.n_head} * c.head_dim_v;
  static constexpr const char* kOp = "run_attention";
  STRATA_ASSIGN(const TensorView wq, mat_view(w.wq, kOp, "wq"));
  STRATA_ASSIGN(const TensorView wk, mat_view(w.wk, kOp, "wk"));
  STRATA_ASSIGN(const TensorView wv, mat_view(w.wv, kOp, "wv"));
  STRATA_ASSIGN(const TensorView wo, mat_view(w.wo, kOp, "wo"));
  if (wq.ne[0] != d || wq.ne[1] != q_w || wk.ne[0] != d || wk.ne[1] != k_w || wv.ne[0] != d ||
      wv.ne[1] != v_w || wo.ne[0] != o_w || wo.ne[1] != d)
    return err("%s: run_attention on layer %d: projections do not have the block's shapes", name_.c_str(),
               w.layer);
  AttnWeights aw;
  aw.wq = &wq;
  aw.wk = &wk;
  aw.wv = &wv;
  aw.wo = &wo;
  STRATA_ASSIGN(aw.bq, vec_view(w.bq, q_w, kOp, "bq"));
  STRATA_ASSIGN(aw.bk, vec_view(w.bk, k_w, kOp, "bk"));
  STRATA_ASSIGN(aw.bv, vec_view(w.bv, v_w, kOp, "bv"));
  STRATA_ASSIGN(aw.bo, vec_view(w.bo, d, kOp, "bo"));
  STRATA_ASSIGN(aw.q_norm, vec_view(w.q_norm, c.head_dim_k, kOp, "q_norm"));
  STRATA_ASSIGN(aw.k_norm, vec_view(w.k_norm, c.head_dim_k, kOp, "k_norm"));
  STRATA_ASSIGN(aw.sinks, vec_view(w.sinks, c.n_head, kOp, "sinks"));
  Arena& arena = w.host_scratch ? *w.host_scratch : arena_;
  if (!w.host_scratch) arena_.reset();
  const size_t mk = arena.mark();
  KvRows* rows = arena.alloc<KvRows>(2 * static_cast<size_t>(w.n_seg));
  AttnSegment* segs = arena.alloc<AttnSegment>(static_cast<size_t>(w.n_seg));
  int64_t covered = 0;
  for (int i = 0; i < w.n_seg; ++i) {
    const DeviceAttnSeg& sg = w.segs[i];
    const int64_t end = sg.pos0 + sg.n;
    STRATA_ASSIGN(rows[2 * i], rows_view(sg.k, k_w, end, kOp));
    STRATA_ASSIGN(rows[2 * i + 1], rows_view(sg.v, v_w, end, kOp));
    if (sg.t0 != covered || sg.n < 1 || sg.pos0 < 0 || (!sg.k.ring && end > sg.k.capacity) ||
        (!sg.v.ring && end > sg.v.capacity))
      return err(
          "%s: run_attention on layer %d: segment %d (rows %lld.., %lld tokens at position %lld) does not "
          "follow the batch or its cache",
          name_.c_str(), w.layer, i, static_cast<long long>(sg.t0), static_cast<long long>(sg.n),
          static_cast<long long>(sg.pos0));
    segs[i] = AttnSegment{&rows[2 * i], &rows[2 * i + 1], sg.pos0, sg.t0, sg.n};
    covered += sg.n;
  }
  if (covered != w.n)
    return err("%s: run_attention on layer %d: segments cover %lld of %lld rows", name_.c_str(), w.layer,
               static_cast<long long>(covered), static_cast<long long>(w.n));
  attention_forward_segments(c, aw, std::span<const AttnSegment>(segs, static_cast<size_t>(w.n_seg)), w.x,
                             w.n, w.out, pool_, arena);
  arena.rewind(mk);
  return done();
}

Result<DeviceTicket> CpuDevice::run_sparse_attention(const DeviceSparseAttnWork& w) {
  static constexpr const char* kOp = "run_sparse_attention";
  const char* nm = name_.c_str();
  if (w.n < 0 || w.pos0 < 0 || w.n_head < 1 || w.head_dim < 1 || w.window < 1 || w.ratio < 0 ||
      w.n_comp_new < 0 || w.comp_row0 < 0 ||
      (w.sel && (w.sel_n == nullptr || w.sel_stride < 0 || w.ratio < 1)))
    return err("%s: %s on layer %d: %lld tokens at position %lld, %d heads of %d, window %d, ratio %d", nm,
               kOp, w.layer, static_cast<long long>(w.n), static_cast<long long>(w.pos0), w.n_head,
               w.head_dim, w.window, w.ratio);
  if (w.n == 0) return done();
  const int64_t end = w.pos0 + w.n, hd = w.head_dim;
  // rows of any KV type (kernels/kv_rows.h), not paged; window and compressed rows rotated alike
  auto f32_rows = [&](const DeviceRows& r, const char* what) -> Status {
    if (!kv_rows_type_ok(r.type) || r.blocks != nullptr || hd % type_info(r.type).block_size != 0 ||
        r.hadamard != w.win.hadamard)
      return err("%s: %s on layer %d: the %s rows are %s%s%s: the op reads unpaged KV rows of whole blocks",
                 nm, kOp, w.layer, what, type_name(r.type), r.blocks ? " (paged)" : "",
                 r.hadamard ? " (rotated)" : "");
    return {};
  };
  STRATA_TRY(f32_rows(w.win, "window"));
  STRATA_ASSIGN(const KvRows win, rows_view(w.win, hd, end, kOp));
  if (win.ring ? win.capacity < w.window - 1 + w.n : win.capacity < end)
    return err("%s: %s on layer %d: a window of %d over %lld rows%s for %lld tokens at position %lld", nm,
               kOp, w.layer, w.window, static_cast<long long>(win.capacity), win.ring ? " (a ring)" : "",
               static_cast<long long>(w.n), static_cast<long long>(w.pos0));
  KvRows comp;
  if (w.ratio > 0) {
    STRATA_TRY(f32_rows(w.comp, "compressed"));
    STRATA_ASSIGN(comp, rows_view(w.comp, hd, end / w.ratio, kOp));
    if (!comp.ring && (end / w.ratio > comp.capacity || w.comp_row0 + w.n_comp_new > comp.capacity))
      return err(
          "%s: %s on layer %d: %lld compressed rows; position %lld and rows %lld.. (%lld new) need more", nm,
          kOp, w.layer, static_cast<long long>(comp.capacity), static_cast<long long>(end - 1),
          static_cast<long long>(w.comp_row0), static_cast<long long>(w.n_comp_new));
  } else if (w.n_comp_new > 0 || w.sel) {
    return err("%s: %s on layer %d: compressed rows without a ratio", nm, kOp, w.layer);
  }
  for (int64_t t = 0; w.sel && t < w.n; ++t) {
    const int64_t vis = (w.pos0 + t + 1) / w.ratio, k = w.sel_n[t];
    if (k < 0 || k > w.sel_stride)
      return err("%s: %s on layer %d: token %lld selects %lld rows (at most %lld)", nm, kOp, w.layer,
                 static_cast<long long>(t), static_cast<long long>(k), static_cast<long long>(w.sel_stride));
    for (int64_t i = 0; i < k; ++i)
      if (const int32_t j = w.sel[t * w.sel_stride + i]; j < 0 || j >= vis)
        return err("%s: %s on layer %d: token %lld selects compressed row %d of the %lld it sees", nm, kOp,
                   w.layer, static_cast<long long>(t), j, static_cast<long long>(vis));
  }
  STRATA_ASSIGN(const float* sinks, vec_view(w.sinks, w.n_head, kOp, "sinks"));
  Arena& arena = w.host_scratch ? *w.host_scratch : arena_;
  if (!w.host_scratch) arena_.reset();
  sparse_attention(w, win, w.ratio > 0 ? &comp : nullptr, sinks, pool_, arena);
  return done();
}

Result<DeviceTicket> CpuDevice::run_ffn(const DeviceFfnWork& w) {
  static constexpr const char* kOp = "run_ffn";
  STRATA_ASSIGN(const TensorView gate, mat_view(w.gate, kOp, "gate"));
  STRATA_ASSIGN(const TensorView up, mat_view(w.up, kOp, "up"));
  STRATA_ASSIGN(const TensorView down, mat_view(w.down, kOp, "down"));
  if (up.ne[0] != gate.ne[0] || up.ne[1] != gate.ne[1] || down.ne[0] != gate.ne[1] ||
      down.ne[1] != gate.ne[0] || w.n < 0)
    return err("%s: run_ffn on layer %d: gate {%lld, %lld}, up {%lld, %lld}, down {%lld, %lld} do not fit",
               name_.c_str(), w.layer, static_cast<long long>(gate.ne[0]), static_cast<long long>(gate.ne[1]),
               static_cast<long long>(up.ne[0]), static_cast<long long>(up.ne[1]),
               static_cast<long long>(down.ne[0]), static_cast<long long>(down.ne[1]));
  Arena& arena = w.host_scratch ? *w.host_scratch : arena_;
  if (!w.host_scratch) arena_.reset();
  ffn_swiglu_forward(gate, up, down, w.x, w.n, w.y, pool_, arena);
  return done();
}

Result<DeviceTicket> CpuDevice::run_linear(const DeviceLinearWork& w) {
  STRATA_ASSIGN(const TensorView m, mat_view(w.w, "run_linear", "weight"));
  STRATA_ASSIGN(const float* bias, vec_view(w.bias, m.ne[1], "run_linear", "bias"));
  if (w.n < 0) return err("%s: run_linear of %lld rows", name_.c_str(), static_cast<long long>(w.n));
  if (w.n == 0) return done();
  Arena& arena = w.host_scratch ? *w.host_scratch : arena_;
  if (!w.host_scratch) arena_.reset();
  const size_t mk = arena.mark();
  linear(pool_, arena, m, w.x, w.n, w.y, bias);
  arena.rewind(mk);
  return done();
}

bool CpuDevice::reached(DeviceTicket t) const {
  std::lock_guard<std::mutex> lock(mu_);
  return t <= issued_;
}

Status CpuDevice::wait(DeviceTicket t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t > issued_)
    return err("%s: waiting for ticket %llu, but only %llu were issued", name_.c_str(),
               static_cast<unsigned long long>(t), static_cast<unsigned long long>(issued_));
  return {};
}

}  // namespace strata
