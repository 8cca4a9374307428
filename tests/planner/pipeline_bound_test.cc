// PipelineLowerBound (planner/lower/pipeline_bound.h): never above the
// simulated step over every kind of pipelined plan the search emits, and
// sharp where the per-stage bound is blind (uneven interleaved chunks).
#include "planner/lower/pipeline_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/search/enumerate.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

HardwareProfile Profile(const char* name) {
  auto hw = LoadProfile(name);
  EXPECT_TRUE(hw.ok()) << hw.status().message();
  return *hw;
}

// Checks the bound against the simulation on every `stride`-th pipelined
// plan of an enumeration; returns how many were checked and, through
// `sharper`, on how many it beats StepTimeLowerBound by more than 1%.
int CheckEnumeration(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw, SearchConstraints k,
                     size_t stride, int* sharper) {
  auto e = EnumeratePlans(m, c, k);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return 0;
  int checked = 0;
  for (size_t i = 0; i < e->plans.size(); i += stride) {
    const PlanSpec& p = e->plans[i];
    if (p.pp < 2) continue;
    auto pred = SimulatePlan(m, c, p, hw);
    EXPECT_TRUE(pred.ok()) << Describe(p) << ": " << pred.status().message();
    if (!pred.ok()) continue;
    const PlanCosts costs = ComputePlanCosts(m, c, p, hw, /*track_outside=*/false);
    auto b = PipelineLowerBound(p, costs);
    EXPECT_TRUE(b.ok()) << Describe(p) << ": " << b.status().message();
    if (!b.ok()) continue;
    EXPECT_LE(*b, pred->step_time_s) << Describe(p);
    EXPECT_GT(*b, 0.3 * pred->step_time_s) << "uselessly loose for " << Describe(p);
    *sharper += *b > 1.01 * StepTimeLowerBound(p, costs);
    ++checked;
  }
  return checked;
}

// GPT-2 on 16 A100s, every schedule, recompute mode, ZeRO stage (ZeRO-3
// gathers and ZeRO-2/3 reduce-scatters on the compute stream), SP, up to 3
// virtual stages over 12 layers (uneven chunks), even and accounted splits;
// GPU plans of 1F1B block on their sends.
TEST(PipelineBound, NeverAboveTheSimulationOnDensePlans) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt2-124m.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = m->seq_length;
  k.max_vpp = 3;
  int sharper = 0;
  const int checked =
      CheckEnumeration(*m, testing_models::Cluster(2, 8), Profile("A100-SXM4-80GB"), k, 7, &sharper);
  EXPECT_GT(checked, 200);
  EXPECT_GT(sharper, 10);  // it adds something, on the uneven interleaved plans
}

// An MoE model with expert parallelism, with and without the all-to-all
// overlap (whose collectives the bound leaves out), on H100s.
TEST(PipelineBound, NeverAboveTheSimulationOnMoePlans) {
  const ModelSpec m = testing_models::Mixtral8Layers();
  for (bool overlap : {false, true}) {
    SearchConstraints k;
    k.global_batch = 64;
    k.seq_length = m.seq_length;
    k.max_vpp = 4;
    k.moe_a2a_overlap = overlap;
    k.force_balanced_routing = true;
    int sharper = 0;
    const int checked =
        CheckEnumeration(m, testing_models::Cluster(2, 8), Profile("H100-SXM5-80GB"), k, 3, &sharper);
    EXPECT_GT(checked, 20) << overlap;
  }
}

