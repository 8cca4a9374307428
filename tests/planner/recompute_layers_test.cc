// Full recompute of only the first N layers of each model chunk (Megatron-
// LM's --recompute-method block --recompute-num-layers N,
// PlanSpec::recompute_num_layers): stored activations and recompute time
// lie exactly between no recompute and full recompute, in proportion to the
// recomputed layers; plan files, plan lines, the validation and Megatron-LM's
// flags carry it. (dtrun runs it: the ctest dtrun_parity_pp2_rc_full_block1.)
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/frameworks/megatron_args.h"
#include "planner/lower/plan_costs.h"
#include "planner/memory/memory_params.h"
#include "planner/memory/stage_memory.h"
#include "planner/profile/profile.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

PlanSpec TwoStagePlan(const ModelSpec& m, Recompute rc, int n) {
  PlanSpec p;
  p.pp = 2;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = 4096;
  p.recompute = rc;
  p.recompute_num_layers = n;
  p.layers_per_chunk = EvenSplit(m.num_layers, 2);  // 16 + 16
  return p;
}

TEST(RecomputeLayers, BetweenNoneAndFullInProportion) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec none = TwoStagePlan(m, Recompute::kNone, 0), full = TwoStagePlan(m, Recompute::kFull, 0),
                 part = TwoStagePlan(m, Recompute::kFull, 4), over = TwoStagePlan(m, Recompute::kFull, 40);
  ASSERT_TRUE(Validate(part, m, "plan").ok());
  EXPECT_EQ(part.RecomputedLayers(0), 4);
  EXPECT_EQ(over.RecomputedLayers(1), 16);  // capped at the chunk's layers
  EXPECT_EQ(full.RecomputedLayers(0), 16);
  EXPECT_EQ(none.RecomputedLayers(0), 0);
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  for (int stage : {0, 1}) {
    const double a_none = EstimateStageMemory(m, none, mp, stage, 2).activations,
                 a_full = EstimateStageMemory(m, full, mp, stage, 2).activations,
                 a_part = EstimateStageMemory(m, part, mp, stage, 2).activations;
    ASSERT_LT(a_full, a_none);
    EXPECT_NEAR(a_part, a_full + (12.0 / 16.0) * (a_none - a_full), 1e-6 * a_none) << "stage " << stage;
    EXPECT_DOUBLE_EQ(EstimateStageMemory(m, over, mp, stage, 2).activations, a_full);
  }
  const HardwareProfile hw = LoadProfile("h100").value();
  const ClusterSpec c = testing_models::Cluster(1, 2);
  const PlanCosts cn = ComputePlanCosts(m, c, none, hw), cf = ComputePlanCosts(m, c, full, hw),
                  cp = ComputePlanCosts(m, c, part, hw);
  for (int ch : {0, 1}) {
    ASSERT_GT(cf.chunks[ch].recompute, 0);
    EXPECT_NEAR(cp.chunks[ch].recompute, 0.25 * cf.chunks[ch].recompute, 1e-12);
    EXPECT_NEAR(cp.chunks[ch].bwd_compute, cn.chunks[ch].bwd_compute + 0.25 * cf.chunks[ch].recompute, 1e-12);
    EXPECT_DOUBLE_EQ(cp.chunks[ch].fwd_compute, cf.chunks[ch].fwd_compute);
  }
}

TEST(RecomputeLayers, PlanFilesLinesAndRefusals) {
  const ModelSpec m = testing_models::Llama8B();
  PlanSpec p = TwoStagePlan(m, Recompute::kFull, 4);
  const json j = ToJson(p);
  EXPECT_EQ(j.at("recompute_num_layers"), 4);
  auto back = PlanFromJson(j, m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->recompute_num_layers, 4);
  EXPECT_NE(Describe(p).find("rc=full(4 layers/chunk)"), std::string::npos) << Describe(p);
  EXPECT_FALSE(ToJson(TwoStagePlan(m, Recompute::kFull, 0)).contains("recompute_num_layers"));  // absent: all
  PlanSpec sel = TwoStagePlan(m, Recompute::kSelective, 4);
  Status s = Validate(sel, m, "plan");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("set recompute \"full\""), std::string::npos) << s.message();
  p.recompute_num_layers = -1;
  EXPECT_FALSE(Validate(p, m, "plan").ok());
}

// Exported as Megatron-LM's block method and read back the same.
TEST(RecomputeLayers, MegatronBlockMethodRoundTrips) {
  const ModelSpec m = testing_models::Llama8B();
  PlanSpec p = TwoStagePlan(m, Recompute::kFull, 3);
  p.dp = 4;
  auto flags = MegatronArgs(m, p, true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  auto words = SplitCommandLine(FormatFlags(*flags));
  ASSERT_TRUE(words.ok());
  const std::vector<std::string> want = {"--recompute-method", "block", "--recompute-num-layers", "3"};
  EXPECT_NE(std::search(words->begin(), words->end(), want.begin(), want.end()), words->end());
  auto job = ImportMegatron(*words, p.world(), "x");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->plan.recompute, Recompute::kFull);
  EXPECT_EQ(job->plan.recompute_num_layers, 3);
  EXPECT_EQ(Describe(job->plan), Describe(p));
}

}  // namespace
}  // namespace dt
