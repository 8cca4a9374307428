// Combined 1F1B (PlanSpec::moe_a2a_overlap, Megatron-LM's
// --overlap-moe-expert-parallel-comm): Megatron's rules, the extra warmup
// forward and its memory, the pairing of a forward's and a backward's EP
// all-to-alls with the other's compute, the bounds that pairing must keep,
// and the framework round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/cost/layer_ops.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/memory_params.h"
#include "planner/memory/stage_memory.h"
#include "planner/profile/profile.h"
#include "planner/schedule/build_schedule.h"
#include "planner/schedule/check_schedule.h"
#include "planner/schedule/in_flight.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/megatron_round_trip.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

ModelSpec Moe() { return testing_models::Mixtral8Layers(); }

PlanSpec Plan(const ModelSpec& m, int pp, int vpp, bool overlap) {
  PlanSpec p;
  p.dp = 16 / pp;
  p.pp = pp;
  p.vpp = vpp;
  p.ep = 8;
  p.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = m.seq_length;
  p.zero_stage = 1;
  p.moe_a2a_overlap = overlap;
  p.layers_per_chunk = EvenSplit(m.num_layers, pp * vpp);
  return p;
}

using testing_models::H100;

TEST(MoeA2aOverlap, FollowsMegatronsRulesAndRoundTrips) {
  const ModelSpec m = Moe();
  PlanSpec p = Plan(m, 1, 1, true);
  ASSERT_TRUE(Validate(p, m, "plan").ok());
  PlanSpec bad = p;
  bad.ep = 1;
  EXPECT_NE(Validate(bad, m, "plan").message().find("ep > 1"), std::string::npos);
  bad = p;
  bad.recompute = Recompute::kFull;
  EXPECT_NE(Validate(bad, m, "plan").message().find("full recompute"), std::string::npos);
  bad = Plan(m, 2, 1, true);  // pp 2 without virtual stages
  EXPECT_NE(Validate(bad, m, "plan").message().find("interleaved"), std::string::npos);
  EXPECT_TRUE(Validate(Plan(m, 2, 2, true), m, "plan").ok());
  EXPECT_FALSE(Validate(p, testing_models::Llama8B(), "plan").ok());  // no experts
  // Plan files and plan lines carry it; dtrun refuses it by name.
  auto back = PlanFromJson(ToJson(p), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->moe_a2a_overlap);
  EXPECT_NE(Describe(p).find("a2a-overlap"), std::string::npos);
  EXPECT_FALSE(ToJson(Plan(m, 1, 1, false)).contains("moe_a2a_overlap"));
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kMoeA2aOverlap), missing.end());
  // Megatron-LM: exported as --overlap-moe-expert-parallel-comm and read back.
  auto job = testing_models::MegatronRoundTrip(m, p);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.moe_a2a_overlap);
  EXPECT_EQ(Describe(job->plan), Describe(p));
}

// One more warmup forward (Megatron-LM's combined 1F1B), so every
// steady-state forward is of another microbatch than the backward after
// it; the schedule stays valid and one more microbatch is in flight.
TEST(MoeA2aOverlap, RunsOneMoreWarmupForward) {
  const ModelSpec m = Moe();
  for (auto [pp, vpp] : {std::pair{1, 1}, std::pair{2, 2}}) {
    const PlanSpec off = Plan(m, pp, vpp, false), on = Plan(m, pp, vpp, true);
    auto s = BuildSchedule(on);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(CheckSchedule(*s, on).ok()) << CheckSchedule(*s, on).message();
    for (int r = 0; r < pp; ++r) {
      EXPECT_EQ(WarmupForwards(on, r), WarmupForwards(off, r) + 1);
      EXPECT_EQ(PeakInFlight((*s)[r], on, r).total_peak, InFlightMicrobatches(on, r));
      EXPECT_EQ(InFlightMicrobatches(on, r), InFlightMicrobatches(off, r) + 1);
      const ActionList& list = (*s)[r];
      for (size_t i = 0; i + 1 < list.size(); ++i) {
        if (list[i].kind == ActionKind::kForward && list[i + 1].kind == ActionKind::kBackward) {
          EXPECT_NE(list[i].microbatch, list[i + 1].microbatch) << ToString(list[i]);
        }
      }
    }
  }
}

