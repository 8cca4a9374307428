// Sliding-window attention (ModelSpec::sliding_window / sliding_window_pattern)
// and the GPT-OSS mapping that needs it (issue 11, honest loading): the
// published parameter totals of openai/gpt-oss-120b, which layers are
// windowed, the fused kernel's tiles a window visits, chunk costs and FLOPs
// that change by exactly the windowed layers' attention, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/cost/compute_cost.h"
#include "planner/cost/flops.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/search/enumerate.h"
#include "planner/memory/param_count.h"
#include "planner/profile/profile.h"
#include "planner/spec/capabilities.h"
#include "planner/spec/hf_config.h"
#include "tests/planner/test_models.h"
#include "tests/planner/window_checks.h"

namespace dt {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/" + name;
}

// openai/gpt-oss-120b's config.json as published carries the MXFP4
// quantization of the released weights; a training plan drops it.
ModelSpec GptOss120b() {
  json j = ReadJsonFile(Fixture("gpt-oss-120b.json")).value();
  j.erase("quantization_config");
  auto m = ModelFromJson(j, "gpt-oss-120b.json");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

// OpenAI's gpt-oss model card (2025-08), Table 1: gpt-oss-120b has 116.83B
// parameters in total (MLP 114.71B, attention 0.96B, embedding and
// unembedding 1.16B) and 5.13B active per token, a figure that leaves the
// input embedding table out (0.58B); ActiveParams counts it.
TEST(GptOss, ParameterCountsMatchTheModelCard) {
  const ModelSpec m = GptOss120b();
  EXPECT_EQ(m.source_type, "gpt_oss");
  EXPECT_TRUE(m.moe());
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.moe_top_k, 4);
  EXPECT_EQ(m.q_dim(), 4096);  // 64 heads of 64, != hidden 2880
  EXPECT_TRUE(m.linear_bias());
  EXPECT_TRUE(m.attention_sinks);
  EXPECT_NEAR(m.TotalParams() / 116.83e9, 1.0, 0.005) << m.TotalParams();
  const double embedding = static_cast<double>(m.vocab) * m.hidden;
  EXPECT_NEAR((m.ActiveParams() - embedding) / 5.13e9, 1.0, 0.005) << m.ActiveParams();
  // Expert weights and biases, by hand: 128 x (3 x 2880^2 + 2 x 2880 + 2880) per layer.
  EXPECT_EQ(m.ExpertParams(), 3LL * 2880 * 2880 + 3 * 2880);
  EXPECT_NEAR(36.0 * 128 * m.ExpertParams() / 114.71e9, 1.0, 0.005);
  // Per rank: the whole model at tp = pp = ep = 1, and the expert shards
  // add back up over EP and expert TP.
  PlanSpec p;
  p.seq_length = 4096;
  p.layers_per_chunk = {m.num_layers};
  EXPECT_EQ(StageParamsPerRank(m, p, 0), m.TotalParams());
  PlanSpec q = p;
  q.ep = 8;
  q.dp = 8;
  EXPECT_EQ(8 * ExpertLayerParamsPerRank(m, q), ExpertLayerParamsPerRank(m, p));
  q.tp = 2;
  q.etp = 1;
  q.sequence_parallel = true;
  EXPECT_EQ(8 * ExpertLayerParamsPerRank(m, q), ExpertLayerParamsPerRank(m, p));
}

TEST(GptOss, PublishedConfigIsRefusedForItsQuantizationAndLayoutIsAlternating) {
  Status s = LoadModel(Fixture("gpt-oss-120b.json")).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("quantization_config"), std::string::npos) << s.message();
  const ModelSpec m = GptOss120b();
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.sliding_window_pattern, 2);
  for (int i = 0; i < m.num_layers; ++i) EXPECT_EQ(m.WindowedLayer(i), i % 2 == 0) << i;
  EXPECT_EQ(m.WindowedLayers(0, 36), 18);
  EXPECT_EQ(m.WindowedLayers(0, 9), 5);
  EXPECT_EQ(m.WindowedLayers(9, 9), 4);
  EXPECT_FALSE(m.FamilyLayout());  // dtrun refuses it as a model variant
  PlanSpec p;
  p.seq_length = 4096;
  p.layers_per_chunk = {m.num_layers};
  const auto missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kModelVariant), missing.end());
  // Our schema carries the window pattern and the sinks.
  auto back = ModelFromJson(ToJson(m), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(m));
  EXPECT_EQ(back->TotalParams(), m.TotalParams());
}

