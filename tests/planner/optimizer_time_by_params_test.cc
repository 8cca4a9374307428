// compute.optimizer_time_by_params (planner/profile/profile.h; measured by
// `dtplan profile` on CPUs): the optimizer step of a rank that updates few
// parameters is priced at the measured per-parameter factor of that size
// (log-linear between points, the end values outside them); a profile
// without the curve prices as before; the profile rejects a curve by which
// more parameters would take less time in all. dtrun's per-step zeroing of
// the gradients is priced beside it on CPU profiles only.
#include <gtest/gtest.h>

#include <string>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/plan_costs.h"
#include "planner/memory/param_count.h"
#include "planner/profile/profile.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

HardwareProfile CpuProfile() { return testing_models::LocalCpu(); }

TEST(OptimizerTimeByParams, FactorInterpolatesLogLinearAndClamps) {
  HardwareProfile hw = CpuProfile();
  EXPECT_EQ(OptimizerTimeFactor(1e5, hw), 1.0);  // no curve: as before
  hw.compute.optimizer_time_by_params = {{1e4, 1e6, 4e6}, {0.3, 0.5, 1.0}};
  ASSERT_TRUE(PrepareProfile(&hw, "test").ok());
  EXPECT_DOUBLE_EQ(OptimizerTimeFactor(1e3, hw), 0.3);
  EXPECT_DOUBLE_EQ(OptimizerTimeFactor(1e4, hw), 0.3);
  EXPECT_NEAR(OptimizerTimeFactor(1e5, hw), 0.4, 1e-12);  // halfway in log(params)
  EXPECT_DOUBLE_EQ(OptimizerTimeFactor(4e6, hw), 1.0);
  EXPECT_DOUBLE_EQ(OptimizerTimeFactor(1e9, hw), 1.0);
}

TEST(OptimizerTimeByParams, PricesEachStagesShareAtItsFactor) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ClusterSpec c = testing_models::Cluster(1, 2);
  const HardwareProfile plain = CpuProfile();
  HardwareProfile curved = plain;
  curved.compute.optimizer_time_by_params = {{1e3, 1e8}, {0.25, 1.0}};
  ASSERT_TRUE(PrepareProfile(&curved, "test").ok());
  for (int pp : {1, 2}) {
    PlanSpec p;
    p.dp = 2 / pp;
    p.pp = pp;
    p.micro_batch = 2;
    p.num_microbatches = 4;
    p.seq_length = m->seq_length;
    p.flash_attention = false;
    p.zero_stage = 1;
    p.layers_per_chunk = pp == 1 ? std::vector<int>{m->num_layers} : std::vector<int>{2, 2};
    const PlanCosts a = ComputePlanCosts(*m, c, p, plain), b = ComputePlanCosts(*m, c, p, curved);
    for (int s = 0; s < pp; ++s) {
      const double params = static_cast<double>(StageParamsPerRank(*m, p, s)) / p.dp;
      const double f = OptimizerTimeFactor(params, curved);
      ASSERT_GT(f, 0.25);
      ASSERT_LT(f, 1.0);
      // Only the optimizer's bytes scale: the kernel and step overheads and
      // dtrun's zeroing of the gradient buffer (a write over the stage's
      // fp32 gradients) stay.
      const double zero = OpTime(GradZeroingOp(4.0 * StageParamsPerRank(*m, p, s)), plain);
      ASSERT_GT(zero, plain.compute.kernel_overhead_s);
      const double fixed = plain.compute.kernel_overhead_s + plain.compute.step_overhead_s + zero;
      EXPECT_NEAR(b.optimizer[s] - fixed, f * (a.optimizer[s] - fixed), 1e-12) << "pp " << pp << " stage " << s;
    }
  }
}

// GPU plans (a framework's step, step_overhead_s) have no zeroing term.
TEST(OptimizerTimeByParams, GradientZeroingIsPricedForDtrunPlansOnly) {
  const ModelSpec m = testing_models::Gpt(1024, 16, 8);
  PlanSpec p;
  p.dp = 8;
  p.micro_batch = 1;
  p.num_microbatches = 4;
  p.seq_length = 2048;
  p.zero_stage = 1;
  p.layers_per_chunk = {8};
  const HardwareProfile& h100 = testing_models::H100();
  const PlanCosts g = ComputePlanCosts(m, testing_models::Cluster(1, 8), p, h100);
  const double params = static_cast<double>(StageParamsPerRank(m, p, 0)) / p.dp;
  Op op = MemoryOp("optimizer", params * h100.compute.optimizer_bytes_per_param);
  EXPECT_NEAR(g.optimizer[0], OpTime(op, h100) + h100.compute.step_overhead_s, 1e-15);
}

TEST(OptimizerTimeByParams, ProfileRejectsACurveWhereMoreParamsTakeLessTime) {
  HardwareProfile hw = CpuProfile();
  hw.compute.optimizer_time_by_params = {{1e4, 1e6}, {0.5, 0.004}};  // 1e6 x 0.004 < 1e4 x 0.5
  Status st = PrepareProfile(&hw, "test");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("optimizer_time_by_params"), std::string::npos) << st.message();
  hw.compute.optimizer_time_by_params = {{1e4, 1e6}, {0.5, -1}};
  EXPECT_FALSE(PrepareProfile(&hw, "test").ok());
  // Round trip through JSON keeps the curve and its note.
  hw.compute.optimizer_time_by_params = {{1e4, 1e6}, {0.5, 0.9}};
  hw.compute.optimizer_time_by_params_note = "measured";
  ASSERT_TRUE(PrepareProfile(&hw, "test").ok());
  StatusOr<HardwareProfile> back = ProfileFromJson(ToJson(hw), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute.optimizer_time_by_params, hw.compute.optimizer_time_by_params);
  EXPECT_EQ(back->compute.optimizer_time_by_params_note, "measured");
}

}  // namespace
}  // namespace dt
