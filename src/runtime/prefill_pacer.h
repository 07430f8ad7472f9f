// PrefillPacer: how many prompt tokens a scheduler turn may add beside decoding sequences, so that
// the decoders' token gap stays under a bound while a long prompt arrives (runtime/engine.*).
//
// Two budgets: a mixed turn (the decoders' tokens plus a prompt chunk of k tokens) may cost at most
// about target x a decode-only turn, EVERY turn (the decoders' P99 gap is set by the worst turns,
// not by the mean), and the prompt should get as large a share of the machine as that allows. So the
// pacer learns the chunk's cost curve online: per size bucket (k in [2^b, 2^(b+1))) a robust
// estimate of the mixed turn's excess over a decode-only turn, in decode turns, and its mean k. A
// turn's chunk is the largest k whose predicted excess (linear between the measured buckets' mean
// chunks; beyond the largest, linear through the two largest, or with one point, half its cost
// taken as fixed) is at most target - 1, and at most twice the largest chunk measured so far (the
// curve is explored upward one doubling at a time). Robust: an observation moves an estimate by at
// most 10% up or 30% down, and a bucket's first sample by at most 2x its prediction, so a turn
// stretched by a preempted core or a page fault (which stretches decode-only turns alike) does not
// shrink the next chunks.
//
//   PrefillPacer p;
//   p.observe_decode(dt);            // a decode-only turn's seconds
//   int k = p.chunk(room);           // prompt tokens for a mixed turn
//   p.observe_mixed(k, dt);          // that turn's seconds
//
// A pure function of the timings it is given (tests inject them).
#pragma once

#include <array>

namespace strata {

class PrefillPacer {
 public:
  static constexpr double kTarget = 3.0;  // mixed turn / decode-only turn (see docs/design.md)
  double target = kTarget;
  static constexpr int kFirst = 16;  // the chunk before any mixed turn was measured
  static constexpr int kBuckets = 16;
  static constexpr int kForget = 64;  // mixed turns after which an untried larger bucket is forgotten

  // A decode-only turn took dt seconds (the decoders' own step; it grows with their contexts).
  void observe_decode(double dt);
  // A turn with k prompt tokens beside the decoders took dt seconds.
  void observe_mixed(int k, double dt);
  // Prompt tokens for the next mixed turn, in [1, room] (room >= 1).
  int chunk(int room) const;
  // The predicted excess of a k-token chunk over a decode-only turn, in decode turns; < 0: unknown.
  double predicted_excess(int k) const;
  double decode_s() const { return t_decode_; }

 private:
  struct Bucket {
    double excess = 0, k = 0;  // robust estimates; k == 0: no sample yet
    long turn = 0;             // the mixed turn that last updated it
  };
  static int bucket_of(int k);
  double t_decode_ = 0;
  int k_max_seen_ = 0;  // the largest measured bucket's mean chunk
  long turns_ = 0;
  std::array<Bucket, kBuckets> b_{};
};

}  // namespace strata