// The paired forward and backward of combined 1F1B run layer by layer (the
// backward frees a layer as the forward stores one), so the one more
// forward in the action list stores one layer more than the plain
// schedule, not one chunk-microbatch more; the last rank keeps one head
// stash. Measured: Qwen3-30B-A3B with the overlap on 16 H100s peaked at
// 62.2 GiB allocated (docs/validation.md), where two microbatches of
// activations would be about 97 GiB.
TEST(MoeA2aOverlap, PairedStepStoresOneLayerMore) {
  const ModelSpec m = Moe();
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  for (auto [pp, vpp] : {std::pair{1, 1}, std::pair{2, 2}}) {
    const PlanSpec off = Plan(m, pp, vpp, false), on = Plan(m, pp, vpp, true);
    for (int r = 0; r < pp; ++r) {
      const StageMemory a = EstimateStageMemory(m, off, mp, r, InFlightMicrobatches(off, r));
      const StageMemory b = EstimateStageMemory(m, on, mp, r, InFlightMicrobatches(on, r));
      // One layer of the model's kind (its stored bytes; the stage has
      // StageLayers of them per chunk-microbatch in flight).
      const double per_chunk_mb = a.activations / InFlightMicrobatches(off, r);
      EXPECT_GT(b.activations, a.activations) << "pp " << pp << " rank " << r;
      EXPECT_LT(b.activations - a.activations, per_chunk_mb) << "pp " << pp << " rank " << r;
    }
  }
  // pp 1, a chunk of several layers: exactly one layer's stored bytes more.
  const PlanSpec off = Plan(m, 1, 1, false), on = Plan(m, 1, 1, true);
  const double off_act = EstimateStageMemory(m, off, mp, 0, InFlightMicrobatches(off, 0)).activations;
  const double on_act = EstimateStageMemory(m, on, mp, 0, InFlightMicrobatches(on, 0)).activations;
  const double one_layer = StoredBytesPerLayer(m, off, mp.activation_bytes, 1.0, mp.attention_kernels);
  EXPECT_NEAR(on_act - off_act, one_layer, 1.0);
  // Too few microbatches to pair any (every forward a warmup forward): all
  // of them stored, as without the overlap.
  PlanSpec few_off = Plan(m, 2, 2, false), few_on = Plan(m, 2, 2, true);
  few_off.num_microbatches = few_on.num_microbatches = 2;
  ASSERT_EQ(InFlightMicrobatches(few_on, 0), few_on.num_microbatches * few_on.vpp);
  EXPECT_DOUBLE_EQ(EstimateStageMemory(m, few_on, mp, 0, InFlightMicrobatches(few_on, 0)).activations,
                   EstimateStageMemory(m, few_off, mp, 0, InFlightMicrobatches(few_off, 0)).activations);
}

// A paired forward + backward exposes no more than both all-to-alls and no
// less than what the other's compute cannot cover; the simulated step is
// faster than without the overlap, not faster than the lower bound, and
// not faster than the all-to-alls alone.
TEST(MoeA2aOverlap, HidesAllToAllsBehindTheOtherMicrobatch) {
  const ModelSpec m = Moe();
  ClusterSpec c = testing_models::Cluster(2, 8);  // EP 8 of dp 16 at pp 1: inside a node
  for (auto [pp, vpp] : {std::pair{1, 1}, std::pair{2, 2}}) {
    const PlanSpec off = Plan(m, pp, vpp, false), on = Plan(m, pp, vpp, true);
    const PlanCosts k = ComputePlanCosts(m, c, on, H100());
    const EpOverlapCost& e = k.ep_overlap;
    ASSERT_GT(e.fwd_layer, 0);
    ASSERT_GT(e.bwd_layer, 0);
    EXPECT_LE(e.pair_exposed_layer, e.fwd_layer + e.bwd_layer);
    EXPECT_LT(e.pair_exposed_layer, e.fwd_layer + e.bwd_layer);  // some compute to hide behind
    EXPECT_GT(e.pair_exposed_layer, 0);  // never free: the all-to-all kernels hold SMs the compute needs
    const int layers = k.chunks[0].moe_layers;
    EXPECT_EQ(layers, on.layers_per_chunk[0]);
    EXPECT_DOUBLE_EQ(k.chunks[0].ep_fwd, layers * e.fwd_layer);
    EXPECT_DOUBLE_EQ(PairedEpExposed(k, 0, 0), layers * e.pair_exposed_layer);
    auto t_on = SimulatePlan(m, c, on, H100()), t_off = SimulatePlan(m, c, off, H100());
    ASSERT_TRUE(t_on.ok() && t_off.ok());
    EXPECT_LT(t_on->step_time_s, t_off->step_time_s) << pp;
    EXPECT_GE(t_on->step_time_s, StepTimeLowerBound(on, k) * (1 - 1e-9));
    double a2a = 0;
    for (int ch = 0; ch < on.num_chunks(); ch += on.pp) a2a += k.chunks[ch].ep_fwd + k.chunks[ch].ep_bwd;
    EXPECT_GE(t_on->step_time_s, on.num_microbatches * a2a);
  }
}

