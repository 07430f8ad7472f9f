// The fast tier: a fixed number of equal-size slots carved from an exact byte budget.
//
// The expert store keeps one routed expert per slot. RAM is the only implementation today; the
// interface is what a GPU tier would implement too (slots in device memory, filled through a
// pinned staging buffer): nothing above it assumes the slot bytes are host memory except through
// host_data(), which a device tier would return as null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"

namespace strata {

class FastTier {
 public:
  virtual ~FastTier() = default;
  virtual const char* name() const = 0;  // "ram"
  virtual int n_slots() const = 0;
  virtual size_t slot_bytes() const = 0;
  // Bytes the tier holds: n_slots() * slot_bytes() (<= the budget it was made with).
  virtual uint64_t bytes() const = 0;
  // Host address of slot i (aligned to the I/O alignment, 4 KiB), or nullptr for a device tier.
  virtual uint8_t* host_data(int slot) = 0;
  // Bytes of the tier actually resident now (RAM: pages touched so far); bytes() when unknown.
  virtual uint64_t resident_bytes() const { return bytes(); }
};

// RAM tier: n = budget / slot_bytes slots in one page-aligned allocation (pages are touched only
// when a slot is first filled, so RSS grows with use, never beyond bytes()).
// Errors: slot_bytes 0 or not a multiple of 4096; budget below min_slots slots (the message gives
// the minimum in bytes); allocation failure.
Result<std::unique_ptr<FastTier>> make_ram_tier(uint64_t budget_bytes, size_t slot_bytes, int min_slots);

}  // namespace strata
