// DeepSeek-V2 / V3: multi-head latent attention (MLA), dense leading layers
// and shared experts, from their real HuggingFace configs
// (tests/planner/hf_configs/deepseek-v3.json, deepseek-v2-lite.json).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "planner/cost/flops.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/simulate.h"
#include "planner/lower/memory_params_for.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/param_count.h"
#include "planner/memory/stage_memory.h"
#include "planner/profile/profile.h"
#include "planner/spec/capabilities.h"
#include "planner/spec/hf_config.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/" + name;
}

ModelSpec Load(const std::string& name) {
  auto m = LoadModel(Fixture(name));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

// MLA weights of one layer from the DeepSeek-V2 paper's shapes (W_DQ, W_UQ
// or W_Q, W_DKV + W_KR, W_UK + W_UV, W_O, and the two latent RMSNorms).
int64_t MlaWeights(int64_t h, int64_t a, int64_t q_lora, int64_t kv_lora, int64_t nope, int64_t rope, int64_t v) {
  const int64_t q = q_lora > 0 ? h * q_lora + q_lora + q_lora * a * (nope + rope) : h * a * (nope + rope);
  return q + h * (kv_lora + rope) + kv_lora + kv_lora * a * (nope + v) + a * v * h;
}

// Published: DeepSeek-V3 technical report, "671B total parameters with 37B
// activated for each token" (the 14B multi-token-prediction module is not
// in the 671B); DeepSeek-V2 paper: V2-Lite 15.7B total, 2.4B activated.
// Activated counts exclude the input embedding (a lookup, not a matmul);
// published to two digits, so checked within 2.5% (ours: 36.62B, 2.451B;
// with the input embedding 37.55B and 2.66B).
TEST(Mla, DeepSeekParameterCountsMatchThePublishedTotals) {
  const ModelSpec v3 = Load("deepseek-v3.json");
  ASSERT_TRUE(v3.mla());
  EXPECT_EQ(v3.first_dense_layers, 3);
  EXPECT_EQ(v3.shared_ffn_hidden, 2048);
  EXPECT_EQ(v3.AttentionParams(), MlaWeights(7168, 128, 1536, 512, 128, 64, 128));
  EXPECT_NEAR(static_cast<double>(v3.TotalParams()), 671e9, 0.005 * 671e9);
  const double v3_active = static_cast<double>(v3.ActiveParams() - static_cast<int64_t>(v3.vocab) * v3.hidden);
  EXPECT_NEAR(v3_active, 37e9, 0.025 * 37e9);

  const ModelSpec lite = Load("deepseek-v2-lite.json");
  ASSERT_TRUE(lite.mla());
  EXPECT_EQ(lite.q_lora_rank, 0);  // null in the config: Q projected directly
  EXPECT_EQ(lite.first_dense_layers, 1);
  EXPECT_EQ(lite.shared_ffn_hidden, 2 * 1408);
  EXPECT_EQ(lite.AttentionParams(), MlaWeights(2048, 16, 0, 512, 128, 64, 128));
  EXPECT_NEAR(static_cast<double>(lite.TotalParams()), 15.7e9, 0.005 * 15.7e9);
  const double lite_active =
      static_cast<double>(lite.ActiveParams() - static_cast<int64_t>(lite.vocab) * lite.hidden);
  EXPECT_NEAR(lite_active, 2.4e9, 0.025 * 2.4e9);
}

// Kimi K2 (moonshotai/Kimi-K2-Instruct config.json, model_type kimi_k2: the
// DeepSeek-V3 architecture with 64 heads, 384 experts, one dense layer, no
// MTP module). Its card rounds to "1T total, 32B activated"; the K2
// technical report (arXiv 2507.20534) says 1.04T. Term by term the
// architecture is 1026.4B (the count below), 1.3% under the report's figure
// and within its rounding; activated without the input embedding 31.7B.
TEST(Mla, KimiK2IsDeepSeekV3ShapedAndCountsItsArchitecture) {
  const ModelSpec k2 = Load("kimi-k2.json");
  ASSERT_TRUE(k2.mla());
  EXPECT_EQ(k2.source_type, "kimi_k2");
  EXPECT_EQ(k2.first_dense_layers, 1);
  EXPECT_EQ(k2.num_experts, 384);
  EXPECT_EQ(k2.moe_top_k, 8);
  EXPECT_EQ(k2.shared_ffn_hidden, 2048);
  EXPECT_EQ(k2.mtp_layers, 0);
  const int64_t h = 7168, v = 163840, layers = 61, moe_layers = 60;
  const int64_t attention = MlaWeights(h, 64, 1536, 512, 128, 64, 128);
  EXPECT_EQ(k2.AttentionParams(), attention);
  const int64_t expert = 3 * h * 2048;
  const int64_t total = 2 * v * h + layers * (attention + 2 * h) + 3 * h * 18432 +
                        moe_layers * ((384 + 1) * expert + 384 * h) + h;
  EXPECT_EQ(k2.TotalParams(), total);
  EXPECT_NEAR(static_cast<double>(total), 1.04e12, 0.02 * 1.04e12);
  const double active = static_cast<double>(k2.ActiveParams() - v * h);
  EXPECT_NEAR(active, 32e9, 0.025 * 32e9);
}

TEST(Mla, LayerFlopsFollowTheProjectionsAndTheWiderQkHeads) {
  const ModelSpec m = Load("deepseek-v2-lite.json");
  PlanSpec p;
  p.micro_batch = 1;
  p.seq_length = 4096;
  p.layers_per_chunk = EvenSplit(m.num_layers, 1);
  const LayerOps ops = TransformerLayerOps(DenseLayerModel(m), p, 2);
  double gemm = 0, core = 0;
  for (const Op& op : ops.forward) {
    if (op.kind == OpKind::kGemm) gemm += op.flops;
    if (op.kind == OpKind::kAttention) core += op.flops;
  }
  const double T = p.seq_length;
  // Every weight matrix once per token (2 FLOPs per MAC): attention without
  // the two norm vectors (V2-Lite has no q norm), plus the dense SwiGLU MLP.
  const double attention_matrices = static_cast<double>(m.AttentionParams() - m.kv_lora_rank);
  EXPECT_DOUBLE_EQ(gemm, 2 * T * (attention_matrices + 3.0 * m.hidden * m.ffn_hidden));
  // QK^T over 192-wide heads, AV over 128-wide ones (the full square).
  EXPECT_DOUBLE_EQ(core, 2.0 * m.heads * T * T * (192 + 128));
  // Tensor parallelism splits the up-projections, not the down-projections.
  PlanSpec t2 = p;
  t2.tp = 2;
  double down = 0, down_t2 = 0;
  for (const Op& op : ops.forward)
    if (std::string(op.name) == "mla_kv_down") down = op.flops;
  for (const Op& op : TransformerLayerOps(DenseLayerModel(m), t2, 2).forward)
    if (std::string(op.name) == "mla_kv_down") down_t2 = op.flops;
  EXPECT_GT(down, 0);
  EXPECT_DOUBLE_EQ(down_t2, down);
}

TEST(Mla, DenseLeadingLayersArePricedAndCountedAsDense) {
  const ModelSpec m = Load("deepseek-v3.json");
  PlanSpec p;
  p.pp = 4;
  p.dp = 8;
  p.ep = 8;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = 4096;
  p.zero_stage = 1;
  p.layers_per_chunk = {16, 15, 15, 15};
  EXPECT_EQ(DenseLayersOnStage(m, p, 0), 3);
  EXPECT_EQ(DenseLayersOnStage(m, p, 1), 0);
  // With ep = 1 and tp = 1 the stages hold the whole model once, plus its
  // multi-token-prediction module and (pp > 1, untied) the last stage's
  // copy of the embedding that module looks tokens up in.
  PlanSpec one = p;
  one.ep = 1;
  int64_t sum = 0;
  for (int s = 0; s < one.pp; ++s) sum += StageParamsPerRank(m, one, s);
  ASSERT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(sum, m.TotalParams() + m.MtpParams() + static_cast<int64_t>(m.vocab) * m.hidden);
  // Step FLOPs: 3 dense + 58 MoE layers, not 61 of either.
  ModelSpec all_moe = m;
  all_moe.first_dense_layers = 0;
  const double with_dense = StepFlops(m, p, false), without = StepFlops(all_moe, p, false);
  const double per_dense = [&] {
    const LayerOps d = TransformerLayerOps(DenseLayerModel(m), p, 2), e = TransformerLayerOps(m, p, 2);
    return SumFlops(d.forward) + SumFlops(d.backward) - SumFlops(e.forward) - SumFlops(e.backward);
  }();
  EXPECT_NEAR(with_dense - without, 3 * per_dense * p.num_microbatches * p.dp, 1e-6 * with_dense);
  // The plan simulates; stage 0 (three dense layers of 18432-wide MLPs, no
  // experts) holds a different parameter count than stage 1.
  ClusterSpec c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  auto pred = SimulatePlan(m, c, p, LoadProfile("h100").value());
  ASSERT_TRUE(pred.ok()) << pred.status().message();
  EXPECT_GT(pred->step_time_s, 0);
  EXPECT_NE(StageParamsPerRank(m, p, 0), StageParamsPerRank(m, p, 1));
}

// A stage of dense leading layers stores what a dense layer stores, and
// caches FP8 copies of a dense layer's linear weights: DeepSeek-V2-Lite's
// first layer has a 10944-wide MLP where the others route 6 of 64 experts
// of width 1408 plus two shared ones (they were all counted as MoE layers).
TEST(Mla, DenseLeadingLayersHoldDenseLayerMemory) {
  const ModelSpec m = Load("deepseek-v2-lite.json");
  const ModelSpec dense = DenseLayerModel(m);
  PlanSpec p;
  p.dp = 8;
  p.pp = 2;
  p.ep = 8;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = 4096;
  p.zero_stage = 1;
  p.precision = Precision::kFp8;
  p.layers_per_chunk = {1, 26};
  const MemoryParams mp = MemoryParamsFor(LoadProfile("h100").value(), p);
  const int e = mp.activation_bytes;
  ASSERT_NE(ActivationBytesPerLayer(dense, p, e), ActivationBytesPerLayer(m, p, e));
  const StageMemory s0 = EstimateStageMemory(m, p, mp, 0, 2);
  EXPECT_DOUBLE_EQ(s0.activations, 2 * ActivationBytesPerLayer(dense, p, e));
  // Weights: the bf16 parameters plus the FP8 copy and transpose of the one
  // dense layer's linear weights (the stage's parameters are ZeRO-1: whole).
  EXPECT_DOUBLE_EQ(s0.weights, static_cast<double>(StageParamsPerRank(m, p, 0)) * mp.weight_bytes +
                                   2.0 * static_cast<double>(LinearWeightParamsPerRank(dense, p)));
  // The MoE stage is unchanged: 26 MoE layers' activations (plus the head).
  const StageMemory s1 = EstimateStageMemory(m, p, mp, 1, 1);
  EXPECT_GE(s1.activations, 26 * ActivationBytesPerLayer(m, p, e));
}

// The search's memory check looks at a few stages only (PredictMemory); the
// stages after the dense leading layers are the heaviest, so it must see
// them. Every plan of DeepSeek-V3's search space shape, fast path against
// all stages (SimulatePlan): the same peak and the same fit verdict.
TEST(Mla, FastMemoryCheckSeesTheStagesAfterTheDenseLayers) {
  const ModelSpec v3 = Load("deepseek-v3.json");
  const HardwareProfile hw = LoadProfile("h100").value();
  ClusterSpec c;
  c.nodes = 128;
  c.gpus_per_node = 8;
  int checked = 0;
  for (int pp : {4, 8, 16})
    for (int vpp : {1, 2, 4})
      for (int etp : {0, 1}) {
        if (pp * vpp > v3.num_layers) continue;
        PlanSpec p;
        p.tp = 2;
        p.pp = pp;
        p.dp = 1024 / (2 * pp);
        p.ep = 8;
        p.etp = etp;
        p.vpp = vpp;
        p.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
        p.sequence_parallel = true;
        p.zero_stage = 1;
        p.recompute = Recompute::kFull;
        p.micro_batch = 1;
        p.num_microbatches = 128;
        p.seq_length = 4096;
        p.layers_per_chunk = EvenSplit(v3.num_layers, pp * vpp);
        ASSERT_TRUE(Validate(p, v3, "plan").ok()) << Validate(p, v3, "plan").message();
        const Prediction fast = PredictMemory(v3, p, hw);
        auto full = SimulatePlan(v3, c, p, hw);
        ASSERT_TRUE(full.ok()) << full.status().message();
        EXPECT_DOUBLE_EQ(fast.peak_memory_bytes, full->peak_memory_bytes) << Describe(p);
        EXPECT_EQ(fast.fits, full->fits) << Describe(p);
        ++checked;
      }
  EXPECT_EQ(checked, 16);
}

TEST(Mla, UnmodeledKeysAreRefusedByName) {
  json j = ReadJsonFile(Fixture("deepseek-v3.json")).value();
  j["moe_layer_freq"] = 2;
  Status s = ModelFromJson(j, "config.json").status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("moe_layer_freq"), std::string::npos) << s.message();
  j = ReadJsonFile(Fixture("deepseek-v3.json")).value();
  j["index_topk"] = 2048;  // DeepSeek-V3.2's sparse attention indexer
  s = ModelFromJson(j, "config.json").status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("index_topk"), std::string::npos) << s.message();
  // Routing-policy keys are read (they choose experts, not how many).
  j = ReadJsonFile(Fixture("deepseek-v3.json")).value();
  j["topk_method"] = "noaux_tc";
  j["scoring_func"] = "sigmoid";
  j["routed_scaling_factor"] = 2.5;
  j["num_nextn_predict_layers"] = 1;
  auto m = ModelFromJson(j, "config.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->TotalParams(), Load("deepseek-v3.json").TotalParams());  // MTP module not counted
}

