// VulkanDevice::run_attention (vk_device.h): kernels/attention_block.h's block over a batch of
// sequences, recorded as one submission. Scratch on the device, in order: x in the forms of
// wq / wk / wv's vec_dot_types, the cos/sin rows of every token, the block tables of paged
// K / V rows (all copied down from one staging buffer), y (copied up), q, k, v, the q / k norm weights and
// sinks (copied from their buffers), o, and o in the form of wo's vec_dot_type. Dispatches: q / k / v
// (linear.comp, with their biases); per segment attn_rope.comp (norms, RoPE, K / V rows into the caches); per
// segment attention.comp; swiglu.comp's identity (o converted as kernels/linear converts it for
// the output weight); wo (linear.comp, + bias).
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/units.h"
#include "kernels/ops.h"
#include "kernels/vulkan/vk_device.h"
#include "kernels/vulkan/vk_forms.h"

namespace strata {

using vk::align_up;
using vk::form_bytes;
using vk::form_of;
using vk::kMaxGroups;
using vk::kRegionAlign;
using vk::to_form;
using vk::XForm;

Result<const vk::RawBuffer*> VulkanDevice::vector(const DeviceVec& v, int64_t n, const char* op,
                                                  const char* what) const {
  if (v.buf == nullptr) return static_cast<const vk::RawBuffer*>(nullptr);
  if (v.n != n || v.offset % 4 != 0)
    return err("%s: %s: %s has %lld values at offset %zu, expected %lld at a 4-byte aligned offset",
               name().c_str(), op, what, static_cast<long long>(v.n), v.offset, static_cast<long long>(n));
  return resolve(*v.buf, v.offset, sizeof(float) * static_cast<size_t>(n), what);
}

Result<DeviceTicket> VulkanDevice::run_attention_locked(const DeviceAttnWork& w) {
  static constexpr const char* kOp = "run_attention";
  const char* nm = name().c_str();
  const AttnConfig& c = w.cfg;
  if (w.n < 0 || w.n_seg < 1 || w.segs == nullptr || c.n_head < 1 || c.n_head_kv < 1 ||
      c.n_head % c.n_head_kv != 0 || c.head_dim_k < 1 || c.head_dim_v < 1)
    return err("%s: run_attention on layer %d: %lld tokens in %d segments, %d heads of %d kv heads", nm,
               w.layer, static_cast<long long>(w.n), w.n_seg, c.n_head, c.n_head_kv);
  if (c.head_dim_k > int(vk::kAttnMaxHeadDim) || c.head_dim_v > int(vk::kAttnMaxHeadDim))
    return err("%s: run_attention on layer %d: head dims %d / %d; the Vulkan attention handles at most %u",
               nm, w.layer, c.head_dim_k, c.head_dim_v, vk::kAttnMaxHeadDim);
  const int n_rot = c.rope.n_rot;
  if (n_rot < 0 || n_rot > c.head_dim_k || n_rot % 2 != 0)
    return err("%s: run_attention on layer %d: RoPE over %d of %d dims", nm, w.layer, n_rot, c.head_dim_k);
  if (w.n > kMaxGroups)
    return err("%s: run_attention on layer %d: %lld tokens (at most %u)", nm, w.layer,
               static_cast<long long>(w.n), kMaxGroups);
  const int64_t n = w.n, d = c.n_embd, hdk = c.head_dim_k, hdv = c.head_dim_v;
  const int64_t q_w = int64_t{c.n_head} * hdk, k_w = int64_t{c.n_head_kv} * hdk,
                v_w = int64_t{c.n_head_kv} * hdv, o_w = int64_t{c.n_head} * hdv;
  STRATA_ASSIGN(const vk::RawBuffer* wq, weight(w.wq, kOp, "wq"));
  STRATA_ASSIGN(const vk::RawBuffer* wk, weight(w.wk, kOp, "wk"));
  STRATA_ASSIGN(const vk::RawBuffer* wv, weight(w.wv, kOp, "wv"));
  STRATA_ASSIGN(const vk::RawBuffer* wo, weight(w.wo, kOp, "wo"));
  if (w.wq.in != d || w.wq.out != q_w || w.wk.in != d || w.wk.out != k_w || w.wv.in != d || w.wv.out != v_w ||
      w.wo.in != o_w || w.wo.out != d)
    return err("%s: run_attention on layer %d: projections do not have the block's shapes", nm, w.layer);
  STRATA_ASSIGN(const vk::RawBuffer* bq, vector(w.bq, q_w, kOp, "bq"));
  STRATA_ASSIGN(const vk::RawBuffer* bk, vector(w.bk, k_w, kOp, "bk"));
  STRATA_ASSIGN(const vk::RawBuffer* bv, vector(w.bv, v_w, kOp, "bv"));
  STRATA_ASSIGN(const vk::RawBuffer* bo, vector(w.bo, d, kOp, "bo"));
  STRATA_ASSIGN(const vk::RawBuffer* qn, vector(w.q_norm, hdk, kOp, "q_norm"));
  STRATA_ASSIGN(const vk::RawBuffer* kn, vector(w.k_norm, hdk, kOp, "k_norm"));
  STRATA_ASSIGN(const vk::RawBuffer* sinks, vector(w.sinks, c.n_head, kOp, "sinks"));

  // The segments' cache rows (shaders/kv_rows.glsl): rows of any KV type of the cache's width
  // (f16 / bf16: even head dims, so that a head's values fill whole words; block types: head dims
  // of whole blocks), linear, ring or paged, bound from the 256-byte boundary before them.
  struct SegRows {
    Region k, v;
    uint32_t kc_off, vc_off;      // in the rows' units: words (f32), bytes (fp8, mxfp4) or halves
    size_t kt_at = 0, vt_at = 0;  // paged: the block tables' bytes in staging
    int64_t kt_n = 0, vt_n = 0;   // and their entries
  };
  std::vector<SegRows> seg_rows(static_cast<size_t>(w.n_seg));
  auto rows_of = [&](const DeviceRows& r, int64_t width, int64_t head_dim, int i, const char* what,
                     Region& reg, uint32_t& off) -> Status {
    const int64_t bs = type_info(r.type).block_size;
    if (!attention_rows_supported(r.type, r.hadamard) || head_dim % bs != 0 ||
        ((r.type == GgmlType::f16 || r.type == GgmlType::bf16) && head_dim % 2 != 0))
      return err(
          "%s: run_attention on layer %d: segment %d's %s rows are %s (head dim %lld): this device stores "
          "f32 KV rows, f16 / bf16 rows of even head dims and q8_0 / q4_0 / iq4_nl / fp8_e4m3 / mxfp4 rows "
          "of head dims of whole blocks",
          nm, w.layer, i, what, type_name(r.type), static_cast<long long>(head_dim));
    const size_t unit = vk::kv_row_unit(r.type);
    if (r.buf == nullptr || r.width != width || r.capacity < 1 || r.offset % unit != 0)
      return err(
          "%s: run_attention on layer %d: segment %d's %s rows: width %lld x %lld at offset %zu, "
          "expected %s rows of width %lld at a %zu-byte aligned offset",
          nm, w.layer, i, what, static_cast<long long>(r.width), static_cast<long long>(r.capacity), r.offset,
          type_name(r.type), static_cast<long long>(width), unit);
    if (r.blocks != nullptr && (r.ring || r.block_rows < 1 || r.capacity % r.block_rows != 0 ||
                                r.stored_rows < r.block_rows || r.stored_rows % r.block_rows != 0))
      return err(
          "%s: run_attention on layer %d: segment %d's %s rows are paged in blocks of %lld rows over %lld "
          "rows (%lld stored), not whole blocks%s",
          nm, w.layer, i, what, static_cast<long long>(r.block_rows), static_cast<long long>(r.capacity),
          static_cast<long long>(r.stored_rows), r.ring ? " (and a ring)" : "");
    const int64_t rows = r.blocks != nullptr ? r.stored_rows : r.capacity;
    const size_t bytes = row_bytes(r.type, r.width) * static_cast<size_t>(rows);
    STRATA_ASSIGN(const vk::RawBuffer* raw, resolve(*r.buf, r.offset, bytes, "cache rows"));
    const vk::Window win = vk::window(r.offset, bytes);
    if (win.span > ctx_->max_storage_range() || win.span / unit > uint64_t{UINT32_MAX})
      return err(
          "%s: run_attention on layer %d: %s cache rows span %s, more than the device binds at once (%s)", nm,
          w.layer, what, format_bytes(win.span).c_str(), format_bytes(ctx_->max_storage_range()).c_str());
    reg = Region{raw->buf, win.base, win.span};
    off = static_cast<uint32_t>((r.offset - win.base) / unit);
    return {};
  };
  // A paged segment's table entries that its rows pos0 .. pos0 + n − 1 and their keys use: each
  // a block the region holds (entries before the first key's block are not read).
  auto table_of = [&](const DeviceAttnSeg& sg, const DeviceRows& r, int i,
                      const char* what) -> Result<int64_t> {
    if (r.blocks == nullptr) return int64_t{0};
    const int64_t end = sg.pos0 + sg.n, n_entries = (end + r.block_rows - 1) / r.block_rows;
    const int64_t first = c.window > 0 ? std::max<int64_t>(0, sg.pos0 - c.window + 1) : 0;
    const int64_t n_blocks = r.stored_rows / r.block_rows;
    for (int64_t e = first / r.block_rows; e < n_entries && end <= r.capacity; ++e)
      if (r.blocks[e] < 0 || r.blocks[e] >= n_blocks)
        return err(
            "%s: run_attention on layer %d: segment %d's %s block table entry %lld (positions %lld..) is "
            "block %d, outside the %lld blocks of its rows",
            nm, w.layer, i, what, static_cast<long long>(e), static_cast<long long>(e * r.block_rows),
            r.blocks[e], static_cast<long long>(n_blocks));
    return n_entries;
  };
  // The shaders' flags (shaders/kv_rows.glsl): rings, the rows' types, paged rows, rotated rows.
  auto flags = [&](const DeviceAttnSeg& sg) {
    return (sg.k.ring ? 1u : 0u) | (sg.v.ring ? 2u : 0u) | vk::kv_type_code(sg.k.type) << 2 |
           vk::kv_type_code(sg.v.type) << 5 | (sg.k.blocks ? 256u : 0u) | (sg.v.blocks ? 512u : 0u) |
           (sg.k.hadamard ? 1024u : 0u) | (sg.v.hadamard ? 2048u : 0u);
  };
  int64_t covered = 0;
  for (int i = 0; i < w.n_seg; ++i) {
    const DeviceAttnSeg& sg = w.segs[i];
    SegRows& sr = seg_rows[static_cast<size_t>(i)];
    STRATA_TRY(rows_of(sg.k, k_w, hdk, i, "K", sr.k, sr.kc_off));
    STRATA_TRY(rows_of(sg.v, v_w, hdv, i, "V", sr.v, sr.vc_off));
    STRATA_ASSIGN(sr.kt_n, table_of(sg, sg.k, i, "K"));
    STRATA_ASSIGN(sr.vt_n, table_of(sg, sg.v, i, "V"));
    const int64_t end = sg.pos0 + sg.n;
    if (sg.t0 != covered || sg.n < 1 || sg.pos0 < 0 || end > (int64_t{1} << 31) ||
        (!sg.k.ring && end > sg.k.capacity) || (!sg.v.ring && end > sg.v.capacity))
      return err(
          "%s: run_attention on layer %d: segment %d (rows %lld.., %lld tokens at position %lld) does not "
          "follow the batch or its cache",
          nm, w.layer, i, static_cast<long long>(sg.t0), static_cast<long long>(sg.n),
          static_cast<long long>(sg.pos0));
    covered += sg.n;
  }
  if (covered != n)
    return err("%s: run_attention on layer %d: segments cover %lld of %lld rows", nm, w.layer,
               static_cast<long long>(covered), static_cast<long long>(n));
  if (n == 0) return empty_submission();

  // Scratch layout (bytes, each region at a 256-byte boundary); staging holds [0, y_end).
  const XForm fq = form_of(w.wq.type), fk = form_of(w.wk.type), fv = form_of(w.wv.type),
              fo = form_of(w.wo.type);
  size_t at = 0;
  auto region = [&](size_t bytes) {
    const size_t off = at;
    at = align_up(at + std::max<size_t>(bytes, 4), kRegionAlign);
    return off;
  };
  const size_t xq_off = region(form_bytes(fq, n, d));
  const size_t xk_off = fk == fq ? xq_off : region(form_bytes(fk, n, d));
  const size_t xv_off = fv == fq ? xq_off : fv == fk ? xk_off : region(form_bytes(fv, n, d));
  const int64_t rope_w = std::max(n_rot, 1);
  const size_t rope_off = region(sizeof(float) * static_cast<size_t>(n * rope_w));
  for (int i = 0; i < w.n_seg; ++i) {  // paged rows: the block tables (V shares K's when they are one)
    const DeviceAttnSeg& sg = w.segs[i];
    SegRows& sr = seg_rows[static_cast<size_t>(i)];
    if (sr.kt_n > 0) sr.kt_at = region(sizeof(int32_t) * static_cast<size_t>(sr.kt_n));
    if (sr.vt_n > 0)
      sr.vt_at = sg.v.blocks == sg.k.blocks && sr.vt_n == sr.kt_n && sg.v.block_rows == sg.k.block_rows
                     ? sr.kt_at
                     : region(sizeof(int32_t) * static_cast<size_t>(sr.vt_n));
  }
  const size_t down_bytes = at;
  const size_t y_bytes = sizeof(float) * static_cast<size_t>(n * d), y_off = region(y_bytes);
  const size_t staging_bytes = at;
  const size_t q_bytes = sizeof(float) * static_cast<size_t>(n * q_w), q_off = region(q_bytes);
  const size_t k_bytes = sizeof(float) * static_cast<size_t>(n * k_w), k_off = region(k_bytes);
  const size_t v_bytes = sizeof(float) * static_cast<size_t>(n * v_w), v_off = region(v_bytes);
  const size_t hd_bytes = sizeof(float) * static_cast<size_t>(hdk);
  const size_t qn_off = qn ? region(hd_bytes) : 0, kn_off = kn ? region(hd_bytes) : 0;
  const size_t sink_bytes = sizeof(float) * static_cast<size_t>(c.n_head);
  const size_t sink_off = sinks ? region(sink_bytes) : 0;
  const size_t o_bytes = sizeof(float) * static_cast<size_t>(n * o_w), o_off = region(o_bytes);
  const size_t oh_bytes = form_bytes(fo, n, o_w), oh_off = region(oh_bytes);
  const size_t total = at;
  if (total > ctx_->max_storage_range())
    return err(
        "%s: run_attention on layer %d: %lld tokens need %s of scratch, more than the device binds at "
        "once (%s)",
        nm, w.layer, static_cast<long long>(n), format_bytes(total).c_str(),
        format_bytes(ctx_->max_storage_range()).c_str());
  const int64_t per_tok = c.n_head + 2 * int64_t{c.n_head_kv};
  for (int i = 0; i < w.n_seg; ++i)
    if ((w.segs[i].n * per_tok + 63) / 64 > kMaxGroups)
      return err("%s: run_attention on layer %d: segment %d has too many tokens x heads", nm, w.layer, i);

  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  auto fail = [&](const Error& e) -> Result<DeviceTicket> {
    ctx_->discard(s);
    return e;
  };
  auto staging = ctx_->add_scratch(s, staging_bytes, /*host_visible=*/true, "run_attention staging");
  if (!staging.ok()) return fail(staging.error());
  auto scratch = ctx_->add_scratch(s, total, /*host_visible=*/false, "run_attention activations");
  if (!scratch.ok()) return fail(scratch.error());
  uint8_t* st = staging->mapped;
  to_form(fq, w.x, n, d, st + xq_off);
  if (xk_off != xq_off) to_form(fk, w.x, n, d, st + xk_off);
  if (xv_off != xq_off && xv_off != xk_off) to_form(fv, w.x, n, d, st + xv_off);
  if (n_rot > 0) {  // the CPU's own cos/sin rows (kernels/ops.h rope_cache)
    float* tab = reinterpret_cast<float*>(st + rope_off);
    for (int i = 0; i < w.n_seg; ++i)
      for (int64_t j = 0; j < w.segs[i].n; ++j)
        rope_cache(c.rope, w.segs[i].pos0 + j, 1.0f, tab + (w.segs[i].t0 + j) * rope_w);
  }
  for (int i = 0; i < w.n_seg; ++i) {
    const SegRows& sr = seg_rows[static_cast<size_t>(i)];
    if (sr.kt_n > 0)
      std::memcpy(st + sr.kt_at, w.segs[i].k.blocks, sizeof(int32_t) * static_cast<size_t>(sr.kt_n));
    if (sr.vt_n > 0)
      std::memcpy(st + sr.vt_at, w.segs[i].v.blocks, sizeof(int32_t) * static_cast<size_t>(sr.vt_n));
  }

  const vk::Api& api = ctx_->api();
  const VkBuffer sb = scratch->buf;
  const VkBufferCopy down{0, 0, down_bytes};
  api.vkCmdCopyBuffer(s.cmd, staging->buf, sb, 1, &down);
  auto copy_vec = [&](const vk::RawBuffer* src, size_t src_off, size_t dst_off, size_t bytes) {
    if (src == nullptr) return;
    const VkBufferCopy cp{src_off, dst_off, bytes};
    api.vkCmdCopyBuffer(s.cmd, src->buf, sb, 1, &cp);
  };
  copy_vec(qn, w.q_norm.offset, qn_off, hd_bytes);
  copy_vec(kn, w.k_norm.offset, kn_off, hd_bytes);
  copy_vec(sinks, w.sinks.offset, sink_off, sink_bytes);
  ctx_->barrier(s.cmd);

  auto x_region = [&](XForm f, size_t off) { return Region{sb, off, form_bytes(f, n, d)}; };
  Status status =
      record_linear(s, w.wq, *wq, bq, w.bq.offset, x_region(fq, xq_off), Region{sb, q_off, q_bytes}, n);
  if (status.ok())
    status =
        record_linear(s, w.wk, *wk, bk, w.bk.offset, x_region(fk, xk_off), Region{sb, k_off, k_bytes}, n);
  if (status.ok())
    status =
        record_linear(s, w.wv, *wv, bv, w.bv.offset, x_region(fv, xv_off), Region{sb, v_off, v_bytes}, n);
  if (!status.ok()) return fail(status.error());

  const Region whole{sb, 0, total};
  const uint32_t none = ~0u;
  for (int i = 0; i < w.n_seg && status.ok(); ++i) {  // norms, RoPE, the cache rows
    const DeviceAttnSeg& sg = w.segs[i];
    const SegRows& sr = seg_rows[static_cast<size_t>(i)];
    const vk::AttnRopeParams p{static_cast<uint32_t>(sg.n),
                               static_cast<uint32_t>(sg.t0),
                               static_cast<uint32_t>(sg.pos0),
                               static_cast<uint32_t>(c.n_head),
                               static_cast<uint32_t>(c.n_head_kv),
                               static_cast<uint32_t>(hdk),
                               static_cast<uint32_t>(hdv),
                               static_cast<uint32_t>(n_rot),
                               c.rope_style == RopeStyle::rope_style_neox ? 1u : 0u,
                               static_cast<uint32_t>(q_off / 4),
                               static_cast<uint32_t>(k_off / 4),
                               static_cast<uint32_t>(v_off / 4),
                               static_cast<uint32_t>(rope_off / 4),
                               qn ? static_cast<uint32_t>(qn_off / 4) : none,
                               kn ? static_cast<uint32_t>(kn_off / 4) : none,
                               sr.kc_off,
                               sr.vc_off,
                               static_cast<uint32_t>(sg.k.capacity),
                               static_cast<uint32_t>(sg.v.capacity),
                               flags(sg),
                               c.eps,
                               static_cast<uint32_t>(sr.kt_at / 4),
                               static_cast<uint32_t>(sr.vt_at / 4),
                               static_cast<uint32_t>(sg.k.block_rows),
                               static_cast<uint32_t>(sg.v.block_rows)};
    const Region regions[3] = {whole, sr.k, sr.v};
    auto set = bind(s, attn_rope_, regions, &p);
    if (!set.ok()) return fail(set.error());
    api.vkCmdDispatch(s.cmd, static_cast<uint32_t>((sg.n * per_tok + 63) / 64), 1, 1);
    ctx_->barrier(s.cmd);  // each dispatch binds all of S (the validation layer's view of its writes)
  }
  for (int i = 0; i < w.n_seg; ++i) {  // attention over each token's keys
    const DeviceAttnSeg& sg = w.segs[i];
    const SegRows& sr = seg_rows[static_cast<size_t>(i)];
    const vk::AttentionParams p{static_cast<uint32_t>(sg.n),
                                static_cast<uint32_t>(sg.t0),
                                static_cast<uint32_t>(sg.pos0),
                                static_cast<uint32_t>(c.n_head),
                                static_cast<uint32_t>(c.n_head_kv),
                                static_cast<uint32_t>(hdk),
                                static_cast<uint32_t>(hdv),
                                static_cast<uint32_t>(std::max(c.window, 0)),
                                c.scale,
                                static_cast<uint32_t>(q_off / 4),
                                static_cast<uint32_t>(o_off / 4),
                                sinks ? static_cast<uint32_t>(sink_off / 4) : none,
                                sr.kc_off,
                                sr.vc_off,
                                static_cast<uint32_t>(sg.k.capacity),
                                static_cast<uint32_t>(sg.v.capacity),
                                flags(sg),
                                static_cast<uint32_t>(sr.kt_at / 4),
                                static_cast<uint32_t>(sr.vt_at / 4),
                                static_cast<uint32_t>(sg.k.block_rows),
                                static_cast<uint32_t>(sg.v.block_rows)};
    const Region regions[3] = {whole, sr.k, sr.v};
    auto set = bind(s, attention_, regions, &p);
    if (!set.ok()) return fail(set.error());
    api.vkCmdDispatch(s.cmd, static_cast<uint32_t>(sg.n), static_cast<uint32_t>(c.n_head), 1);
    ctx_->barrier(s.cmd);
  }

  // o into wo's vec_dot_type form (swiglu.comp act 3: the identity), then the output projection.
  const Region o{sb, o_off, o_bytes}, oh{sb, oh_off, oh_bytes};
  const Region conv[3] = {o, o, oh};
  const vk::SwigluParams cp{
      static_cast<uint32_t>(n), static_cast<uint32_t>(o_w), static_cast<uint32_t>(fo), 3, 0, 0};
  auto set = bind(s, swiglu_, conv, &cp);
  if (!set.ok()) return fail(set.error());
  const int64_t groups = (n * ((o_w + 31) / 32) + 63) / 64;
  api.vkCmdDispatch(s.cmd, static_cast<uint32_t>(std::min<int64_t>(groups, kMaxGroups)),
                    static_cast<uint32_t>((groups + kMaxGroups - 1) / kMaxGroups), 1);
  ctx_->barrier(s.cmd);
  status = record_linear(s, w.wo, *wo, bo, w.bo.offset, oh, Region{sb, y_off, y_bytes}, n);
  if (!status.ok()) return fail(status.error());
  const VkBufferCopy up{y_off, y_off, y_bytes};
  api.vkCmdCopyBuffer(s.cmd, sb, staging->buf, 1, &up);
  const uint8_t* from = staging->mapped + y_off;
  float* out = w.out;
  s.on_done.push_back([out, from, y_bytes] { std::memcpy(out, from, y_bytes); });
  return ctx_->submit(std::move(s));
}

}  // namespace strata