TEST(GptOss, IrregularLayerTypesAndFalseAttentionBiasAreRefused) {
  json j = ReadJsonFile(Fixture("gpt-oss-120b.json")).value();
  j.erase("quantization_config");
  json irregular = j;
  irregular["layer_types"][3] = "sliding_attention";
  Status s = ModelFromJson(irregular, "c.json").status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer_types"), std::string::npos) << s.message();
  json short_list = j;
  short_list["layer_types"].erase(0);
  EXPECT_FALSE(ModelFromJson(short_list, "c.json").ok());
  json nobias = j;
  nobias["attention_bias"] = false;
  s = ModelFromJson(nobias, "c.json").status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("attention_bias"), std::string::npos) << s.message();
  json every = j;  // every layer windowed: Mistral's layout
  for (auto& t : every["layer_types"]) t = "sliding_attention";
  auto m = ModelFromJson(every, "c.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->sliding_window_pattern, 0);
  EXPECT_EQ(m->WindowedLayers(0, 36), 36);
  json none = j;
  for (auto& t : none["layer_types"]) t = "full_attention";
  m = ModelFromJson(none, "c.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->sliding_window, 0);
}

TEST(SlidingWindow, OtherTypesMapTheirLayers) {
  auto gemma2 = LoadModel(Fixture("gemma2-9b.json"));
  ASSERT_TRUE(gemma2.ok());
  EXPECT_TRUE(gemma2->WindowedLayer(0));  // HF Gemma-2: even layers windowed
  EXPECT_FALSE(gemma2->WindowedLayer(1));
  auto mistral = LoadModel(Fixture("mistral-7b.json"));
  ASSERT_TRUE(mistral.ok());
  EXPECT_EQ(mistral->WindowedLayers(0, mistral->num_layers), mistral->num_layers);
  // Qwen2: the window applies from max_window_layers up; a split layout is refused.
  json q = ReadJsonFile(Fixture("qwen2-7b.json")).value();
  q["use_sliding_window"] = true;
  q["sliding_window"] = 4096;
  q["max_window_layers"] = q["num_hidden_layers"];
  auto none = ModelFromJson(q, "q.json");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->sliding_window, 0);
  q["max_window_layers"] = 0;
  auto all = ModelFromJson(q, "q.json");
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->sliding_window, 4096);
  q["max_window_layers"] = 7;
  Status s = ModelFromJson(q, "q.json").status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_window_layers"), std::string::npos) << s.message();
}

// Recent transformers write layer_types for many model types: read for all.
TEST(SlidingWindow, LayerTypesAreReadForEveryType) {
  json q = ReadJsonFile(Fixture("qwen3-30b-a3b.json")).value();
  q["layer_types"] = json::array();
  for (int i = 0; i < q["num_hidden_layers"].get<int>(); ++i) q["layer_types"].push_back("full_attention");
  auto full = ModelFromJson(q, "q.json");
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->sliding_window, 0);
  q["sliding_window"] = 1024;
  for (size_t i = 0; i < q["layer_types"].size(); i += 4) q["layer_types"][i] = "sliding_attention";
  Status s = ModelFromJson(q, "q.json").status();  // windowed 0, 4, 8, ...: not one modeled pattern
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer_types"), std::string::npos) << s.message();
  for (size_t i = 0; i < q["layer_types"].size(); ++i)
    q["layer_types"][i] = i % 4 == 3 ? "full_attention" : "sliding_attention";  // Gemma-3-like: 3 windowed, 1 full
  auto pattern = ModelFromJson(q, "q.json");
  ASSERT_TRUE(pattern.ok()) << pattern.status().message();
  EXPECT_EQ(pattern->sliding_window, 1024);
  EXPECT_EQ(pattern->sliding_window_pattern, 4);
  EXPECT_EQ(pattern->WindowedLayers(0, 8), 6);
  q.erase("sliding_window");
  EXPECT_FALSE(ModelFromJson(q, "q.json").ok());  // windowed layers without a window
}

TEST(SlidingWindow, TileFractionCountsTheTilesAFusedKernelVisits) {
  // 32 query tiles: causal visits 1 + 2 + ... + 32 = 528 tiles; a 128-key
  // window 1 + 31 x 2 = 63.
  EXPECT_DOUBLE_EQ(WindowTileFraction(4096, 128), 63.0 / 528.0);
  EXPECT_DOUBLE_EQ(WindowTileFraction(4096, 4096), 1.0);
  EXPECT_DOUBLE_EQ(WindowTileFraction(2048, 4096), 1.0);
  // A window of 1024 at 4096: tiles i-8 .. i (9), fewer near the start.
  double w = 0;
  for (int i = 0; i < 32; ++i) w += std::min(i, 8) + 1;
  EXPECT_DOUBLE_EQ(WindowTileFraction(4096, 1024), w / 528.0);
  // Monotone in the window.
  double last = 0;
  for (int win : {128, 256, 1000, 2048, 4095}) {
    const double f = WindowTileFraction(4096, win);
    EXPECT_GT(f, last) << win;
    last = f;
  }
}

