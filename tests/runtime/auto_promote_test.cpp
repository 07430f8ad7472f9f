// runtime/auto_promote: the gate excess that ranks the units (above 1 fails, the binding gate
// decides, the same verdict as kld_gate). The search itself: tests/tools/quantize_cli_test.cpp.
#include "runtime/auto_promote.h"

#include <gtest/gtest.h>

namespace {

strata::KldResult result(double kld, std::vector<double> routing) {
  strata::KldResult r;
  r.kld_mean = kld;
  r.routing = std::move(routing);
  return r;
}

TEST(AutoPromote, GateExcessIsTheBindingGatesRatio) {
  const strata::KldResult r = result(0.002, {-1, 0.98, 0.95});
  EXPECT_DOUBLE_EQ(strata::gate_excess(r, 0.004, -1), 0.5);
  EXPECT_NEAR(strata::gate_excess(r, -1, 0.9), 0.5, 1e-12);  // layer 2: 0.05 of the allowed 0.1
  EXPECT_NEAR(strata::gate_excess(r, 0.001, 0.9), 2.0, 1e-12);
  EXPECT_NEAR(strata::gate_excess(r, 0.004, 0.97), 5.0 / 3.0, 1e-12);
  // It agrees with kld_gate on pass / fail.
  EXPECT_TRUE(strata::kld_gate(r, 0.004, 0.9).ok());
  EXPECT_FALSE(strata::kld_gate(r, 0.004, 0.97).ok());
  // A dense model routes nowhere: only the KLD counts.
  EXPECT_DOUBLE_EQ(strata::gate_excess(result(0.003, {}), 0.001, 0.99), 3.0);
}

}  // namespace
