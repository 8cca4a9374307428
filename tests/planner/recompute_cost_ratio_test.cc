// compute.recompute_cost_ratio (planner/profile/profile.h; measured by
// `dtplan profile` on CPUs): a full recompute's kernels cost that ratio of
// their priced time, never less than their FLOPs at the device's peak; its
// collectives, every other op and plans without full recompute are priced
// as before.
#include <gtest/gtest.h>

#include <string>

#include "planner/cost/layer_ops.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

HardwareProfile CpuProfile() { return testing_models::LocalCpu(); }

PlanSpec Plan(const ModelSpec& m, Recompute rc, int tp) {
  PlanSpec p;
  p.dp = 2 / tp;
  p.tp = tp;
  p.micro_batch = 4;
  p.num_microbatches = 2;
  p.seq_length = m.seq_length;
  p.flash_attention = false;
  p.recompute = rc;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

TEST(RecomputeCostRatio, ScalesTheFullRecomputesKernelsOnly) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ClusterSpec c = testing_models::Cluster(1, 2);
  const HardwareProfile one = CpuProfile();
  ASSERT_EQ(one.compute.recompute_cost_ratio, 1.0);  // the bundled profile predates the measurement
  HardwareProfile r = one;
  r.compute.recompute_cost_ratio = 0.8;
  ASSERT_TRUE(PrepareProfile(&r, "test").ok());
  for (int tp : {1, 2}) {
    const PlanSpec full = Plan(*m, Recompute::kFull, tp);
    const PlanCosts a = ComputePlanCosts(*m, c, full, one), b = ComputePlanCosts(*m, c, full, r);
    ASSERT_GT(a.chunks[0].recompute, 0);
    EXPECT_NEAR(b.chunks[0].recompute, 0.8 * a.chunks[0].recompute, 1e-12) << tp;
    EXPECT_NEAR(a.chunks[0].bwd_compute - b.chunks[0].bwd_compute, 0.2 * a.chunks[0].recompute, 1e-12) << tp;
    EXPECT_EQ(a.chunks[0].fwd_compute, b.chunks[0].fwd_compute);
    EXPECT_EQ(a.chunks[0].bwd_comm, b.chunks[0].bwd_comm);  // the recompute's TP collectives unchanged
    auto pa = SimulatePlan(*m, c, full, one), pb = SimulatePlan(*m, c, full, r);
    ASSERT_TRUE(pa.ok() && pb.ok());
    EXPECT_LT(pb->step_time_s, pa->step_time_s);
    // Selective recompute and no recompute: unchanged.
    for (Recompute rc : {Recompute::kNone, Recompute::kSelective}) {
      const PlanSpec q = Plan(*m, rc, tp);
      auto qa = SimulatePlan(*m, c, q, one), qb = SimulatePlan(*m, c, q, r);
      ASSERT_TRUE(qa.ok() && qb.ok());
      EXPECT_EQ(qa->step_time_s, qb->step_time_s);
    }
  }
}

// However small the measured ratio, a recompute is never priced below its
// FLOPs at the device's peak rate.
TEST(RecomputeCostRatio, NeverBelowTheRecomputesFlopsAtPeak) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok());
  const ClusterSpec c = testing_models::Cluster(1, 2);
  HardwareProfile r = CpuProfile();
  r.compute.recompute_cost_ratio = 1e-3;
  ASSERT_TRUE(PrepareProfile(&r, "test").ok());
  const PlanSpec full = Plan(*m, Recompute::kFull, 1);
  const PlanCosts b = ComputePlanCosts(*m, c, full, r);
  const double flops = SumFlops(TransformerLayerOps(*m, full, 4).recompute) * m->num_layers;
  EXPECT_NEAR(b.chunks[0].recompute, flops / r.device.peak_flops, 1e-12);
}

// A model with sliding-window layers: its windowed layers' recompute is
// floored at their own FLOPs too (the windowed list's cost is a difference
// from the full layer's, which must not be scaled on its own).
TEST(RecomputeCostRatio, WindowedLayersNeverBelowTheirFlopsAtPeak) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok());
  m->seq_length = m->max_position = 1024;
  m->sliding_window = 256;  // every second layer windowed
  m->sliding_window_pattern = 2;
  ASSERT_TRUE(m->WindowApplies(m->seq_length));
  const ClusterSpec c = testing_models::Cluster(1, 2);
  HardwareProfile r = CpuProfile();
  r.compute.recompute_cost_ratio = 1e-3;
  ASSERT_TRUE(PrepareProfile(&r, "test").ok());
  PlanSpec full = Plan(*m, Recompute::kFull, 1);
  full.flash_attention = true;  // the fused kernel skips the tiles outside the window (the unfused core does not)
  const PlanCosts b = ComputePlanCosts(*m, c, full, r);
  const double windowed = m->WindowedLayers(0, m->num_layers);
  ASSERT_GT(windowed, 0);
  ASSERT_LT(windowed, m->num_layers);
  const double flops =
      SumFlops(TransformerLayerOps(*m, full, 4, /*windowed=*/false).recompute) * (m->num_layers - windowed) +
      SumFlops(TransformerLayerOps(*m, full, 4, /*windowed=*/true).recompute) * windowed;
  ASSERT_LT(SumFlops(TransformerLayerOps(*m, full, 4, /*windowed=*/true).recompute),
            SumFlops(TransformerLayerOps(*m, full, 4, /*windowed=*/false).recompute));
  EXPECT_NEAR(b.chunks[0].recompute, flops / r.device.peak_flops, 1e-12 * flops / r.device.peak_flops);
}

}  // namespace
}  // namespace dt