PlanSpec OssPlan(const ModelSpec& m, bool flash) {
  PlanSpec p;
  p.dp = 16;
  p.pp = 4;
  p.ep = 8;
  p.seq_length = 4096;
  p.num_microbatches = 8;
  p.zero_stage = 1;
  p.flash_attention = flash;
  p.dropout = false;
  p.layers_per_chunk = EvenSplit(m.num_layers, 4);
  return p;
}

TEST(SlidingWindow, ChunkCostsAndFlopsDropByTheWindowedLayersAttention) {
  const ModelSpec m = GptOss120b();
  ModelSpec full = m;
  full.sliding_window = 0;
  full.sliding_window_pattern = 0;
  // Without host time: a layer whose launches outlast its kernels saves
  // less than its kernels' time (host_ahead_test.cc).
  const HardwareProfile& hw = testing_models::H100WithoutHostTime();
  const ClusterSpec c = testing_models::Cluster(8, 8);
  const PlanSpec p = OssPlan(m, true);
  // What one windowed layer saves: the attention core forward and backward.
  const std::vector<int> w = testing_models::ExpectChunksSaveTheWindowedAttention(m, full, c, p, hw);
  for (int ch = 0; ch < p.num_chunks(); ++ch)
    EXPECT_EQ(w[ch], ch % 2 == 0 ? 5 : 4) << ch;  // 9 layers per chunk, alternating from layer 0
  // FLOPs: the windowed cores' share of the square.
  const double f = WindowTileFraction(4096, 128);
  const LayerOps l = TransformerLayerOps(full, p, 2);
  double core_flops = 0;
  for (const auto* list : {&l.forward, &l.backward})
    for (const Op& op : *list)
      if (op.kind == OpKind::kAttention) core_flops += op.flops;
  const double ranks = static_cast<double>(p.dp) * p.tp * p.cp;
  EXPECT_NEAR((StepFlops(full, p, false) - StepFlops(m, p, false)) /
                  (18 * core_flops * (1 - f) * p.num_microbatches * ranks),
              1.0, 1e-9);
  // An unfused core builds the whole masked score matrix: no saving.
  const PlanSpec u = OssPlan(m, false);
  EXPECT_DOUBLE_EQ(ComputePlanCosts(m, c, u, hw).chunks[0].fwd_compute,
                   ComputePlanCosts(full, c, u, hw).chunks[0].fwd_compute);
  // A window as long as the sequence changes nothing.
  PlanSpec shortseq = p;
  shortseq.seq_length = 128;
  EXPECT_DOUBLE_EQ(ComputePlanCosts(m, c, shortseq, hw).chunks[1].fwd_compute,
                   ComputePlanCosts(full, c, shortseq, hw).chunks[1].fwd_compute);
}

TEST(SlidingWindow, ContextParallelWithAWindowIsRefused) {
  const ModelSpec m = GptOss120b();
  PlanSpec p = OssPlan(m, true);
  p.dp = 8;
  p.cp = 2;
  Status s = Validate(p, m, "plan");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sliding-window"), std::string::npos) << s.message();
  p.seq_length = 128;  // the window covers the sequence: no window in effect
  EXPECT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  // The search counts such grids as rejected instead of failing on them
  // (long sequences are where it tries cp > 1).
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = 32768;
  auto e = EnumeratePlans(m, testing_models::Cluster(8, 8), k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_GT(e->grid_rejects["cp > 1 with sliding-window attention is not modeled"], 0);
  for (const PlanSpec& q : e->plans) EXPECT_EQ(q.cp, 1) << Describe(q);
  EXPECT_FALSE(e->plans.empty());
}


// The search prunes by a lower bound built from the same chunk costs: with
// windowed layers it must stay below every simulated step.
TEST(SlidingWindow, LowerBoundStaysBelowTheSimulation) {
  const ModelSpec m = GptOss120b();
  const HardwareProfile hw = LoadProfile("h100").value();
  const ClusterSpec c = testing_models::Cluster(8, 8);
  SearchConstraints k;
  k.global_batch = 512;
  k.seq_length = 4096;
  k.force_balanced_routing = true;
  auto e = EnumeratePlans(m, c, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_GT(e->plans.size(), 100u);
  int checked = 0;
  for (size_t i = 0; i < e->plans.size(); i += e->plans.size() / 100) {
    const PlanSpec& p = e->plans[i];
    auto pred = SimulatePlan(m, c, p, hw);
    ASSERT_TRUE(pred.ok()) << Describe(p) << ": " << pred.status().message();
    EXPECT_LE(StepTimeLowerBound(p, ComputePlanCosts(m, c, p, hw)), pred->step_time_s * (1 + 1e-9)) << Describe(p);
    ++checked;
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace dt
