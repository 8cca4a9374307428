// Multi-token prediction (ModelSpec::mtp_layers; DeepSeek-V3's
// num_nextn_predict_layers, Megatron-LM's --mtp-num-layers): read from the
// real config, counted apart from the main model, priced and held on the
// last pipeline stage, refused where not modeled.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/cost/flops.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/simulate.h"
#include "planner/memory/memory_params.h"
#include "planner/memory/param_count.h"
#include "planner/memory/stage_memory.h"
#include "planner/profile/profile.h"
#include "planner/search/enumerate.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

// Published: the DeepSeek-V3 model card, "685B ... includes 671B of the
// Main Model weights and 14B of the Multi-Token Prediction (MTP) Module
// weights" -- the MTP checkpoint stores its own embedding and head copies,
// which training shares with the main model.
TEST(Mtp, DeepSeekV3ReadsItsModuleAndMatchesTheCheckpointTotal) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/deepseek-v3.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->mtp_layers, 1);
  const double embedding = static_cast<double>(m->vocab) * m->hidden;
  // One MoE layer (11.5B), eh_proj (2 x 7168^2) and three norms.
  EXPECT_EQ(m->MtpParams(), m->LayerParams() + 2LL * m->hidden * m->hidden + 3LL * m->hidden);
  const double checkpoint = static_cast<double>(m->TotalParams() + m->MtpParams()) + 2 * embedding;
  EXPECT_NEAR(checkpoint / 685e9, 1.0, 0.005) << checkpoint;
  EXPECT_NEAR((m->MtpParams() + 2 * embedding) / 14e9, 1.0, 0.05);  // "14B", rounded
  // Our schema carries it; out-of-range counts are refused.
  auto back = ModelFromJson(ToJson(*m), "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->mtp_layers, 1);
  ModelSpec bad = *m;
  bad.mtp_layers = -1;
  EXPECT_FALSE(Validate(bad, "model").ok());
}

ModelSpec WithMtp(int layers) {
  ModelSpec m = testing_models::Llama8B();
  m.mtp_layers = layers;
  return m;
}

PlanSpec TwoStages(const ModelSpec& m) {
  PlanSpec p;
  p.pp = 2;
  p.dp = 2;
  p.tp = 2;
  p.sequence_parallel = true;
  p.micro_batch = 1;
  p.num_microbatches = 4;
  p.seq_length = 4096;
  p.zero_stage = 1;
  p.layers_per_chunk = EvenSplit(m.num_layers, p.pp);
  return p;
}

// FLOPs: one more layer, eh_proj (forward, dgrad, wgrad) and one more pass
// through the LM head per module and microbatch, on the last stage only.
TEST(Mtp, AddsALayerAProjectionAndAHeadPassToTheLastStage) {
  const ModelSpec base = WithMtp(0), one = WithMtp(1), two = WithMtp(2);
  const PlanSpec p = TwoStages(base);
  const LayerOps mtp = MtpOps(one, p, 2), layer = TransformerLayerOps(one, p, 2), head = HeadOps(one, p, 2);
  const double h = one.hidden, T = static_cast<double>(p.micro_batch) * p.seq_length;
  const double proj = 3 * 2.0 * T * 2 * h * (h / p.tp);
  EXPECT_NEAR(SumFlops(mtp.forward) + SumFlops(mtp.backward),
              SumFlops(layer.forward) + SumFlops(layer.backward) + SumFlops(head.forward) +
                  SumFlops(head.backward) + proj,
              1e-6 * proj);
  EXPECT_TRUE(MtpOps(base, p, 2).forward.empty());
  const double ranks = static_cast<double>(p.dp) * p.tp * p.cp;
  const double per_module = (SumFlops(mtp.forward) + SumFlops(mtp.backward)) * p.num_microbatches * ranks;
  EXPECT_NEAR(StepFlops(one, p, false) - StepFlops(base, p, false), per_module, 1e-9 * per_module);
  EXPECT_NEAR(StepFlops(two, p, false) - StepFlops(base, p, false), 2 * per_module, 1e-9 * per_module);
  // Full recompute re-runs the module's layer too (hardware FLOPs).
  PlanSpec rc = p;
  rc.recompute = Recompute::kFull;
  EXPECT_GT(StepFlops(one, rc, true) - StepFlops(base, rc, true), StepFlops(one, rc, false) - StepFlops(base, rc, false));

  // Memory: the first stage does not change; the last holds the module's
  // weights (and the untied embedding's copy) and stores its activations.
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  const StageMemory f0 = EstimateStageMemory(base, p, mp, 0, 2), f1 = EstimateStageMemory(one, p, mp, 0, 2);
  EXPECT_DOUBLE_EQ(f1.total, f0.total);
  const StageMemory l0 = EstimateStageMemory(base, p, mp, 1, 1), l1 = EstimateStageMemory(one, p, mp, 1, 1);
  const double mtp_params = static_cast<double>(MtpParamsPerRank(one, p));
  EXPECT_DOUBLE_EQ(mtp_params, static_cast<double>(LayerParamsPerRank(one, p)) + 2 * h * (h / p.tp) + 3 * h +
                                   static_cast<double>(one.vocab) / p.tp * h);
  EXPECT_DOUBLE_EQ(l1.weights - l0.weights, mtp_params * mp.weight_bytes);
  EXPECT_GT(l1.activations, l0.activations);
  EXPECT_GT(l1.optimizer, l0.optimizer);

  // The simulated step is longer (the last stage is the critical one).
  const ClusterSpec c = testing_models::Cluster(1, 8);
  const HardwareProfile hw = LoadProfile("h100").value();
  auto s0 = SimulatePlan(base, c, p, hw), s1 = SimulatePlan(one, c, p, hw);
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_GT(s1->step_time_s, s0->step_time_s);
  EXPECT_GT(s1->peak_memory_bytes, s0->peak_memory_bytes);
}

// ZeRO-2/3 units of the modules are not modeled: refused in plans, never
// searched; dtrun refuses the feature by name.
TEST(Mtp, RefusedWhereNotModeled) {
  const ModelSpec m = WithMtp(1);
  PlanSpec p = TwoStages(m);
  for (int zero : {2, 3}) {
    p.zero_stage = zero;
    Status s = Validate(p, m, "plan");
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("multi-token prediction"), std::string::npos) << s.message();
  }
  const ClusterSpec c = testing_models::Cluster(1, 8);
  SearchConstraints k;
  k.global_batch = 16;
  k.seq_length = 1024;
  auto e = EnumeratePlans(m, c, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_FALSE(e->plans.empty());
  for (const PlanSpec& q : e->plans) EXPECT_LE(q.zero_stage, 1) << Describe(q);
  k.zero_stage = 2;
  EXPECT_FALSE(EnumeratePlans(m, c, k).ok());
  p.zero_stage = 1;
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kMultiTokenPrediction), missing.end());
}

}  // namespace
}  // namespace dt
