#include "kernels/activation_tap.h"

#include <atomic>

namespace strata {
namespace {
std::atomic<ActivationTap*> g_tap{nullptr};
}  // namespace

void set_activation_tap(ActivationTap* tap) {
  g_tap.store(tap, std::memory_order_release);
}

ActivationTap* activation_tap() {
  return g_tap.load(std::memory_order_acquire);
}

}  // namespace strata
