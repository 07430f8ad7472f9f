// What the MoE block asks of the memory layer: the weights of routed expert (layer, e), resident.
//
// The model's MoE block (model/moe.cpp) calls, per forward step of n tokens:
//   begin_step(n)                                   once, before layer 0
//   per MoE layer l:
//     on_route(l, x, n, sel, wts, k)                after routing: stats, traces, reads start
//     for each selected expert e: acquire(l, e) → views, compute, release(l, e)
//       (resident ones first — ready(l, e) — then the rest in the order wait_any() hands them out,
//       i.e. as their reads complete)
//   end_step()                                      after the last layer
// acquire pins the expert (it is never evicted while pinned) and waits only when its bytes are
// not resident yet; a failed read is an error naming the file and offset, never wrong weights.
// Implementations: memory/expert_store (tiered), or none at all (all experts mmapped).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "format/tensor_view.h"
#include "kernels/device.h"

namespace strata {

// Where an expert's weights are: in host memory (device null: the views; the step's own threads
// compute it), or held by a device (kernels/device.h: on_device, in that device's buffers; the MoE
// loop submits it to that device).
struct ExpertViews {
  TensorView gate;  // {n_embd, n_ff}
  TensorView up;    // {n_embd, n_ff}
  TensorView down;  // {n_ff, n_embd}
  Device* device = nullptr;
  DeviceExpert on_device = {};
};

// What one of the MoE loop's compute rounds took (ExpertSource::on_computed): the host's region
// (the weight bytes of the experts it computed, the shared expert's included, those bytes · the
// tokens routed to each, and its seconds), and the same for the devices' work, timed from
// submission to the end of the wait (an upper bound of their time unless device_bound: still
// running when the host's region ended).
struct ExpertRunTimes {
  double host_bytes = 0.0, host_slot_bytes = 0.0, host_s = 0.0;
  double device_bytes = 0.0, device_slot_bytes = 0.0, device_s = 0.0;
  bool device_bound = false;
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  virtual void begin_step(int64_t n_tokens) = 0;
  virtual void end_step() = 0;
  // x: [n][n_embd] f32, the MoE block's normed input; sel / wts: [n][k] chosen experts, weights
  // (an id of -1: a choice a sequence's profile dropped — it is neither read nor counted).
  virtual void on_route(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts,
                        int k) = 0;
  virtual Result<ExpertViews> acquire(int layer, int expert) = 0;
  // Whether acquire(layer, expert) would return without waiting now (lets the caller compute
  // resident experts first while the reads of the others are in flight).
  virtual bool ready(int layer, int expert) const { return true; }
  // Of experts[0..n) (n >= 1, selected for `layer`, none acquired yet), the index of one whose
  // acquire() will not wait for its read (it arrived or failed, or it has no read to wait for),
  // waiting until there is one: the caller computes each expert as soon as its bytes are in instead
  // of waiting for the reads in a fixed order. The wait counts as stall time.
  virtual int wait_any(int layer, const int32_t* experts, int n) { return 0; }
  virtual void release(int layer, int expert) = 0;
  // After each compute round of a layer (its experts released): the measured times.
  virtual void on_computed(int layer, const ExpertRunTimes& t) {}
};

// One expert-store step per forward (the store's logical clock counts tokens), closed on every
// path out of the forward: ExpertStepScope step(source, n_tokens); (null source: nothing).
class ExpertStepScope {
 public:
  ExpertStepScope(ExpertSource* s, int64_t n_tokens) : s_(s) {
    if (s_) s_->begin_step(n_tokens);
  }
  ~ExpertStepScope() {
    if (s_) s_->end_step();
  }
  ExpertStepScope(const ExpertStepScope&) = delete;
  ExpertStepScope& operator=(const ExpertStepScope&) = delete;

 private:
  ExpertSource* s_;
};

}  // namespace strata
