// The device seam: what the forward and the memory tiers ask of a compute device — buffers
// (allocated, or imported from host memory such as the mmapped weights), a queue of uploads /
// downloads / work with a timeline, and a layer's ops: the attention block, DeepSeek-V4's sparse
// attention core over its window ring and compressed rows, the dense FFN, a linear layer (the
// output head), and the expert op (a subset of one MoE layer's routed experts
// applied to the tokens routed to them). Implementations: the CPU (kernels/cpu_device.h) and
// Vulkan (kernels/vulkan/vk_device.h: every op, f32 / f16 KV rows; chosen at load by --device); the
// GPU tier implements the same calls, so it arrives without touching model/.
//
// What stays on the host: the residual stream, the norms between blocks, routing and sampling.
// A block's normed input x and its output are host memory: a device that is not host-visible
// copies x down and the output up (n·n_embd floats each way per block). Weights and KV cache
// rows live in the device's buffers (model/archs/decoder.cpp places them there at load and at
// session start), so a block's weight bytes never cross the bus during a step.
//
// How the standard decoder uses it (model/archs/decoder.cpp): per layer, RMSNorm on the host,
// run_attention with each sequence's K / V rows (DeviceRows) as segments, the residual add,
// RMSNorm, then run_ffn (dense) or the MoE loop, the residual add; run_linear for the logits.
//
// How the MoE loop uses it (model/blocks/moe.cpp): the expert store hands out each expert's weights
// with the device that holds them (memory/experts/expert_source.h ExpertViews::device). Experts in
// host memory are computed by the step's own pool region; the experts a device holds are
// submitted to it as one DeviceExpertWork per device and step (run_experts), which runs while the
// host computes its own, and the loop waits for the ticket before summing. Every expert's output
// rows are the same bits whichever device computed them: a device computes an expert's slot
// with the one reduction order of its weight type (kernels/expert_ffn.h).
//
// The queue is in order: each submission returns a ticket (a point on the device's timeline);
// reached(t) / wait(t) tell when everything submitted up to t is done. Host pointers passed to a
// submission must stay valid until its ticket is reached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "quant/qtypes.h"
#include "kernels/attention_block.h"
#include "kernels/expert_ffn.h"

