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
#include "planner/lower/simulate.h"
#include "planner/memory/memory_params.h"
#include "planner/memory/stage_memory.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"
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

// The search adds, beside each fitting plan with full recompute of every
// layer, the same plan recomputing the fewest layers per chunk that fit:
// here (Llama 8B, seq 8192, mbs 2, pp 2 on 8 H100s) no recompute does not
// fit, and the partial plan beats both full recompute and selective.
// Not added when the user fixed the recompute mode or for a framework that
// cannot express it.
TEST(RecomputeLayers, SearchedAsTheFewestLayersThatFit) {
  const ModelSpec m = testing_models::Llama8B();
  const HardwareProfile hw = LoadProfile("h100").value();
  ClusterSpec c;
  c.nodes = 1;
  c.gpus_per_node = 8;
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = 8192;
  k.dp = 4; k.tp = 1; k.pp = 2; k.cp = 1; k.micro_batch = 2; k.zero_stage = 1;
  k.schedule = Schedule::k1F1B;
  SearchOptions so;
  so.top = 100;
  so.threads = 1;
  auto r = SearchPlans(m, c, hw, k, so);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->top.empty());
  const PlanSpec& best = r->top[0].plan;
  ASSERT_EQ(best.recompute, Recompute::kFull) << Describe(best);
  const int n = best.recompute_num_layers;
  ASSERT_GT(n, 0);
  ASSERT_LT(n, 16);
  PlanSpec q = best;
  EXPECT_TRUE(PredictMemory(m, q, hw).fits);
  if (n > 1) {
    q.recompute_num_layers = n - 1;
    EXPECT_FALSE(PredictMemory(m, q, hw).fits) << "N - 1 fits too";
  }
  q.recompute_num_layers = 0;
  q.recompute = Recompute::kNone;
  EXPECT_FALSE(PredictMemory(m, q, hw).fits);
  bool saw_full = false;
  for (const RankedPlan& rp : r->top)
    if (rp.plan.recompute == Recompute::kFull && rp.plan.recompute_num_layers == 0 && rp.plan.sequence_parallel == best.sequence_parallel) {
      saw_full = true;
      EXPECT_LT(r->top[0].prediction.step_time_s, rp.prediction.step_time_s);
    }
  EXPECT_TRUE(saw_full);

  k.recompute = Recompute::kFull;
  auto fixed = SearchPlans(m, c, hw, k, so);
  ASSERT_TRUE(fixed.ok());
  for (const RankedPlan& rp : fixed->top) EXPECT_EQ(rp.plan.recompute_num_layers, 0) << Describe(rp.plan);
  k.recompute.reset();
  k.framework = Framework::kTorchtitan;
  auto titan = SearchPlans(m, c, hw, k, so);
  ASSERT_TRUE(titan.ok());
  for (const RankedPlan& rp : titan->top) EXPECT_EQ(rp.plan.recompute_num_layers, 0) << Describe(rp.plan);
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
