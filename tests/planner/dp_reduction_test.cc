// Where a chunk's data-parallel gradient reduction starts, as each runtime
// does it: GPU frameworks (Megatron-LM's --overlap-grad-reduce) in buckets
// during the chunk's last backward; dtrun, the runtime of CPU plans, at the
// chunk's GradSync action after its whole backward (runtime/exec/interpreter.cc).
#include <gtest/gtest.h>

#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

PlanSpec DpPlan(const ModelSpec& m) {
  PlanSpec p;
  p.dp = 2;
  p.micro_batch = 1;
  p.num_microbatches = 2;
  p.seq_length = m.seq_length;
  p.dp_bucket_bytes = 1 << 20;  // many buckets for this model's gradients
  p.layers_per_chunk = EvenSplit(m.num_layers, 1);
  return p;
}

TEST(DpReduction, GpuPlansOverlapBucketsCpuPlansReduceAfterTheBackward) {
  const ModelSpec m = testing_models::Llama8B();
  const ClusterSpec c = testing_models::Cluster(1, 2);
  const HardwareProfile gpu = LoadProfile("a100").value();
  HardwareProfile cpu = LoadProfile("cpu-generic").value();
  ASSERT_EQ(cpu.device.kind, "cpu");
  const PlanSpec p = DpPlan(m);
  EXPECT_GT(ComputePlanCosts(m, c, p, gpu).num_buckets_last, 1);
  EXPECT_EQ(ComputePlanCosts(m, c, p, cpu).num_buckets_last, 1);
  // So a CPU plan's reduction is exposed in full after the backward.
  auto pred = SimulatePlan(m, c, p, cpu);
  ASSERT_TRUE(pred.ok()) << pred.status().message();
  EXPECT_GT(pred->time.dp_exposed, 0.0);
  PlanSpec no_overlap = p;
  no_overlap.overlap_grad_reduce = false;
  auto serial = SimulatePlan(m, c, no_overlap, cpu);
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  EXPECT_DOUBLE_EQ(pred->step_time_s, serial->step_time_s);
}

}  // namespace
}  // namespace dt