namespace strata {

enum class DeviceKind { device_cpu, device_gpu };

// Memory a device owns. `host` is its address in this process when the device's memory is
// host-visible (the CPU: the memory itself), else null: only the queue reads and writes it.
struct DeviceBuffer {
  uint64_t id = 0;  // 0: no buffer
  size_t bytes = 0;
  uint8_t* host = nullptr;
};

// A matrix {in, out} in a device buffer: row r at buf.offset + r·row_stride.
struct DeviceMat {
  const DeviceBuffer* buf = nullptr;
  size_t offset = 0;
  size_t row_stride = 0;
  int64_t in = 0, out = 0;
  GgmlType type = GgmlType::f32;
};

// f32 values [n] in a device buffer (a norm's or bias's weights, sink logits); buf null: absent.
struct DeviceVec {
  const DeviceBuffer* buf = nullptr;
  size_t offset = 0;
  int64_t n = 0;
};

// A cache's rows in a device buffer, laid out as kernels/kv_rows.h says: row i at
// offset + slot(i)·row_bytes(type, width) (slot(i) = i, or i mod capacity for a ring, or through
// the block table when paged); hadamard: the head slices are stored rotated. A device that reads
// only f32 rows rejects other types (attention_rows_supported). Paged (blocks != null, host
// memory valid until the op's ticket is reached): capacity / block_rows table entries, each a
// block id < stored_rows / block_rows, the buffer holding stored_rows rows from offset (a region
// of kv/KvPool's one allocation).
struct DeviceRows {
  const DeviceBuffer* buf = nullptr;
  size_t offset = 0;
  int64_t width = 0;
  int64_t capacity = 0;
  bool ring = false;
  GgmlType type = GgmlType::f32;
  bool hadamard = false;
  const int32_t* blocks = nullptr;
  int64_t block_rows = 0;
  int64_t stored_rows = 0;  // paged: rows the region holds
};

// The attention block of one layer (kernels/attention_block.h) over a batch of sequences: rows
// seg.t0 .. seg.t0 + seg.n − 1 of x sit at positions seg.pos0.. of the sequence whose K and V
// rows are seg.k / seg.v; rows pos0.. of them are written. Segments cover rows 0..n−1 in order.
struct DeviceAttnSeg {
  DeviceRows k, v;
  int64_t pos0 = 0;
  int64_t t0 = 0;
  int64_t n = 0;
};
struct DeviceAttnWork {
  int layer = 0;
  AttnConfig cfg;
  DeviceMat wq, wk, wv, wo;                         // {n_embd, q/k/v width}, {o width, n_embd}
  DeviceVec bq, bk, bv, bo, q_norm, k_norm, sinks;  // optional
  const DeviceAttnSeg* segs = nullptr;
  int n_seg = 0;
  const float* x = nullptr;  // host [n][n_embd], normed
  int64_t n = 0;
  float* out = nullptr;           // host [n][n_embd]
  Arena* host_scratch = nullptr;  // a host device's scratch (the session's priced arena); null: its own
};

// DeepSeek-V4's attention core (kernels/sparse_attention.h) over one sequence's n tokens at
// positions pos0..: one shared K = V row per key (a single kv head of head_dim), token t attends
// the window rows max(0, pos − window + 1) .. pos of `win`, then the compressed rows of `comp`:
// when sel is null every visible one, 0 .. (pos + 1) / ratio − 1 (HCA), else its rows
// sel[t·sel_stride ..] (sel_n[t] of them, each visible: the indexer's choice, CSA), in one
// softmax with the per-head sinks. First the op writes kv_new into win rows pos0 .. pos0 + n − 1
// and comp_new into comp rows comp_row0 .. comp_row0 + n_comp_new − 1 (the rows live on the
// device: a GPU's never cross the bus again). Host memory: q (normed, roped), kv_new, comp_new,
// sel, sel_n and out [n][n_head·head_dim]. f32 rows.
struct DeviceSparseAttnWork {
  int layer = 0;
  int n_head = 0, head_dim = 0;
  int window = 0;  // window rows a query sees (its own included)
  int ratio = 0;   // positions per compressed row; 0: no compressed rows (comp unused)
  float scale = 1.0f;
  DeviceVec sinks;  // [n_head], optional
  DeviceRows win, comp;
  int64_t pos0 = 0, n = 0;
  const float* q = nullptr;         // [n][n_head·head_dim]
  const float* kv_new = nullptr;    // [n][head_dim]
  const float* comp_new = nullptr;  // [n_comp_new][head_dim]
  int64_t comp_row0 = 0, n_comp_new = 0;
  const int32_t* sel = nullptr;    // [n][sel_stride], ascending per token; null: every visible row
  const int32_t* sel_n = nullptr;  // [n]
  int64_t sel_stride = 0;
  float* out = nullptr;  // [n][n_head·head_dim]
  Arena* host_scratch = nullptr;
};

// The dense SwiGLU FFN: y = down · (silu(gate·x) ⊙ up·x). x host [n][in], y host [n][down.out].
struct DeviceFfnWork {
  int layer = 0;
  DeviceMat gate, up, down;
  const float* x = nullptr;
  int64_t n = 0;
  float* y = nullptr;
  Arena* host_scratch = nullptr;
};

// y[n][w.out] = x[n][w.in] · Wᵀ (+ bias). x, y host (the output head: y is the logits).
struct DeviceLinearWork {
  DeviceMat w;
  DeviceVec bias;
  const float* x = nullptr;
  int64_t n = 0;
  float* y = nullptr;
  Arena* host_scratch = nullptr;
};

// One routed expert's matrices on a device.
struct DeviceExpert {
  DeviceMat gate;  // {n_embd, n_ff}
  DeviceMat up;    // {n_embd, n_ff}
  DeviceMat down;  // {n_ff, n_embd}
};

// A subset of one MoE layer's routed experts over the tokens routed to them. Slots as in
// kernels/expert_ffn.h: slot s = t·K + k; step.off [E + 1] / step.slots group them by expert.
// Host memory: x and every array of the step (a GPU device copies activations down and results
// up).
struct DeviceExpertWork {
  int layer = 0;
  ExpertFfnStep step;                  // d, F, activation, off [E + 1] / slots, wts, biases, y [n·K][d]
  int n_expert = 0;                    // E
  int K = 0;                           // slots per token
  const int32_t* experts = nullptr;    // [n_run] ids of the experts to run
  const DeviceExpert* mats = nullptr;  // [n_run], mats[i] for experts[i]
  int n_run = 0;
  const float* x = nullptr;  // [n][d] the MoE block's normed input
  int64_t n = 0;
  // step.y: rows of the run experts' slots are written, no other row.
};

using DeviceTicket = uint64_t;

// What a device holds: bytes in live buffers now, their peak, and its limit (0: none set).
struct DeviceMemory {
  uint64_t imported = 0;  // host memory used in place (import on a host-visible device)
  uint64_t allocated = 0;
  uint64_t peak = 0;
  uint64_t budget = 0;
  int64_t buffers = 0;
};

// What a device's queue has done: submissions retired and the time the device itself spent on
// them (a GPU's timestamps, from each submission's first command to its last; 0 where it has
// none). Against a run's wall time this says how long the device sat waiting for the host.
struct DeviceTiming {
  uint64_t submissions = 0;
  double busy_s = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const std::string& name() const = 0;  // llama.cpp's device names: "CPU", "Vulkan0", ...
  virtual DeviceKind kind() const = 0;
  virtual DeviceMemory memory() const = 0;