// --delay-wgrad-compute: Megatron-LM's rule (only with the overlap), the
// round trips, and its pricing: the backward's expert weight gradients
// beside the two dispatch all-to-alls never expose more than without, and
// expose less where the backward's experts are what the forward's dispatch
// waits behind.
TEST(MoeA2aOverlap, DelayedWgradFollowsMegatronAndNeverExposesMore) {
  const ModelSpec m = Moe();
  PlanSpec p = Plan(m, 1, 1, true);
  p.delay_wgrad_compute = true;
  ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  PlanSpec alone = Plan(m, 1, 1, false);
  alone.delay_wgrad_compute = true;
  EXPECT_NE(Validate(alone, m, "plan").message().find("needs moe_a2a_overlap"), std::string::npos);
  auto back = PlanFromJson(ToJson(p), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->delay_wgrad_compute);
  EXPECT_NE(Describe(p).find("delay-wgrad"), std::string::npos);
  EXPECT_FALSE(ToJson(Plan(m, 1, 1, true)).contains("delay_wgrad_compute"));
  auto job = testing_models::MegatronRoundTrip(m, p);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.delay_wgrad_compute);
  // Pricing over node counts (all-to-alls inside a node and across nodes)
  // and microbatch sizes (the experts' share against the all-to-alls').
  // Narrow experts (Qwen3-MoE-like: 32 of 768 wide, EP across the nodes)
  // make the all-to-alls the longer side, where the delay pays.
  int lower = 0;
  const ModelSpec narrow = [&] {
    ModelSpec n = m;
    n.moe_ffn_hidden = 768;
    n.num_experts = 32;
    return n;
  }();
  for (const ModelSpec* model : {&m, &narrow}) {
  for (int nodes : {1, 2, 4}) {
    for (int mbs : {1, 2, 4}) {
      const ModelSpec& m = *model;
      PlanSpec off = Plan(m, 1, 1, true), on = off;
      off.dp = on.dp = 8 * nodes;
      off.ep = on.ep = std::min<int>(8 * nodes, static_cast<int>(m.num_experts));  // across the nodes where it can
      off.micro_batch = on.micro_batch = mbs;
      on.delay_wgrad_compute = true;
      const ClusterSpec c = testing_models::Cluster(nodes, 8);
      const EpOverlapCost a = ComputePlanCosts(m, c, off, H100()).ep_overlap;
      const EpOverlapCost b = ComputePlanCosts(m, c, on, H100()).ep_overlap;
      EXPECT_DOUBLE_EQ(a.fwd_layer, b.fwd_layer);
      EXPECT_DOUBLE_EQ(a.bwd_layer, b.bwd_layer);
      EXPECT_LE(b.pair_exposed_layer, a.pair_exposed_layer * (1 + 1e-12)) << nodes << " nodes, mbs " << mbs;
      EXPECT_GT(b.pair_exposed_layer, 0);  // the all-to-all kernels still hold SMs
      lower += b.pair_exposed_layer < a.pair_exposed_layer * (1 - 1e-6);
    }
  }
  }
  EXPECT_GT(lower, 0);
}

}  // namespace
}  // namespace dt
