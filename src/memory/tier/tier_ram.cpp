#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "base/units.h"
#include "memory/io/io_file.h"
#include "memory/tier/mem_resident.h"
#include "memory/tier/tier.h"

namespace strata {

namespace {

class RamTier final : public FastTier {
 public:
  RamTier(uint8_t* base, int n, size_t slot) : base_(base), n_(n), slot_(slot) {}
  ~RamTier() override { ::munmap(base_, bytes()); }
  const char* name() const override { return "ram"; }
  int n_slots() const override { return n_; }
  size_t slot_bytes() const override { return slot_; }
  uint64_t bytes() const override { return uint64_t{slot_} * static_cast<uint64_t>(n_); }
  uint8_t* host_data(int slot) override { return base_ + size_t{slot_} * static_cast<size_t>(slot); }
  uint64_t resident_bytes() const override { return mem_resident_bytes(base_, bytes()); }

 private:
  uint8_t* base_;
  int n_;
  size_t slot_;
};

}  // namespace

Result<std::unique_ptr<FastTier>> make_ram_tier(uint64_t budget_bytes, size_t slot_bytes, int min_slots) {
  if (slot_bytes == 0 || slot_bytes % kIoAlign != 0)
    return err("ram tier: slot size %zu is not a positive multiple of %zu", slot_bytes, kIoAlign);
  const uint64_t n = budget_bytes / slot_bytes;
  if (n < static_cast<uint64_t>(min_slots))
    return err(
        "expert budget %s is too small: it holds %llu expert slot(s) of %s, but one layer's top-k needs %d; "
        "the minimum is %llu bytes (%s)",
        format_bytes(budget_bytes).c_str(), static_cast<unsigned long long>(n),
        format_bytes(slot_bytes).c_str(), min_slots,
        static_cast<unsigned long long>(uint64_t{slot_bytes} * static_cast<uint64_t>(min_slots)),
        format_bytes(uint64_t{slot_bytes} * static_cast<uint64_t>(min_slots)).c_str());
  if (n > (uint64_t{1} << 30))
    return err("ram tier: too many slots (%llu)", static_cast<unsigned long long>(n));
  const size_t total = slot_bytes * static_cast<size_t>(n);
  // Anonymous mmap: page aligned, and untouched pages cost no RSS.
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return err("ram tier: cannot allocate %s: %s", format_bytes(total).c_str(), std::strerror(errno));
  return std::unique_ptr<FastTier>(new RamTier(static_cast<uint8_t*>(p), static_cast<int>(n), slot_bytes));
}

}  // namespace strata
