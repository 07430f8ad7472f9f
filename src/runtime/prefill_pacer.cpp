#include "runtime/prefill_pacer.h"

#include <algorithm>
#include <bit>

namespace strata {
namespace {

// Moves estimate e toward observation x by at most 30% of e down or 10% up (of `floor` when e is
// smaller): stretched turns (a preempted core, a page fault) are rare and only ever longer, so they
// barely move it, while an estimate that started on one recovers within a few turns.
void robust_update(double& e, double x, double floor) {
  const double m = std::max(e, floor);
  e += std::clamp(0.3 * (x - e), -0.3 * m, 0.1 * m);
}

}  // namespace

int PrefillPacer::bucket_of(int k) {
  const int b = std::bit_width(static_cast<unsigned>(std::max(k, 1))) - 1;
  return std::min(b, kBuckets - 1);
}

void PrefillPacer::observe_decode(double dt) {
  if (dt <= 0) return;
  if (t_decode_ <= 0)
    t_decode_ = dt;
  else
    robust_update(t_decode_, dt, 0);
}

void PrefillPacer::observe_mixed(int k, double dt) {
  if (k < 1 || dt <= 0 || t_decode_ <= 0) return;
  double x = std::max(0.0, dt / t_decode_ - 1.0);
  Bucket& b = b_[static_cast<size_t>(bucket_of(k))];
  if (b.k == 0) {
    // A chunk costs at most twice what one of half its size does: a first sample above that (a
    // stretched turn) would block the bucket until it is measured again, which it then is not.
    const double bound = predicted_excess(k);
    if (bound > 0) x = std::min(x, 2 * bound);
    b.excess = x;
    b.k = k;
  } else {
    robust_update(b.excess, x, 0.05);
    b.k += 0.3 * (k - b.k);
  }
  b.turn = ++turns_;
  // Larger chunks not tried for kForget turns are forgotten: an estimate that kept the chunk below
  // them (a stretched first sample, a cost since fallen) is measured again, one doubling up.
  for (int i = bucket_of(k) + 1; i < kBuckets; ++i) {
    Bucket& u = b_[static_cast<size_t>(i)];
    if (u.k > 0 && turns_ - u.turn > kForget) u = Bucket{};
  }
  k_max_seen_ = k;
  for (const Bucket& u : b_) k_max_seen_ = std::max(k_max_seen_, static_cast<int>(u.k));
}

double PrefillPacer::predicted_excess(int k) const {
  // The measured buckets' mean chunks nearest below k (lo, and the one below it: lo2) and above
  // (hi); `larger`: the cheapest measured chunk of at least k tokens (the cost does not fall with
  // k: on a flat curve noise would otherwise ratchet the chunk down bucket by bucket).
  const Bucket *lo = nullptr, *lo2 = nullptr, *hi = nullptr;
  double larger = -1;
  for (const Bucket& b : b_) {  // in increasing k
    if (b.k <= 0) continue;
    if (b.k >= k && (larger < 0 || b.excess < larger)) larger = b.excess;
    if (b.k <= k) {
      lo2 = lo;
      lo = &b;
    } else if (!hi) {
      hi = &b;
    }
  }
  double e = -1;
  if (lo && hi)  // between two measured chunks: linear
    e = lo->excess + (hi->excess - lo->excess) * (k - lo->k) / (hi->k - lo->k);
  else if (hi)  // below the smallest: a smaller chunk costs no more
    e = hi->excess;
  else if (lo && lo2 && lo->k > lo2->k)  // beyond the largest: linear through the two largest
    e = lo->excess + std::max(0.0, (lo->excess - lo2->excess) / (lo->k - lo2->k)) * (k - lo->k);
  else if (lo)  // one point: half of its cost taken as fixed
    e = lo->excess * (0.5 + 0.5 * k / lo->k);
  return larger >= 0 ? std::min(e, larger) : e;
}

int PrefillPacer::chunk(int room) const {
  room = std::max(room, 1);
  if (k_max_seen_ == 0 || t_decode_ <= 0) return std::min(room, kFirst);
  const int hi = std::min(room, 2 * k_max_seen_);
  for (int k = hi; k > 1; --k)
    if (predicted_excess(k) <= target - 1.0) return k;
  return 1;
}

}  // namespace strata