// Megatron 1T's pipeline: 16 stages of 8 layers over 5 virtual stages
// (chunks of 2, 2, 2, 1, 1 layers). With free communication the simulated
// step is the bound's graph (the DP and parameter tasks cost nothing), so
// the two agree; the per-stage bound misses the interleaved stall.
TEST(PipelineBound, SeesTheStallOfUnevenInterleavedChunks) {
  const ModelSpec m = testing_models::Gpt(25600, 160, 128);  // Megatron 1T: its LM head is light
  const HardwareProfile hw = Profile("A100-SXM4-80GB");
  const ClusterSpec c = testing_models::Cluster(2, 8);
  PlanSpec p;
  p.pp = 16;
  p.vpp = 5;
  p.dp = 1;
  p.tp = 1;
  p.micro_batch = 1;
  p.num_microbatches = 128;
  p.seq_length = 2048;
  p.schedule = Schedule::kInterleaved;
  p.recompute = Recompute::kFull;
  p.layers_per_chunk = EvenSplit(m.num_layers, p.pp * p.vpp);
  ASSERT_NE(*std::min_element(p.layers_per_chunk.begin(), p.layers_per_chunk.end()),
            *std::max_element(p.layers_per_chunk.begin(), p.layers_per_chunk.end()));  // 2s and 1s
  SimulateOptions free;
  free.free_communication = true;
  auto pred = SimulatePlan(m, c, p, hw, free);
  ASSERT_TRUE(pred.ok()) << pred.status().message();
  PlanCosts costs = ComputePlanCosts(m, c, p, hw);
  MakeCommunicationFree(&costs);  // as the simulation's free_communication
  auto b = PipelineLowerBound(p, costs);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_LE(*b, pred->step_time_s);
  EXPECT_GE(*b, pred->step_time_s * (1 - 1e-6));
  EXPECT_GT(*b, 1.05 * StepTimeLowerBound(p, costs));

  // The same plan with an even split (4 virtual stages): no stall to see.
  p.vpp = 4;
  p.layers_per_chunk = EvenSplit(m.num_layers, p.pp * p.vpp);
  costs = ComputePlanCosts(m, c, p, hw);
  MakeCommunicationFree(&costs);  // as the simulation's free_communication
  b = PipelineLowerBound(p, costs);
  ASSERT_TRUE(b.ok());
  EXPECT_LT(*b, 1.02 * StepTimeLowerBound(p, costs));
}

// The search prices a plan once (PricePlan) for the bound and the
// simulation: the same numbers as SimulatePlan and as the bound that builds
// its own schedule; costs or schedule of another plan are refused.
TEST(PipelineBound, PricedOnceGivesTheSameBoundAndSimulation) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt2-124m.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const HardwareProfile hw = Profile("A100-SXM4-80GB");
  const ClusterSpec c = testing_models::Cluster(2, 8);
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = m->seq_length;
  k.max_vpp = 3;
  auto e = EnumeratePlans(*m, c, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  int checked = 0;
  const PlanSpec* other = nullptr;
  for (size_t i = 0; i < e->plans.size(); i += 11) {
    const PlanSpec& p = e->plans[i];
    auto priced = PricePlan(*m, c, p, hw);
    ASSERT_TRUE(priced.ok()) << Describe(p) << ": " << priced.status().message();
    auto own = PipelineLowerBound(p, priced->costs);
    auto given = PipelineLowerBound(p, priced->costs, priced->schedule);
    ASSERT_TRUE(own.ok() && given.ok()) << Describe(p);
    EXPECT_EQ(*own, *given) << Describe(p);
    auto whole = SimulatePlan(*m, c, p, hw);
    auto halves = SimulatePriced(*m, c, p, hw, *priced);
    ASSERT_TRUE(whole.ok() && halves.ok()) << Describe(p);
    EXPECT_EQ(whole->step_time_s, halves->step_time_s) << Describe(p);
    EXPECT_EQ(whole->peak_memory_bytes, halves->peak_memory_bytes) << Describe(p);
    if (other && other->pp != p.pp) {
      auto wrong = SimulatePriced(*m, c, *other, hw, *priced);
      EXPECT_FALSE(wrong.ok()) << Describe(*other) << " simulated with the costs of " << Describe(p);
      if (p.pp >= 2 && other->pp >= 2) {
        EXPECT_FALSE(PipelineLowerBound(*other, priced->costs, priced->schedule).ok());
      }
    }
    other = &p;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(PipelineBound, OneStageHasNoPipelineBound) {
  PlanSpec p;
  p.layers_per_chunk = {12};
  auto b = PipelineLowerBound(p, PlanCosts{});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 0.0);
}

}  // namespace
}  // namespace dt
