// TP communication overlap (PlanSpec::tp_comm_overlap, Megatron-LM's
// --tp-comm-overlap, Transformer Engine userbuffers): each method's formula
// on a hand-built pair, what a whole plan gains and never loses, Megatron's
// rules, plan files, the Megatron round trip, the search and dtrun's refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/lower/tp_overlap.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::H100;

Op Named(OpKind kind, const char* name) {
  Op op;
  op.kind = kind;
  op.name = name;
  op.group = GroupKind::kTp;
  return op;
}

Op GemmOp(const char* name, int64_t m, int64_t n, int64_t k) {
  Op op = Named(OpKind::kGemm, name);
  op.m = m, op.n = n, op.k = k;
  op.flops = 2.0 * m * n * k;
  return op;
}

// The three methods against their formulas, with the comm time both
// smaller and larger than the GEMM's.
TEST(TpCommOverlap, EachMethodFollowsItsFormula) {
  const int tp = 4;
  const double sm = 1.0 - 16.0 / 132.0;
  const Op qkv = GemmOp("qkv", 8192, 3072, 8192), fc2 = GemmOp("fc2", 8192, 8192, 7168);
  const Op dgrad = GemmOp("qkv_dgrad", 8192, 8192, 3072);
  const double g_qkv = OpTime(qkv, H100()), g_fc2 = OpTime(fc2, H100()), g_dgrad = OpTime(dgrad, H100());
  for (double c : {0.2e-3, 5e-3}) {
    std::vector<Op> ops = {Named(OpKind::kCollective, "sp_allgather_attn"), qkv,
                           fc2, Named(OpKind::kCollective, "sp_reducescatter_mlp"),
                           Named(OpKind::kCollective, "sp_allgather_attn_input"), dgrad,
                           Named(OpKind::kCollective, "tp_allreduce_kv_replica_grads")};
    std::vector<double> charged = {c, 0, 0, c, c, 0, c};
    ChargeOverlappedTpComm(ops, tp, H100(), &charged);
    // Ring exchange: tp chunks, tp - 1 transfers of c / (tp - 1).
    const double gc = g_qkv / tp;
    EXPECT_NEAR(charged[0], std::max(0.0, gc + (tp - 1) * std::max(gc, c / (tp - 1)) - g_qkv), 1e-12);
    // Pipeline: 4 chunks on 116 of 132 SMs, one chunk's reduce-scatter exposed.
    const double pc = g_fc2 / 4 / sm;
    EXPECT_NEAR(charged[3], std::max(0.0, pc + 3 * std::max(pc, c / 4) + c / 4 - g_fc2), 1e-12);
    // Bulk: the longer of the slowed GEMM and the collective.
    EXPECT_NEAR(charged[4], std::max(g_dgrad / sm, c) - g_dgrad, 1e-12);
    // A collective TE does not overlap keeps its in-line time.
    EXPECT_EQ(charged[6], c);
    if (c > g_qkv) {
      EXPECT_GT(charged[0], c - g_qkv);  // a long transfer still shows
    } else {
      EXPECT_EQ(charged[0], 0);  // a short one hides entirely
    }
  }
  // No pair in the list (an MoE or MLA block): charged in full.
  std::vector<Op> lone = {Named(OpKind::kCollective, "sp_allgather_mlp"), GemmOp("expert_fc1", 100, 100, 100)};
  std::vector<double> charged = {1e-3, 0};
  ChargeOverlappedTpComm(lone, tp, H100(), &charged);
  EXPECT_EQ(charged[0], 1e-3);
}

PlanSpec TpPlan(const ModelSpec& m, bool overlap) {
  PlanSpec p;
  p.tp = 8;
  p.dp = 1;
  p.micro_batch = 1;
  p.num_microbatches = 4;
  p.seq_length = 4096;
  p.sequence_parallel = true;
  p.tp_comm_overlap = overlap;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

// On a whole plan: the exposed TP time drops (the GEMMs hide most of it),
// the kernels' time is unchanged, and the step stays above its compute.
TEST(TpCommOverlap, HidesMostOfTheTpTimeOfAPlan) {
  ModelSpec m = testing_models::Llama8B();
  m.num_layers = 8;
  ClusterSpec c;
  c.gpus_per_node = 8;
  auto off = SimulatePlan(m, c, TpPlan(m, false), testing_models::H100WithoutHostTime());
  auto on = SimulatePlan(m, c, TpPlan(m, true), testing_models::H100WithoutHostTime());
  ASSERT_TRUE(off.ok() && on.ok());
  EXPECT_GT(off->time.tp_exposed, 0);
  EXPECT_LT(on->time.tp_exposed, 0.5 * off->time.tp_exposed);
  EXPECT_DOUBLE_EQ(on->time.compute, off->time.compute);
  EXPECT_LT(on->step_time_s, off->step_time_s);
  EXPECT_GE(on->step_time_s, on->time.compute);
  EXPECT_DOUBLE_EQ(on->peak_memory_bytes, off->peak_memory_bytes);
}

TEST(TpCommOverlap, RulesPlanFilesMegatronAndDtrun) {
  ModelSpec m = testing_models::Llama8B();
  PlanSpec p = TpPlan(m, true);
  ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  PlanSpec bad = p;
  bad.sequence_parallel = false;
  EXPECT_NE(Validate(bad, m, "plan").message().find("sequence_parallel"), std::string::npos);
  bad = p;
  bad.tp = 1;
  bad.sequence_parallel = false;
  EXPECT_NE(Validate(bad, m, "plan").message().find("tp > 1"), std::string::npos);
  auto back = PlanFromJson(ToJson(p), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->tp_comm_overlap);
  EXPECT_FALSE(ToJson(TpPlan(m, false)).contains("tp_comm_overlap"));
  EXPECT_NE(Describe(p).find("tp-overlap"), std::string::npos);
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kTpCommOverlap), missing.end());
  auto flags = MegatronArgs(m, p, true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  const std::string line = FormatFlags(*flags);
  EXPECT_NE(line.find("--tp-comm-overlap"), std::string::npos);
  auto words = SplitCommandLine(line);
  ASSERT_TRUE(words.ok());
  auto job = ImportMegatron(*words, p.world(), "x");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.tp_comm_overlap);
  EXPECT_EQ(Describe(job->plan), Describe(p));
}

// --tp-comm-overlap applies to the searched plans that have TP collectives
// to hide (tp > 1 with sequence parallelism) and to no other.
TEST(TpCommOverlap, SearchSetsItWhereItApplies) {
  ModelSpec m = testing_models::Llama8B();
  ClusterSpec c;
  c.gpus_per_node = 8;
  SearchConstraints k;
  k.global_batch = 16;
  k.seq_length = 4096;
  k.tp_comm_overlap = true;
  SearchOptions so;
  so.top = 200;
  so.threads = 1;
  auto r = SearchPlans(m, c, H100(), k, so);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int with = 0, without = 0;
  for (const RankedPlan& rp : r->top) {
    EXPECT_EQ(rp.plan.tp_comm_overlap, rp.plan.tp > 1 && rp.plan.sequence_parallel) << Describe(rp.plan);
    (rp.plan.tp_comm_overlap ? with : without)++;
  }
  EXPECT_GT(with, 0);
  EXPECT_GT(without, 0);
  k.tp = 1;
  EXPECT_FALSE(SearchPlans(m, c, H100(), k, so).ok());
}

}  // namespace
}  // namespace dt
