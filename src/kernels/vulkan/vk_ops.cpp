// VulkanDevice's layer ops (vk_device.h): run_linear, run_ffn and run_experts recorded as
// dispatches of shaders/linear.comp and shaders/swiglu.comp, and the host side of their
// activations (conversion to the vec_dot_type's device form, staging, the copies up).
#include <cstring>

#include "base/units.h"
#include "kernels/vulkan/vk_device.h"
#include "kernels/vulkan/vk_forms.h"
#include "kernels/vulkan/vk_shaders.h"

namespace strata {

namespace {

struct LinearParams {
  uint32_t w_off, row_stride, n_in, n_out, n_tok, bias_off, has_bias;
};

constexpr size_t kMaxJobs = 65535;  // jobs per dispatch (workgroup z)
constexpr size_t kJobWords = 5;     // linear.comp's job: w offset, x row, y index, bias index, tokens
constexpr int64_t kTokenTile = 8;   // linear.comp's TT: tokens a workgroup computes

}  // namespace

using vk::align_up;
using vk::form_bytes;
using vk::form_of;
using vk::kMaxGroups;
using vk::kMaxRows;
using vk::kRegionAlign;
using vk::SwigluParams;
using vk::to_form;
using vk::Window;
using vk::window;
using vk::XForm;

Status VulkanDevice::create_pipelines() {
  STRATA_ASSIGN(swiglu_, vk::create_pipeline(ctx_->api(), ctx_->device(), vk::swiglu_shader(), 3,
                                             sizeof(SwigluParams), "swiglu", ctx_->pipeline_cache()));
  STRATA_ASSIGN(attn_rope_,
                vk::create_pipeline(ctx_->api(), ctx_->device(), vk::attn_rope_shader(), 3,
                                    sizeof(vk::AttnRopeParams), "attn_rope", ctx_->pipeline_cache()));
  STRATA_ASSIGN(attention_,
                vk::create_pipeline(ctx_->api(), ctx_->device(), vk::attention_shader(), 3,
                                    sizeof(vk::AttentionParams), "attention", ctx_->pipeline_cache()));
  return create_sparse_pipeline();
}

Result<const vk::Pipeline*> VulkanDevice::linear_pipeline(GgmlType t, bool jobs) {
  std::map<GgmlType, vk::Pipeline>& built = jobs ? linear_jobs_ : linear_;
  auto it = built.find(t);
  if (it != built.end()) return &it->second;
  const std::string what = std::string("linear_") + type_name(t) + (jobs ? "_jobs" : "");
  STRATA_ASSIGN(
      vk::Pipeline p,
      vk::create_pipeline(ctx_->api(), ctx_->device(), vk::linear_shader(t, jobs, subgroup_), jobs ? 5 : 4,
                          sizeof(LinearParams), what.c_str(), ctx_->pipeline_cache()));
  return &built.emplace(t, p).first->second;
}

Result<DeviceTicket> VulkanDevice::run_experts(const DeviceExpertWork& w) {
  std::lock_guard<std::mutex> lock(mu_);
  return run_experts_locked(w);
}

Result<DeviceTicket> VulkanDevice::run_attention(const DeviceAttnWork& w) {
  std::lock_guard<std::mutex> lock(mu_);
  return run_attention_locked(w);
}

Result<DeviceTicket> VulkanDevice::run_ffn(const DeviceFfnWork& w) {
  std::lock_guard<std::mutex> lock(mu_);
  return run_ffn_locked(w);
}

Result<DeviceTicket> VulkanDevice::run_linear(const DeviceLinearWork& w) {
  std::lock_guard<std::mutex> lock(mu_);
  return run_linear_locked(w);
}

Result<const vk::RawBuffer*> VulkanDevice::weight(const DeviceMat& m, const char* op,
                                                  const char* what) const {
  const char* nm = name().c_str();
  if (m.buf == nullptr) return err("%s: %s: %s has no buffer", nm, op, what);
  if (vk::linear_shader(m.type, false, subgroup_).empty())
    return err(
        "%s: %s: %s has type %s, which has no Vulkan kernel yet (F32, F16, BF16, Q8_0, Q4_0, Q5_0, "
        "Q5_1, MXFP4, NVFP4, Q4_K, Q5_K, Q6_K)",
        nm, op, what, type_name(m.type));
  const int64_t bs = type_info(m.type).block_size;
  if (m.out < 1 || m.in < 1 || m.in % bs != 0 || m.row_stride < row_bytes(m.type, m.in) || m.out > kMaxRows)
    return err("%s: %s: %s has shape {%lld, %lld} with rows %zu bytes apart", nm, op, what,
               static_cast<long long>(m.in), static_cast<long long>(m.out), m.row_stride);
  const size_t extent = m.row_stride * static_cast<size_t>(m.out - 1) + row_bytes(m.type, m.in);
  STRATA_ASSIGN(const vk::RawBuffer* raw, resolve(*m.buf, m.offset, extent, what));
  const size_t align = m.type == GgmlType::f32                                  ? 4
                       : m.type == GgmlType::mxfp4 || m.type == GgmlType::nvfp4 ? 1
                                                                                : 2;
  if (m.offset % align != 0 || m.row_stride % align != 0)
    return err("%s: %s: %s rows at offset %zu, %zu bytes apart: the kernel needs %zu-byte alignment", nm, op,
               what, m.offset, m.row_stride, align);
  const Window win = window(m.offset, extent);
  if (win.span > ctx_->max_storage_range())
    return err("%s: %s: %s spans %s, more than the device binds at once (%s)", nm, op, what,
               format_bytes(win.span).c_str(), format_bytes(ctx_->max_storage_range()).c_str());
  return raw;
}

Result<VkDescriptorSet> VulkanDevice::bind(vk::Submission& s, const vk::Pipeline& p, const Region* regions,
                                           const void* params) {
  STRATA_ASSIGN(VkDescriptorSet set, ctx_->allocate_set(p.set_layout));
  s.sets.push_back(set);
  VkDescriptorBufferInfo bufs[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
  for (uint32_t i = 0; i < p.bindings; ++i) {
    bufs[i] = VkDescriptorBufferInfo{regions[i].buf, regions[i].offset, regions[i].bytes};
    writes[i] = VkWriteDescriptorSet{};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &bufs[i];
  }
  const vk::Api& api = ctx_->api();
  api.vkUpdateDescriptorSets(ctx_->device(), p.bindings, writes, 0, nullptr);
  api.vkCmdBindPipeline(s.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  api.vkCmdBindDescriptorSets(s.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  api.vkCmdPushConstants(s.cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, params);
  return set;
}

Status VulkanDevice::record_linear(vk::Submission& s, const DeviceMat& m, const vk::RawBuffer& w,
                                   const vk::RawBuffer* bias, size_t bias_offset, const Region& x,
                                   const Region& y, int64_t n) {
  // Bound from the last 256-byte boundary at or before the data (a valid storage buffer offset
  // on every device); the shader adds the rest.
  const Window wwin =
      window(m.offset, m.row_stride * static_cast<size_t>(m.out - 1) + row_bytes(m.type, m.in));
  const Window bwin = window(bias_offset, sizeof(float) * static_cast<size_t>(m.out));
  const Region regions[4] = {
      {w.buf, wwin.base, wwin.span}, x, y, bias != nullptr ? Region{bias->buf, bwin.base, bwin.span} : x};
  const LinearParams params{static_cast<uint32_t>(m.offset - wwin.base),
                            static_cast<uint32_t>(m.row_stride),
                            static_cast<uint32_t>(m.in),
                            static_cast<uint32_t>(m.out),
                            static_cast<uint32_t>(n),
                            static_cast<uint32_t>((bias_offset - bwin.base) / 4),
                            bias != nullptr ? 1u : 0u};
  STRATA_ASSIGN(const vk::Pipeline* lp, linear_pipeline(m.type, false));
  STRATA_TRY(bind(s, *lp, regions, &params).status());
  dispatch_rows(s, m.out, static_cast<uint32_t>((n + kTokenTile - 1) / kTokenTile));
  ctx_->barrier(s.cmd);
  return {};
}

void VulkanDevice::dispatch_rows(vk::Submission& s, int64_t rows, uint32_t z) {
  const int64_t groups = (rows + rows_per_group_ - 1) / rows_per_group_;
  ctx_->api().vkCmdDispatch(s.cmd, static_cast<uint32_t>(std::min<int64_t>(groups, kMaxGroups)),
                            static_cast<uint32_t>((groups + kMaxGroups - 1) / kMaxGroups), z);
}

size_t VulkanDevice::plan_jobs(const std::vector<Product>& ps, size_t table_off,
                               std::vector<JobDispatch>* out) const {
  out->clear();
  const size_t max_span = ctx_->max_storage_range();
  size_t lo = 0, hi = 0;  // the current dispatch's matrices' byte range
  for (size_t i = 0; i < ps.size(); ++i) {
    const DeviceMat& m = *ps[i].m;
    const size_t b = m.offset,
                 e = b + m.row_stride * static_cast<size_t>(m.out - 1) + row_bytes(m.type, m.in);
    const DeviceMat* q = out->empty() ? nullptr : out->back().proto;
    if (q != nullptr && out->back().w == ps[i].w && out->back().count < kMaxJobs && q->type == m.type &&
        q->row_stride == m.row_stride && q->in == m.in && q->out == m.out) {
      const size_t nlo = std::min(lo, b), nhi = std::max(hi, e);
      if (vk::window(nlo, nhi - nlo).span <= max_span) {
        lo = nlo, hi = nhi;
        out->back().win = vk::window(lo, hi - lo);
        ++out->back().count;
        continue;
      }
    }
    lo = b, hi = e;
    out->push_back(JobDispatch{&m, ps[i].w, vk::window(lo, hi - lo), i, 1, 0});
  }
  size_t at = table_off;
  for (JobDispatch& d : *out) {
    d.table_off = at = align_up(at, kRegionAlign);
    at += 4 * kJobWords * d.count;
  }
  return at;
}

void VulkanDevice::write_jobs(const std::vector<Product>& ps, const std::vector<JobDispatch>& ds,
                              uint8_t* stage) {
  for (const JobDispatch& d : ds) {
    uint32_t* job = reinterpret_cast<uint32_t*>(stage + d.table_off);
    for (size_t i = d.first; i < d.first + d.count; ++i, job += kJobWords) {
      const Product& p = ps[i];
      job[0] = static_cast<uint32_t>(p.m->offset - d.win.base);
      job[1] = p.x_row;
      job[2] = p.y_at;
      job[3] = p.bias_at;
      job[4] = p.tokens;
    }
  }
}

Status VulkanDevice::record_jobs(vk::Submission& s, const std::vector<JobDispatch>& ds, VkBuffer tables,
                                 const Region& x, const Region& y, const Region* bias) {
  for (const JobDispatch& d : ds) {
    const DeviceMat& m = *d.proto;
    const Region regions[5] = {{d.w->buf, d.win.base, d.win.span},
                               x,
                               y,
                               bias != nullptr ? *bias : x,
                               {tables, d.table_off, 4 * kJobWords * d.count}};
    const LinearParams params{0,
                              static_cast<uint32_t>(m.row_stride),
                              static_cast<uint32_t>(m.in),
                              static_cast<uint32_t>(m.out),
                              static_cast<uint32_t>(d.count),
                              0,
                              0};
    STRATA_ASSIGN(const vk::Pipeline* lp, linear_pipeline(m.type, true));
    STRATA_TRY(bind(s, *lp, regions, &params).status());
    dispatch_rows(s, m.out, static_cast<uint32_t>(d.count));  // workgroup z: the job
  }
  ctx_->barrier(s.cmd);
  return {};
}

Result<DeviceTicket> VulkanDevice::empty_submission() {
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  return ctx_->submit(std::move(s));
}

Result<DeviceTicket> VulkanDevice::run_linear_locked(const DeviceLinearWork& w) {
  const DeviceMat& m = w.w;
  const char* nm = name().c_str();
  STRATA_ASSIGN(const vk::RawBuffer* wb, weight(m, "run_linear", "weight"));
  const vk::RawBuffer* bb = nullptr;
  if (w.bias.buf != nullptr) {
    if (w.bias.n != m.out || w.bias.offset % 4 != 0)
      return err(
          "%s: run_linear: bias has %lld values at offset %zu, expected %lld at a 4-byte aligned offset", nm,
          static_cast<long long>(w.bias.n), w.bias.offset, static_cast<long long>(m.out));
    STRATA_ASSIGN(bb,
                  resolve(*w.bias.buf, w.bias.offset, sizeof(float) * static_cast<size_t>(m.out), "bias"));
  }
  if (w.n < 0 || w.n > kMaxGroups)
    return err("%s: run_linear of %lld rows (at most %u)", nm, static_cast<long long>(w.n), kMaxGroups);
  if (w.n == 0) return empty_submission();

  // Staging [x | y] and the device's scratch [x | y]: x down, the product, y up.
  const int64_t n = w.n;
  const XForm xf = form_of(m.type);
  const size_t x_bytes = form_bytes(xf, n, m.in);
  const size_t y_off = align_up(x_bytes, kRegionAlign), y_bytes = static_cast<size_t>(n * m.out) * 4;
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  auto fail = [&](const Error& e) -> Result<DeviceTicket> {
    ctx_->discard(s);
    return e;
  };
  auto staging = ctx_->add_scratch(s, y_off + y_bytes, /*host_visible=*/true, "run_linear staging");
  if (!staging.ok()) return fail(staging.error());
  auto scratch = ctx_->add_scratch(s, y_off + y_bytes, /*host_visible=*/false, "run_linear activations");
  if (!scratch.ok()) return fail(scratch.error());
  to_form(xf, w.x, n, m.in, staging->mapped);

  const vk::Api& api = ctx_->api();
  const VkBufferCopy down{0, 0, x_bytes};
  api.vkCmdCopyBuffer(s.cmd, staging->buf, scratch->buf, 1, &down);
  ctx_->barrier(s.cmd);
  Status st = record_linear(s, m, *wb, bb, w.bias.offset, Region{scratch->buf, 0, x_bytes},
                            Region{scratch->buf, y_off, y_bytes}, n);
  if (!st.ok()) return fail(st.error());
  const VkBufferCopy up{y_off, y_off, y_bytes};
  api.vkCmdCopyBuffer(s.cmd, scratch->buf, staging->buf, 1, &up);
  const uint8_t* from = staging->mapped + y_off;
  float* y = w.y;
  s.on_done.push_back([y, from, y_bytes] { std::memcpy(y, from, y_bytes); });
  return ctx_->submit(std::move(s));
}

Result<DeviceTicket> VulkanDevice::run_ffn_locked(const DeviceFfnWork& w) {
  static constexpr const char* kOp = "run_ffn";
  STRATA_ASSIGN(const vk::RawBuffer* gb, weight(w.gate, kOp, "gate"));
  STRATA_ASSIGN(const vk::RawBuffer* ub, weight(w.up, kOp, "up"));
  STRATA_ASSIGN(const vk::RawBuffer* db, weight(w.down, kOp, "down"));
  const int64_t d = w.gate.in, F = w.gate.out;
  if (w.up.in != d || w.up.out != F || w.down.in != F || w.down.out != d || w.n < 0 || w.n > kMaxGroups)
    return err(
        "%s: run_ffn on layer %d: gate {%lld, %lld}, up {%lld, %lld}, down {%lld, %lld} do not fit (%lld "
        "tokens)",
        name().c_str(), w.layer, static_cast<long long>(w.gate.in), static_cast<long long>(w.gate.out),
        static_cast<long long>(w.up.in), static_cast<long long>(w.up.out), static_cast<long long>(w.down.in),
        static_cast<long long>(w.down.out), static_cast<long long>(w.n));
  if (w.n == 0) return empty_submission();

  // Scratch regions: x for gate (and up, unless its form differs), g, u, h, y; staging holds the
  // x regions then y.
  const int64_t n = w.n;
  const XForm gf = form_of(w.gate.type), uf = form_of(w.up.type), hf = form_of(w.down.type);
  const size_t xg_bytes = form_bytes(gf, n, d), xu_bytes = uf == gf ? 0 : form_bytes(uf, n, d);
  const size_t f_bytes = static_cast<size_t>(n * F) * 4, h_bytes = form_bytes(hf, n, F);
  const size_t y_bytes = static_cast<size_t>(n * d) * 4;
  const size_t xu_off = align_up(xg_bytes, kRegionAlign), y_off = align_up(xu_off + xu_bytes, kRegionAlign);
  const size_t g_off = align_up(y_off + y_bytes, kRegionAlign),
               u_off = align_up(g_off + f_bytes, kRegionAlign);
  const size_t h_off = align_up(u_off + f_bytes, kRegionAlign), total = h_off + h_bytes;
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  auto fail = [&](const Error& e) -> Result<DeviceTicket> {
    ctx_->discard(s);
    return e;
  };
  auto staging = ctx_->add_scratch(s, y_off + y_bytes, /*host_visible=*/true, "run_ffn staging");
  if (!staging.ok()) return fail(staging.error());
  auto scratch = ctx_->add_scratch(s, total, /*host_visible=*/false, "run_ffn activations");
  if (!scratch.ok()) return fail(scratch.error());
  to_form(gf, w.x, n, d, staging->mapped);
  if (xu_bytes > 0) to_form(uf, w.x, n, d, staging->mapped + xu_off);

  const vk::Api& api = ctx_->api();
  const VkBuffer sb = scratch->buf;
  const VkBufferCopy down{0, 0, xu_off + xu_bytes};
  api.vkCmdCopyBuffer(s.cmd, staging->buf, sb, 1, &down);
  ctx_->barrier(s.cmd);
  const Region xg{sb, 0, xg_bytes}, xu = xu_bytes > 0 ? Region{sb, xu_off, xu_bytes} : xg;
  const Region g{sb, g_off, f_bytes}, u{sb, u_off, f_bytes}, h{sb, h_off, h_bytes}, y{sb, y_off, y_bytes};
  Status st = record_linear(s, w.gate, *gb, nullptr, 0, xg, g, n);
  if (st.ok()) st = record_linear(s, w.up, *ub, nullptr, 0, xu, u, n);
  if (!st.ok()) return fail(st.error());
  const Region act[3] = {g, u, h};
  const SwigluParams params{
      static_cast<uint32_t>(n), static_cast<uint32_t>(F), static_cast<uint32_t>(hf), 0, 0, 0};
  auto set = bind(s, swiglu_, act, &params);
  if (!set.ok()) return fail(set.error());
  const int64_t groups = (n * ((F + 31) / 32) + 63) / 64;
  api.vkCmdDispatch(s.cmd, static_cast<uint32_t>(std::min<int64_t>(groups, kMaxGroups)),
                    static_cast<uint32_t>((groups + kMaxGroups - 1) / kMaxGroups), 1);
  ctx_->barrier(s.cmd);
  st = record_linear(s, w.down, *db, nullptr, 0, h, y, n);
  if (!st.ok()) return fail(st.error());
  const VkBufferCopy up{y_off, y_off, y_bytes};
  api.vkCmdCopyBuffer(s.cmd, sb, staging->buf, 1, &up);
  const uint8_t* from = staging->mapped + y_off;
  float* out = w.y;
  s.on_done.push_back([out, from, y_bytes] { std::memcpy(out, from, y_bytes); });
  return ctx_->submit(std::move(s));
}

Result<DeviceTicket> VulkanDevice::run_experts_locked(const DeviceExpertWork& w) {
  static constexpr const char* kOp = "run_experts";
  const char* nm = name().c_str();
  const ExpertFfnStep& st = w.step;
  if (w.n_run < 0 || w.n_run > w.n_expert || w.K < 1 || w.n < 0 || st.d < 1 || st.F < 1)
    return err("%s: run_experts on layer %d: %d experts of %d, K %d, %lld tokens", nm, w.layer, w.n_run,
               w.n_expert, w.K, static_cast<long long>(w.n));
  if (w.n_run == 0 || w.n == 0) return empty_submission();
  const uint32_t act_mode = st.act == ExpertAct::expert_act_swiglu_oai                          ? 1u
                            : st.act == ExpertAct::expert_act_swiglu_clamped && st.limit > 0.0f ? 2u
                                                                                                : 0u;
  const int64_t d = st.d, F = st.F;
  // Each run expert's matrices and its slots, grouped in the step's order.
  struct Run {
    const vk::RawBuffer *gate, *up, *down;
    int64_t row0, m;
  };
  std::vector<Run> runs(static_cast<size_t>(w.n_run));
  std::vector<int32_t> slots;  // grouped rows -> slot
  for (int i = 0; i < w.n_run; ++i) {
    const int e = w.experts[i];
    if (e < 0 || e >= w.n_expert)
      return err("%s: run_experts on layer %d: expert %d of %d", nm, w.layer, e, w.n_expert);
    const DeviceExpert& m = w.mats[i];
    Run& r = runs[static_cast<size_t>(i)];
    STRATA_ASSIGN(r.gate, weight(m.gate, kOp, "gate"));
    STRATA_ASSIGN(r.up, weight(m.up, kOp, "up"));
    STRATA_ASSIGN(r.down, weight(m.down, kOp, "down"));
    if (m.gate.in != d || m.up.in != d || m.gate.out != F || m.up.out != F || m.down.in != F ||
        m.down.out != d || m.gate.type != w.mats[0].gate.type || m.up.type != w.mats[0].up.type ||
        m.down.type != w.mats[0].down.type)
      return err("%s: run_experts on layer %d: expert %d's matrices do not have the step's shapes and types",
                 nm, w.layer, e);
    r.row0 = static_cast<int64_t>(slots.size());
    for (int32_t j = st.off[e]; j < st.off[e + 1]; ++j) {
      const int32_t slot = st.slots[j];
      if (slot < 0 || slot >= w.n * w.K)
        return err("%s: run_experts on layer %d: slot %d of %lld", nm, w.layer, slot,
                   static_cast<long long>(w.n * w.K));
      slots.push_back(slot);
    }
    r.m = static_cast<int64_t>(slots.size()) - r.row0;
  }
  const int64_t M = static_cast<int64_t>(slots.size());
  if (M == 0) return empty_submission();
  if (M > kMaxGroups)
    return err("%s: run_experts on layer %d: %lld slots (at most %u)", nm, w.layer, static_cast<long long>(M),
               kMaxGroups);

  // As run_ffn over the grouped slots' rows, as job-list dispatches (linear.comp -DJOBS): every
  // run expert's gate and up products over its slots in one dispatch (two where gate and up differ
  // in type), then every down product in one (more only where the experts' matrices lie in
  // buffers or windows the device cannot bind at once).
  const DeviceMat &g0 = w.mats[0].gate, &u0 = w.mats[0].up;
  const XForm gf = form_of(g0.type), uf = form_of(u0.type), hf = form_of(w.mats[0].down.type);
  const bool fused = g0.type == u0.type && g0.row_stride == u0.row_stride;
  const size_t xg_row = form_bytes(gf, 1, d), xu_row = uf == gf ? 0 : form_bytes(uf, 1, d);
  const size_t xg_bytes = xg_row * static_cast<size_t>(M), xu_bytes = xu_row * static_cast<size_t>(M);
  const size_t f_bytes = static_cast<size_t>(M * F) * 4, h_bytes = form_bytes(hf, M, F);
  const size_t y_bytes = static_cast<size_t>(M * d) * 4;
  // The run experts' gate / up bias rows: linear.comp adds them after each product, as
  // kernels/expert_ffn.cpp adds them before the activation.
  const size_t b_bytes = sizeof(float) * static_cast<size_t>(w.n_run * F);
  const size_t xu_off = align_up(xg_bytes, kRegionAlign), gb_off = align_up(xu_off + xu_bytes, kRegionAlign);
  const size_t ub_off = gb_off + (st.gate_b != nullptr ? align_up(b_bytes, kRegionAlign) : 0);
  const size_t j_off = align_up(ub_off + (st.up_b != nullptr ? b_bytes : 0), kRegionAlign);
  const size_t g_off_rel = 0, u_off_rel = align_up(f_bytes, kRegionAlign);  // within the g | u region
  // The products: gate rows of every slot, then up rows (their y after g's), then down rows.
  std::vector<Product> gu, up_only, dn;
  gu.reserve(static_cast<size_t>(2 * M));
  dn.reserve(static_cast<size_t>(M));
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < w.n_run; ++i) {
      const Run& r = runs[static_cast<size_t>(i)];
      const DeviceMat& m = pass == 0 ? w.mats[i].gate : w.mats[i].up;
      const float* b = pass == 0 ? st.gate_b : st.up_b;
      const size_t y0 = (pass == 0 ? g_off_rel : u_off_rel) / 4;
      const size_t b0 = pass == 0 ? 0 : (ub_off - gb_off) / 4;
      for (int64_t j = r.row0; j < r.row0 + r.m; j += kTokenTile) {  // a tile of the expert's slots
        const auto tokens = static_cast<uint32_t>(std::min(kTokenTile, r.row0 + r.m - j));
        const Product p{
            &m,
            pass == 0 ? r.gate : r.up,
            static_cast<uint32_t>(j),
            static_cast<uint32_t>(y0 + static_cast<size_t>(j * F)),
            b != nullptr ? static_cast<uint32_t>(b0 + static_cast<size_t>(i) * static_cast<size_t>(F)) : ~0u,
            tokens};
        (pass == 1 && !fused ? up_only : gu).push_back(p);
        if (pass == 1)
          dn.push_back(Product{&w.mats[i].down, r.down, static_cast<uint32_t>(j),
                               static_cast<uint32_t>(j * d), ~0u, tokens});
      }
    }
  std::vector<JobDispatch> plan_gu, plan_up, plan_dn;  // the dispatches and their tables from j_off
  const size_t jobs_end =
      plan_jobs(dn, plan_jobs(up_only, plan_jobs(gu, j_off, &plan_gu), &plan_up), &plan_dn);
  const size_t y_off = align_up(jobs_end, kRegionAlign);
  const size_t g_off = align_up(y_off + y_bytes, kRegionAlign), u_off = g_off + u_off_rel;
  const size_t h_off = align_up(u_off + f_bytes, kRegionAlign), total = h_off + h_bytes;
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  auto fail = [&](const Error& e) -> Result<DeviceTicket> {
    ctx_->discard(s);
    return e;
  };
  auto staging = ctx_->add_scratch(s, y_off + y_bytes, /*host_visible=*/true, "run_experts staging");
  if (!staging.ok()) return fail(staging.error());
  auto scratch = ctx_->add_scratch(s, total, /*host_visible=*/false, "run_experts activations");
  if (!scratch.ok()) return fail(scratch.error());
  write_jobs(gu, plan_gu, staging->mapped);
  write_jobs(up_only, plan_up, staging->mapped);
  write_jobs(dn, plan_dn, staging->mapped);
  {  // every token converted once, then its rows copied to the slots routed to these experts
    std::vector<uint8_t> xg(xg_row * static_cast<size_t>(w.n)), xu(xu_row * static_cast<size_t>(w.n));
    to_form(gf, w.x, w.n, d, xg.data());
    if (xu_row > 0) to_form(uf, w.x, w.n, d, xu.data());
    for (int64_t j = 0; j < M; ++j) {
      const size_t t = static_cast<size_t>(slots[static_cast<size_t>(j)] / w.K);
      std::memcpy(staging->mapped + static_cast<size_t>(j) * xg_row, xg.data() + t * xg_row, xg_row);
      if (xu_row > 0)
        std::memcpy(staging->mapped + xu_off + static_cast<size_t>(j) * xu_row, xu.data() + t * xu_row,
                    xu_row);
    }
  }
  const size_t fb = sizeof(float) * static_cast<size_t>(F);
  for (int i = 0; i < w.n_run; ++i) {
    const size_t o = fb * static_cast<size_t>(i),
                 e = static_cast<size_t>(w.experts[i]) * static_cast<size_t>(F);
    if (st.gate_b != nullptr) std::memcpy(staging->mapped + gb_off + o, st.gate_b + e, fb);
    if (st.up_b != nullptr) std::memcpy(staging->mapped + ub_off + o, st.up_b + e, fb);
  }
  const vk::Api& api = ctx_->api();
  const VkBuffer sb = scratch->buf;
  const VkBufferCopy down{0, 0, y_off};
  api.vkCmdCopyBuffer(s.cmd, staging->buf, sb, 1, &down);
  ctx_->barrier(s.cmd);
  const Region xg{sb, 0, xg_bytes}, xu = xu_bytes > 0 ? Region{sb, xu_off, xu_bytes} : xg;
  const Region g{sb, g_off, f_bytes}, u{sb, u_off, f_bytes}, h{sb, h_off, h_bytes}, y{sb, y_off, y_bytes};
  const Region gu_y{sb, g_off, u_off + f_bytes - g_off};
  const bool biased = st.gate_b != nullptr || st.up_b != nullptr;
  const Region gu_b{sb, gb_off, std::max<size_t>(ub_off + (st.up_b != nullptr ? b_bytes : 0) - gb_off, 4)};
  Status status = record_jobs(s, plan_gu, sb, xg, gu_y, biased ? &gu_b : nullptr);
  if (status.ok() && !plan_up.empty())
    status = record_jobs(s, plan_up, sb, xu, gu_y, biased ? &gu_b : nullptr);
  if (!status.ok()) return fail(status.error());
  const Region act[3] = {g, u, h};
  const SwigluParams params{static_cast<uint32_t>(M),
                            static_cast<uint32_t>(F),
                            static_cast<uint32_t>(hf),
                            act_mode,
                            st.alpha,
                            st.limit};
  auto set = bind(s, swiglu_, act, &params);
  if (!set.ok()) return fail(set.error());
  const int64_t groups = (M * ((F + 31) / 32) + 63) / 64;
  api.vkCmdDispatch(s.cmd, static_cast<uint32_t>(std::min<int64_t>(groups, kMaxGroups)),
                    static_cast<uint32_t>((groups + kMaxGroups - 1) / kMaxGroups), 1);
  ctx_->barrier(s.cmd);
  status = record_jobs(s, plan_dn, sb, h, y, nullptr);
  if (!status.ok()) return fail(status.error());
  const VkBufferCopy up{y_off, y_off, y_bytes};
  api.vkCmdCopyBuffer(s.cmd, sb, staging->buf, 1, &up);
  // Up on the host as phase_down of kernels/expert_ffn.cpp finishes a row: + down bias, · weight.
  std::vector<const float*> down_b(static_cast<size_t>(M), nullptr);
  std::vector<float> wts(st.wts != nullptr ? static_cast<size_t>(M) : 0);
  for (int i = 0; i < w.n_run; ++i) {
    const Run& r = runs[static_cast<size_t>(i)];
    for (int64_t j = r.row0; j < r.row0 + r.m; ++j) {
      if (st.down_b != nullptr) down_b[static_cast<size_t>(j)] = st.down_b + int64_t{w.experts[i]} * d;
      if (st.wts != nullptr) wts[static_cast<size_t>(j)] = st.wts[slots[static_cast<size_t>(j)]];
    }
  }
  const float* from = reinterpret_cast<const float*>(staging->mapped + y_off);
  s.on_done.push_back(
      [from, d, y_out = st.y, slots = std::move(slots), down_b = std::move(down_b), wts = std::move(wts)] {
        std::vector<float> row(static_cast<size_t>(d));
        for (size_t j = 0; j < slots.size(); ++j) {
          std::memcpy(row.data(), from + j * static_cast<size_t>(d), sizeof(float) * row.size());
          if (down_b[j] != nullptr)
            for (int64_t k = 0; k < d; ++k) row[static_cast<size_t>(k)] += down_b[j][k];
          float* dst = y_out + int64_t{slots[j]} * d;
          if (!wts.empty()) {
            for (int64_t k = 0; k < d; ++k) dst[k] = row[static_cast<size_t>(k)] * wts[j];
          } else {
            std::memcpy(dst, row.data(), sizeof(float) * row.size());
          }
        }
      });
  return ctx_->submit(std::move(s));
}

}  // namespace strata
