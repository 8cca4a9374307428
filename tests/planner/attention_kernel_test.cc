// The attention kernel a plan is priced with (PlanSpec::cudnn_attention,
// --attention-kernel cudnn): the profile's measured cuDNN curve instead of its
// default one, only for the attention core; the plan-file round trip, the
// rules (fused core, GPU plans, a profile with the curve) and what a search,
// a validation case and a profile without the curve do with it.
#include <gtest/gtest.h>

#include <string>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/outside_profile.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/search/enumerate.h"
#include "planner/search/search.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/test_models.h"
#include "tests/planner/test_profiles.h"

namespace dt {
namespace {

using testing_profiles::A100;
using testing_profiles::H100;

PlanSpec LongPlan(const ModelSpec& m, bool cudnn) {
  PlanSpec p = testing_models::TpSpPlan(m, 8, 16384);
  p.cudnn_attention = cudnn;
  return p;
}

const Op* Find(const std::vector<Op>& ops, OpKind kind) {
  for (const Op& op : ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

// The attention core takes the cuDNN curve's time; every other op keeps its
// time; the plan's FLOPs do not change.
TEST(AttentionKernel, OnlyTheAttentionCoreChangesRate) {
  ModelSpec m = testing_models::Llama8B();
  m.num_layers = 4;
  const LayerOps def = TransformerLayerOps(m, LongPlan(m, false), 2);
  const LayerOps cud = TransformerLayerOps(m, LongPlan(m, true), 2);
  ASSERT_EQ(def.forward.size(), cud.forward.size());
  for (size_t i = 0; i < def.forward.size(); ++i) {
    EXPECT_DOUBLE_EQ(def.forward[i].flops, cud.forward[i].flops);
    if (def.forward[i].kind != OpKind::kAttention && def.forward[i].kind != OpKind::kCollective) {
      EXPECT_DOUBLE_EQ(OpTime(def.forward[i], H100()), OpTime(cud.forward[i], H100())) << def.forward[i].name;
    }
  }
  const Op* a = Find(def.forward, OpKind::kAttention);
  const Op* b = Find(cud.forward, OpKind::kAttention);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(b->cudnn_attention);
  // 16k keys per query row: FlashAttention-2 0.511 of peak, cuDNN 0.981
  // (profiles/H100-SXM5-80GB.json, both measured on one H100).
  EXPECT_NEAR(OpTime(*a, H100()) / OpTime(*b, H100()), 0.981 / 0.511, 0.02);
  EXPECT_FALSE(OpOutsideProfile(*b, 1, false, H100()));
  auto slow = SimulatePlan(m, ClusterSpec{1, 8, "gpu"}, LongPlan(m, false), H100());
  auto fast = SimulatePlan(m, ClusterSpec{1, 8, "gpu"}, LongPlan(m, true), H100());
  ASSERT_TRUE(slow.ok() && fast.ok());
  EXPECT_LT(fast->step_time_s, slow->step_time_s);
  EXPECT_DOUBLE_EQ(fast->model_flops_per_step, slow->model_flops_per_step);
  EXPECT_DOUBLE_EQ(fast->peak_memory_bytes, slow->peak_memory_bytes);
}

// A profile without the curve prices the default rate and says so.
TEST(AttentionKernel, ProfileWithoutTheCurveIsFlagged) {
  ModelSpec m = testing_models::Llama8B();
  m.num_layers = 2;
  const HardwareProfile& a100 = A100();
  ASSERT_TRUE(a100.compute.attention_efficiency_by_keys_cudnn.empty());
  const LayerOps with = TransformerLayerOps(m, LongPlan(m, true), 2);
  const LayerOps without = TransformerLayerOps(m, LongPlan(m, false), 2);
  const Op* b = Find(with.forward, OpKind::kAttention);
  const Op* a = Find(without.forward, OpKind::kAttention);
  ASSERT_TRUE(a && b);
  EXPECT_DOUBLE_EQ(OpTime(*a, a100), OpTime(*b, a100));
  EXPECT_TRUE(OpOutsideProfile(*b, 1, false, a100));
  EXPECT_FALSE(OpOutsideProfile(*a, 1, false, a100));
}

TEST(AttentionKernel, PlanFilesRulesAndDtrun) {
  ModelSpec m = testing_models::Llama8B();
  PlanSpec p = LongPlan(m, true);
  ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  auto back = PlanFromJson(ToJson(p), m, "plan");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->cudnn_attention);
  EXPECT_EQ(ToJson(p)["attention_kernel"], "cudnn");
  EXPECT_FALSE(ToJson(LongPlan(m, false)).contains("attention_kernel"));
  EXPECT_NE(Describe(p).find("cudnn-attn"), std::string::npos);
  nlohmann::json j = ToJson(p);
  j["attention_kernel"] = "flash3";
  auto bad = PlanFromJson(j, m, "plan");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("attention_kernel"), std::string::npos);
  PlanSpec unfused = p;
  unfused.flash_attention = false;
  EXPECT_NE(Validate(unfused, m, "plan").message().find("flash_attention"), std::string::npos);
  // dtrun's CPU attention is its own: the fused-core row of the capability
  // table already refuses every plan that can carry the cuDNN rate.
  EXPECT_FALSE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok());
}

TEST(AttentionKernel, SearchCopiesItAndRefusesCpuAndUnfused) {
  ModelSpec m = testing_models::Llama8B();
  m.num_layers = 4;
  const ClusterSpec c{1, 8, "gpu"};
  SearchConstraints k;
  k.global_batch = 8, k.seq_length = 16384, k.cudnn_attention = true;
  SearchOptions so;
  so.top = 20, so.threads = 1;
  auto r = SearchPlans(m, c, H100(), k, so);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->top.empty());
  for (const RankedPlan& rp : r->top) EXPECT_TRUE(rp.plan.cudnn_attention) << Describe(rp.plan);
  SearchConstraints unfused = k;
  unfused.flash_attention = false;
  auto u = SearchPlans(m, c, H100(), unfused, so);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("unfused"), std::string::npos) << u.status().message();
  ClusterSpec cpu{1, 2, "cpu"};
  SearchConstraints kc = k;
  kc.flash_attention = true;
  auto e = EnumeratePlans(m, cpu, kc);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("CPU"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace dt