TEST(Mla, OwnSchemaRoundTrips) {
  const ModelSpec m = Load("deepseek-v3.json");
  auto back = ModelFromJson(ToJson(m), "model");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->TotalParams(), m.TotalParams());
  EXPECT_EQ(back->ActiveParams(), m.ActiveParams());
  EXPECT_EQ(back->first_dense_layers, 3);
  EXPECT_EQ(back->v_head_dim, 128);
}

// dtrun has no latent attention: an MLA model is a feature it lacks, even
// a tiny one whose heads x (qk_nope + qk_rope) happens to equal the hidden
// size (its other layout fields then look like plain attention; before
// 2026-11-28 dtplan emitted a CPU plan for it and dtrun ran standard
// attention: another model than the plan priced).
TEST(Mla, IsAFeatureDtrunLacks) {
  json j = ReadJsonFile(Fixture("deepseek-v3.json")).value();
  j.erase("rope_scaling");
  const json tiny{{"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                  {"num_key_value_heads", 4}, {"q_lora_rank", 32}, {"kv_lora_rank", 16},
                  {"qk_nope_head_dim", 12}, {"qk_rope_head_dim", 4}, {"v_head_dim", 16},
                  {"n_routed_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                  {"intermediate_size", 96}, {"first_k_dense_replace", 0},
                  {"num_nextn_predict_layers", 0}, {"vocab_size", 256},
                  {"max_position_embeddings", 64}, {"n_group", 1}, {"topk_group", 1}};
  for (auto it = tiny.begin(); it != tiny.end(); ++it) j[it.key()] = it.value();
  auto m = ModelFromHfConfig(j, "tiny-mla.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(m->mla());
  EXPECT_TRUE(m->FamilyLayout());  // nothing else marks it as a variant
  const PlanSpec p = testing_models::TinyCpuPlan(*m, 2);
  const std::vector<Feature> missing = MissingFeatures(*m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kLatentAttention), missing.end());
  const std::vector<Feature> dense = MissingFeatures(LoadModel(std::string(DT_SOURCE_DIR) +
                                                               "/examples/models/moe-shared-tiny.json").value(),
                                                     p, RuntimeDevice::kCpu);
  EXPECT_EQ(std::find(dense.begin(), dense.end(), Feature::kLatentAttention), dense.end());
}

}  // namespace
}  // namespace dt
