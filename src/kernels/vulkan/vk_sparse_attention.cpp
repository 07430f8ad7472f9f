// VulkanDevice::run_sparse_attention (vk_device.h): DeepSeek-V4's attention core
// (kernels/sparse_attention.h) as one submission. Staging (host-visible): q, the selections
// (sel [n][sel_stride], sel_n [n] as u32), the new window rows and compressed entries, then o.
// Scratch on the device: q, the selections, the sinks (copied from their buffer), o. Copies: q and
// the selections down, the new rows from staging into the window / compressed rows' buffers
// (slot by slot); one dispatch of shaders/sparse_attention.comp per (token, head); o up.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/units.h"
#include "kernels/vulkan/vk_device.h"
#include "kernels/vulkan/vk_forms.h"
#include "kernels/vulkan/vk_shaders.h"

namespace strata {

namespace {

// sparse_attention.comp's push constants (offsets: f32 / u32 indices; ~0u: absent).
struct SparseAttnParams {
  uint32_t n_tok, pos0, n_head, hd, window, ratio, mode;
  float scale;
  uint32_t q_off, o_off, sink_off;
  uint32_t w_off, cap_w, w_ring;
  uint32_t c_off, cap_c, c_ring;
  uint32_t sel_off, seln_off, sel_stride;
};
constexpr int64_t kMaxHeadDim = 1024;  // sparse_attention.comp's MAX_HD

}  // namespace

using vk::align_up;
using vk::kMaxGroups;
using vk::kRegionAlign;

Status VulkanDevice::create_sparse_pipeline() {
  STRATA_ASSIGN(sparse_attention_,
                vk::create_pipeline(ctx_->api(), ctx_->device(), vk::sparse_attention_shader(), 4,
                                    sizeof(SparseAttnParams), "sparse_attention", ctx_->pipeline_cache()));
  return {};
}

Result<DeviceTicket> VulkanDevice::run_sparse_attention(const DeviceSparseAttnWork& w) {
  static constexpr const char* kOp = "run_sparse_attention";
  std::lock_guard<std::mutex> lock(mu_);
  const char* nm = name().c_str();
  if (w.n < 0 || w.pos0 < 0 || w.n_head < 1 || w.head_dim < 1 || w.window < 1 || w.ratio < 0 ||
      w.n_comp_new < 0 || w.comp_row0 < 0 ||
      (w.sel && (w.sel_n == nullptr || w.sel_stride < 0 || w.ratio < 1)))
    return err("%s: %s on layer %d: %lld tokens at position %lld, %d heads of %d, window %d, ratio %d", nm,
               kOp, w.layer, static_cast<long long>(w.n), static_cast<long long>(w.pos0), w.n_head,
               w.head_dim, w.window, w.ratio);
  if (w.head_dim > kMaxHeadDim || w.n > kMaxGroups || w.n_head > int64_t{kMaxGroups} ||
      w.pos0 + w.n > (int64_t{1} << 31))
    return err(
        "%s: %s on layer %d: %lld tokens of %d heads of %d at position %lld (at most %u tokens or "
        "heads, head_dim %lld)",
        nm, kOp, w.layer, static_cast<long long>(w.n), w.n_head, w.head_dim, static_cast<long long>(w.pos0),
        kMaxGroups, static_cast<long long>(kMaxHeadDim));
  if (w.n == 0) return empty_submission();
  const int64_t n = w.n, hd = w.head_dim, end = w.pos0 + n;
  struct Rows {
    const vk::RawBuffer* raw = nullptr;
    Region reg;
    uint32_t off = 0;  // the first row's f32 index in reg
  };
  auto rows_of = [&](const DeviceRows& r, const char* what, Rows& out) -> Status {
    if (r.type != GgmlType::f32 || r.hadamard || r.blocks != nullptr)
      return err("%s: %s on layer %d: the %s rows are %s%s: the op reads plain f32 rows", nm, kOp, w.layer,
                 what, type_name(r.type), r.blocks ? " (paged)" : "");
    if (r.buf == nullptr || r.width != hd || r.capacity < 1 || r.offset % 4 != 0)
      return err(
          "%s: %s on layer %d: %s rows of width %lld x %lld at offset %zu, expected width %lld at a "
          "4-byte aligned offset",
          nm, kOp, w.layer, what, static_cast<long long>(r.width), static_cast<long long>(r.capacity),
          r.offset, static_cast<long long>(hd));
    const size_t bytes = sizeof(float) * static_cast<size_t>(r.width * r.capacity);
    STRATA_ASSIGN(out.raw, resolve(*r.buf, r.offset, bytes, "cache rows"));
    const vk::Window win = vk::window(r.offset, bytes);
    if (win.span > ctx_->max_storage_range())
      return err("%s: %s on layer %d: %s rows span %s, more than the device binds at once (%s)", nm, kOp,
                 w.layer, what, format_bytes(win.span).c_str(),
                 format_bytes(ctx_->max_storage_range()).c_str());
    out.reg = Region{out.raw->buf, win.base, win.span};
    out.off = static_cast<uint32_t>((r.offset - win.base) / 4);
    return {};
  };
  Rows win, comp;
  STRATA_TRY(rows_of(w.win, "window", win));
  if (w.win.ring ? w.win.capacity < w.window - 1 + n : w.win.capacity < end)
    return err("%s: %s on layer %d: a window of %d over %lld rows%s for %lld tokens at position %lld", nm,
               kOp, w.layer, w.window, static_cast<long long>(w.win.capacity), w.win.ring ? " (a ring)" : "",
               static_cast<long long>(n), static_cast<long long>(w.pos0));
  if (w.ratio > 0) {
    STRATA_TRY(rows_of(w.comp, "compressed", comp));
    if (!w.comp.ring && (end / w.ratio > w.comp.capacity || w.comp_row0 + w.n_comp_new > w.comp.capacity))
      return err(
          "%s: %s on layer %d: %lld compressed rows; position %lld and rows %lld.. (%lld new) need more", nm,
          kOp, w.layer, static_cast<long long>(w.comp.capacity), static_cast<long long>(end - 1),
          static_cast<long long>(w.comp_row0), static_cast<long long>(w.n_comp_new));
  } else if (w.n_comp_new > 0 || w.sel) {
    return err("%s: %s on layer %d: compressed rows without a ratio", nm, kOp, w.layer);
  }
  for (int64_t t = 0; w.sel && t < n; ++t) {  // the shader reads the rows it is told: check them here
    const int64_t vis = (w.pos0 + t + 1) / w.ratio, k = w.sel_n[t];
    if (k < 0 || k > w.sel_stride)
      return err("%s: %s on layer %d: token %lld selects %lld rows (at most %lld)", nm, kOp, w.layer,
                 static_cast<long long>(t), static_cast<long long>(k), static_cast<long long>(w.sel_stride));
    for (int64_t i = 0; i < k; ++i)
      if (const int32_t j = w.sel[t * w.sel_stride + i]; j < 0 || j >= vis)
        return err("%s: %s on layer %d: token %lld selects compressed row %d of the %lld it sees", nm, kOp,
                   w.layer, static_cast<long long>(t), j, static_cast<long long>(vis));
  }
  STRATA_ASSIGN(const vk::RawBuffer* sinks, vector(w.sinks, w.n_head, kOp, "sinks"));

  // Layout: staging [q | sel, sel_n | kv_new | comp_new | o], scratch [q | sel, sel_n | sinks | o].
  size_t at = 0;
  auto region = [&](size_t bytes) {
    const size_t off = at;
    at = align_up(at + std::max<size_t>(bytes, 4), kRegionAlign);
    return off;
  };
  const int64_t qw = int64_t{w.n_head} * hd;
  const size_t q_bytes = sizeof(float) * static_cast<size_t>(n * qw), q_off = region(q_bytes);
  const int64_t n_sel = w.sel ? n * w.sel_stride : 0;
  const size_t idx_bytes = sizeof(uint32_t) * static_cast<size_t>(n_sel + (w.sel ? n : 0)),
               idx_off = region(idx_bytes);
  const size_t down_bytes = at;
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(hd);
  const size_t kv_off = region(row_bytes * static_cast<size_t>(n));
  const size_t cn_off = region(row_bytes * static_cast<size_t>(w.n_comp_new));
  const size_t sink_bytes = sizeof(float) * static_cast<size_t>(w.n_head), sink_off = region(sink_bytes);
  const size_t o_off = region(q_bytes);
  const size_t total = at;
  if (total > ctx_->max_storage_range())
    return err("%s: %s on layer %d: %lld tokens need %s of scratch, more than the device binds at once (%s)",
               nm, kOp, w.layer, static_cast<long long>(n), format_bytes(total).c_str(),
               format_bytes(ctx_->max_storage_range()).c_str());

  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  auto fail = [&](const Error& e) -> Result<DeviceTicket> {
    ctx_->discard(s);
    return e;
  };
  auto staging = ctx_->add_scratch(s, total, /*host_visible=*/true, "run_sparse_attention staging");
  if (!staging.ok()) return fail(staging.error());
  auto scratch = ctx_->add_scratch(s, total, /*host_visible=*/false, "run_sparse_attention activations");
  if (!scratch.ok()) return fail(scratch.error());
  uint8_t* st = staging->mapped;
  std::memcpy(st + q_off, w.q, q_bytes);
  if (w.sel) {
    uint32_t* idx = reinterpret_cast<uint32_t*>(st + idx_off);
    for (int64_t t = 0; t < n; ++t)  // a token's chosen rows (the rest of its stride is not read)
      for (int64_t i = 0; i < w.sel_n[t]; ++i)
        idx[t * w.sel_stride + i] = static_cast<uint32_t>(w.sel[t * w.sel_stride + i]);
    for (int64_t t = 0; t < n; ++t) idx[n_sel + t] = static_cast<uint32_t>(w.sel_n[t]);
  }
  std::memcpy(st + kv_off, w.kv_new, row_bytes * static_cast<size_t>(n));
  if (w.n_comp_new > 0) std::memcpy(st + cn_off, w.comp_new, row_bytes * static_cast<size_t>(w.n_comp_new));

  const vk::Api& api = ctx_->api();
  const VkBuffer sb = scratch->buf;
  const VkBufferCopy down{0, 0, down_bytes};
  api.vkCmdCopyBuffer(s.cmd, staging->buf, sb, 1, &down);
  if (sinks) {
    const VkBufferCopy cp{w.sinks.offset, sink_off, sink_bytes};
    api.vkCmdCopyBuffer(s.cmd, sinks->buf, sb, 1, &cp);
  }
  // the new rows into their slots
  auto write_rows = [&](const DeviceRows& r, const vk::RawBuffer& dst, size_t src_off, int64_t row0,
                        int64_t count) {
    std::vector<VkBufferCopy> cps(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      const int64_t slot = r.ring ? (row0 + j) % r.capacity : row0 + j;
      cps[static_cast<size_t>(j)] = VkBufferCopy{src_off + row_bytes * static_cast<size_t>(j),
                                                 r.offset + row_bytes * static_cast<size_t>(slot), row_bytes};
    }
    if (count > 0)
      api.vkCmdCopyBuffer(s.cmd, staging->buf, dst.buf, static_cast<uint32_t>(count), cps.data());
  };
  write_rows(w.win, *win.raw, kv_off, w.pos0, n);
  if (w.ratio > 0) write_rows(w.comp, *comp.raw, cn_off, w.comp_row0, w.n_comp_new);
  ctx_->barrier(s.cmd);

  const uint32_t none = ~0u;
  const SparseAttnParams p{static_cast<uint32_t>(n),
                           static_cast<uint32_t>(w.pos0),
                           static_cast<uint32_t>(w.n_head),
                           static_cast<uint32_t>(hd),
                           static_cast<uint32_t>(w.window),
                           static_cast<uint32_t>(std::max(w.ratio, 1)),
                           w.ratio == 0 ? 0u
                           : w.sel      ? 2u
                                        : 1u,
                           w.scale,
                           static_cast<uint32_t>(q_off / 4),
                           static_cast<uint32_t>(o_off / 4),
                           sinks ? static_cast<uint32_t>(sink_off / 4) : none,
                           win.off,
                           static_cast<uint32_t>(w.win.capacity),
                           w.win.ring ? 1u : 0u,
                           comp.off,
                           static_cast<uint32_t>(w.ratio > 0 ? w.comp.capacity : 1),
                           w.ratio > 0 && w.comp.ring ? 1u : 0u,
                           0u,
                           static_cast<uint32_t>(n_sel),
                           static_cast<uint32_t>(std::max<int64_t>(w.sel_stride, 0))};
  const Region regions[4] = {Region{sb, 0, total}, win.reg, w.ratio > 0 ? comp.reg : win.reg,
                             Region{sb, idx_off, align_up(std::max<size_t>(idx_bytes, 4), 4)}};
  auto set = bind(s, sparse_attention_, regions, &p);
  if (!set.ok()) return fail(set.error());
  api.vkCmdDispatch(s.cmd, static_cast<uint32_t>(n), static_cast<uint32_t>(w.n_head), 1);
  ctx_->barrier(s.cmd);
  const VkBufferCopy up{o_off, o_off, q_bytes};
  api.vkCmdCopyBuffer(s.cmd, sb, staging->buf, 1, &up);
  const uint8_t* from = staging->mapped + o_off;
  float* out = w.out;
  s.on_done.push_back([out, from, q_bytes] { std::memcpy(out, from, q_bytes); });
  return ctx_->submit(std::move(s));
}

}  // namespace strata
