// The MoE block's side-stream overlaps (overlap windows, planner/cost/
// moe_ops.cc): Megatron-LM's --moe-shared-expert-overlap (PlanSpec::
// moe_shared_expert_overlap) and --overlap-dispatch-backward-with-experts-
// wgrad. Their rules, the round trips through plan files and Megatron-LM's
// flags, and what the pricing may and may not do: hide work only behind the
// ops it runs beside, never more than either side of a window, and nothing
// where there is nothing to hide.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/flops.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/moe_ops.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/group_topology.h"
#include "planner/lower/plan_costs.h"
#include "planner/profile/profile.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/megatron_round_trip.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

// Mixtral's shape with one shared expert as wide as a routed one.
ModelSpec SharedMoe() {
  ModelSpec m = testing_models::Mixtral8Layers();
  m.shared_ffn_hidden = 14336;
  return m;
}

PlanSpec Plan(const ModelSpec& m, int tp, int ep, bool overlap) {
  PlanSpec p;
  p.tp = tp;
  p.sequence_parallel = tp > 1;
  p.dp = 16 / tp;
  p.ep = ep;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = m.seq_length;
  p.zero_stage = 1;
  p.flash_attention = true;
  p.moe_shared_expert_overlap = overlap;
  p.layers_per_chunk = {m.num_layers};
  return p;
}


double LayerForward(const ModelSpec& m, const PlanSpec& p) {
  const PlanCosts c = ComputePlanCosts(m, testing_models::Cluster(2, 8), p, testing_models::H100WithoutHostTime());
  return c.chunks[0].fwd_compute + c.chunks[0].fwd_comm;
}
double LayerBackward(const ModelSpec& m, const PlanSpec& p) {
  const PlanCosts c = ComputePlanCosts(m, testing_models::Cluster(2, 8), p, testing_models::H100WithoutHostTime());
  return c.chunks[0].bwd_compute + c.chunks[0].bwd_comm;
}

// Time of the ops of one layer's list whose name contains `part`, or of its
// EP collectives (part null), each priced alone as Price does.
double OpsTime(const PlanSpec& p, const std::vector<Op>& ops, const char* part) {
  double t = 0;
  for (const Op& op : ops) {
    const bool ep = op.kind == OpKind::kCollective && op.group == GroupKind::kEp;
    if (part == nullptr ? !ep : std::string(op.name).find(part) == std::string::npos) continue;
    if (op.kind == OpKind::kCollective) {
      const GroupTopology g = TopologyOf(p, op.group, 8);
      t += OpCollectiveTime(op, g.per_node, g.spans_nodes, testing_models::H100WithoutHostTime());
    } else {
      t += OpTime(op, testing_models::H100WithoutHostTime());
    }
  }
  return t;
}

TEST(SharedExpertOverlap, FollowsMegatronsRulesAndRoundTrips) {
  const ModelSpec m = SharedMoe();
  const PlanSpec p = Plan(m, 2, 8, true);
  ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  EXPECT_NE(Validate(Plan(testing_models::Llama8B(), 2, 1, true), testing_models::Llama8B(), "plan")
                .message()
                .find("no experts"),
            std::string::npos);
  PlanSpec both = p;
  both.moe_a2a_overlap = true;
  EXPECT_NE(Validate(both, m, "plan").message().find("refuses the pair"), std::string::npos);
  // Plan files and plan lines carry it; absent when off.
  auto back = PlanFromJson(ToJson(p), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->moe_shared_expert_overlap);
  EXPECT_NE(Describe(p).find("shared-overlap"), std::string::npos);
  EXPECT_FALSE(ToJson(Plan(m, 2, 8, false)).contains("moe_shared_expert_overlap"));
  // dtrun runs the shared experts in line: refused by name on CPUs.
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kMoeSharedExpertOverlap), missing.end());
  // Megatron-LM: exported as --moe-shared-expert-overlap and read back.
  auto job = testing_models::MegatronRoundTrip(m, p);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.moe_shared_expert_overlap);
}