  // Buffers. alloc errors name `what`, the size and what is left under the budget.
  virtual Result<DeviceBuffer> alloc(size_t bytes, std::string_view what) = 0;
  // A buffer holding a copy of host memory that stays valid and unchanged while the buffer lives
  // (the mmapped weights): a host-visible device may use that memory in place (counted apart
  // from its allocations: memory().imported), another one allocates and uploads.
  virtual Result<DeviceBuffer> import(const void* host, size_t bytes, std::string_view what) = 0;
  virtual void free(DeviceBuffer& b) = 0;  // b becomes empty; freeing an empty buffer is a no-op

  // The queue. Errors (a buffer of another device or freed, a range outside the buffer) name the
  // buffer, the range and its size; nothing is queued then.
  virtual Result<DeviceTicket> upload(const DeviceBuffer& dst, size_t offset, const void* src,
                                      size_t bytes) = 0;
  virtual Result<DeviceTicket> download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) = 0;
  virtual Result<DeviceTicket> run_experts(const DeviceExpertWork& w) = 0;
  virtual Result<DeviceTicket> run_attention(const DeviceAttnWork& w) = 0;
  // Whether run_attention reads and writes cache rows of this type (Hadamard-rotated or not);
  // an architecture asks before it allocates a session's caches on the device.
  virtual bool attention_rows_supported(GgmlType type, bool hadamard) const {
    (void)type;
    (void)hadamard;
    return true;
  }
  virtual Result<DeviceTicket> run_sparse_attention(const DeviceSparseAttnWork& w) = 0;
  virtual Result<DeviceTicket> run_ffn(const DeviceFfnWork& w) = 0;
  virtual Result<DeviceTicket> run_linear(const DeviceLinearWork& w) = 0;
  virtual bool reached(DeviceTicket t) const = 0;
  virtual Status wait(DeviceTicket t) = 0;
  virtual DeviceTiming timing() const { return {}; }
  // The device's memory bandwidth as a copy between two of its own buffers of `bytes` measures
  // it (bytes read + written per second, best of a few, timed by the device): the roofline a
  // GPU run's weight traffic is a fraction of. An error where the device cannot time it.
  virtual Result<double> copy_bandwidth(size_t bytes) {
    (void)bytes;
    return err("%s: no device copy bandwidth (the host's: bench --membw)", name().c_str());
  }
};

}  // namespace strata