TEST(SharedExpertOverlap, HidesSharedWorkOnlyBehindWhatItRunsBeside) {
  const ModelSpec m = SharedMoe();
  int checked = 0;
  for (int tp : {1, 2, 4}) {
    for (int ep : {2, 4, 8}) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " ep " + std::to_string(ep));
      const PlanSpec off = Plan(m, tp, ep, false), on = Plan(m, tp, ep, true);
      if (!Validate(off, m, "plan").ok()) continue;  // ep beyond what the grid folds
      ++checked;
      ASSERT_TRUE(Validate(on, m, "plan").ok()) << Validate(on, m, "plan").message();
      const LayerOps layer = TransformerLayerOps(m, off, 2, false, AttentionKernels::kMegatron);
      // Same work: the FLOPs do not change, only when it runs.
      EXPECT_DOUBLE_EQ(StepFlops(m, on, 1), StepFlops(m, off, 1));
      for (bool fwd : {true, false}) {
        const double a = fwd ? LayerForward(m, off) : LayerBackward(m, off);
        const double b = fwd ? LayerForward(m, on) : LayerBackward(m, on);
        const std::vector<Op>& ops = fwd ? layer.forward : layer.backward;
        const double saved = a - b;
        EXPECT_GE(saved, -1e-12 * a);
        // Per layer, at most the shared experts' own time and at most what
        // the routed path's all-to-alls (and permutation) take.
        EXPECT_LE(saved, m.num_layers * OpsTime(off, ops, "shared") * (1 + 1e-9));
        EXPECT_LE(saved, m.num_layers * (OpsTime(off, ops, nullptr) + OpsTime(off, ops, "moe_permute")) * (1 + 1e-9));
        if (ep >= 8) {
          EXPECT_GT(saved, 0.0);  // all-to-alls across two nodes hide something
        }
      }
    }
  }
  EXPECT_GE(checked, 7);
}

TEST(SharedExpertOverlap, ChangesNothingWithoutSharedExpertsOrCommunication) {
  // No shared experts (Mixtral): the flag is accepted, as Megatron-LM does,
  // and prices the same.
  const ModelSpec mixtral = testing_models::Mixtral8Layers();
  EXPECT_DOUBLE_EQ(LayerForward(mixtral, Plan(mixtral, 2, 8, true)), LayerForward(mixtral, Plan(mixtral, 2, 8, false)));
  EXPECT_DOUBLE_EQ(LayerBackward(mixtral, Plan(mixtral, 2, 8, true)),
                   LayerBackward(mixtral, Plan(mixtral, 2, 8, false)));
  // tp 1 and ep 1: no collective to hide behind, so nothing is hidden.
  const ModelSpec m = SharedMoe();
  EXPECT_NEAR(LayerForward(m, Plan(m, 1, 1, true)), LayerForward(m, Plan(m, 1, 1, false)),
              1e-12 * LayerForward(m, Plan(m, 1, 1, false)));
  EXPECT_NEAR(LayerBackward(m, Plan(m, 1, 1, true)), LayerBackward(m, Plan(m, 1, 1, false)),
              1e-12 * LayerBackward(m, Plan(m, 1, 1, false)));
}

// Megatron-LM's --overlap-dispatch-backward-with-experts-wgrad (PlanSpec::
// overlap_dispatch_backward_wgrad): the experts' weight gradients beside the
// expert-TP reduce-scatter and the dispatch's backward all-to-all. Its
// rules and round trips; the backward never slower, faster by at most the
// weight gradients or those collectives, the forward untouched.
TEST(ExpertWgradOverlap, FollowsMegatronsRulesAndHidesOnlyBehindTheDispatch) {
  const ModelSpec m = SharedMoe();
  PlanSpec p = Plan(m, 2, 8, false);
  p.overlap_dispatch_backward_wgrad = true;
  ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  PlanSpec both = p;
  both.moe_a2a_overlap = true;
  EXPECT_NE(Validate(both, m, "plan").message().find("refuses the pair"), std::string::npos);
  PlanSpec dense = Plan(testing_models::Llama8B(), 2, 1, false);
  dense.overlap_dispatch_backward_wgrad = true;
  EXPECT_NE(Validate(dense, testing_models::Llama8B(), "plan").message().find("no experts"), std::string::npos);
  auto back = PlanFromJson(ToJson(p), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->overlap_dispatch_backward_wgrad);
  EXPECT_NE(Describe(p).find("wgrad-beside-dispatch"), std::string::npos);
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kExpertWgradOverlap), missing.end());
  auto job = testing_models::MegatronRoundTrip(m, p);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.overlap_dispatch_backward_wgrad);
  int faster = 0;
  for (int tp : {1, 2}) {
    for (int ep : {2, 8}) {
      for (bool shared : {false, true}) {
        SCOPED_TRACE("tp " + std::to_string(tp) + " ep " + std::to_string(ep) + (shared ? " shared" : ""));
        PlanSpec off = Plan(m, tp, ep, shared), on = off;
        on.overlap_dispatch_backward_wgrad = true;
        ASSERT_TRUE(Validate(on, m, "plan").ok()) << Validate(on, m, "plan").message();
        EXPECT_DOUBLE_EQ(LayerForward(m, on), LayerForward(m, off));
        const std::vector<Op> ops = TransformerLayerOps(m, off, 2, false, AttentionKernels::kMegatron).backward;
        const double saved = LayerBackward(m, off) - LayerBackward(m, on);
        EXPECT_GE(saved, -1e-12 * LayerBackward(m, off));
        EXPECT_LE(saved, m.num_layers * OpsTime(off, ops, "expert_fc") * (1 + 1e-9));
        faster += saved > 1e-6 * LayerBackward(m, off);
      }
    }
  }
  EXPECT_GE(faster, 2);  // the all-to-alls across two nodes hide some
}

}  // namespace
}  // namespace dt
