// Llama 4's language model (HF llama4_text, issue 11's honest loading) and
// the chunked attention it needs (ModelSpec::window_chunked): Scout's
// parameter count term by term against the model card, which layers attend
// in chunks, the fused kernel's tiles a chunk visits, chunk costs and FLOPs
// that change by exactly the chunked layers' attention, and the refusals
// (irregular layouts, cp > 1); Maverick's dense layers between its MoE
// layers (ModelSpec::moe_layer_step).
// Also transformers 5's `rope_parameters`, read for every Llama-like type.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/json_fields.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/flops.h"
#include "planner/cost/layer_ops.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/plan_costs.h"
#include "planner/profile/profile.h"
#include "planner/search/enumerate.h"
#include "planner/spec/capabilities.h"
#include "planner/spec/hf_config.h"
#include "tests/planner/test_models.h"
#include "tests/planner/window_checks.h"

namespace dt {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/" + name;
}

json ScoutJson() { return ReadJsonFile(Fixture("llama4-scout-text.json")).value(); }

// dp 8 x tp (SP) x pp 4, experts over ep 8 with expert TP 1, fused attention.
PlanSpec GpuPlan(const ModelSpec& m, int tp, int seq) {
  PlanSpec p;
  p.dp = 8;
  p.tp = tp;
  p.sequence_parallel = true;
  p.pp = 4;
  p.ep = 8;
  p.etp = 1;
  p.seq_length = seq;
  p.num_microbatches = 8;
  p.zero_stage = 1;
  p.flash_attention = true;
  p.dropout = false;
  p.layers_per_chunk = EvenSplit(m.num_layers, 4);
  return p;
}

StatusOr<ModelSpec> FromJson(const json& j) { return ModelFromHfConfig(j, "config.json"); }

// meta-llama/Llama-4-Scout-17B-16E: "17B active, 109B total" on its model
// card, for the multimodal model. Its language model, term by term: GQA
// attention (40 q heads and 8 kv heads of 128), per layer a router of
// 16 x h, 16 routed experts and one shared expert, each a SwiGLU of 8192,
// untied embedding and head of 202,048 rows. dtplan prices use_qk_norm's
// weightless L2 norm as a q/k RMSNorm: 2 x 128 weights per layer counted
// that the model lacks. The text model is 1.1% under the card's total (the
// vision encoder and projector are the rest); active with the input
// embedding 17.17B.
TEST(Llama4, ScoutCountsItsArchitecture) {
  auto m = FromJson(ScoutJson());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->source_type, "llama4_text");
  EXPECT_EQ(m->num_experts, 16);
  EXPECT_EQ(m->moe_top_k, 1);
  EXPECT_EQ(m->moe_ffn_hidden, 8192);
  EXPECT_EQ(m->shared_ffn_hidden, 8192);
  EXPECT_EQ(m->first_dense_layers, 0);
  EXPECT_TRUE(m->qk_norm);
  EXPECT_TRUE(m->window_chunked);
  EXPECT_EQ(m->sliding_window, 8192);
  EXPECT_EQ(m->sliding_window_pattern, 4);
  for (int i = 0; i < m->num_layers; ++i) EXPECT_EQ(m->WindowedLayer(i), i % 4 != 3) << i;
  const int64_t h = 5120, v = 202048, f = 8192;
  const int64_t attention = h * 5120 + 2 * h * 1024 + 5120 * h + 2 * 128;
  const int64_t layer = attention + 2 * h + 16 * h + 17 * 3 * h * f;
  const int64_t total = 2 * v * h + 48 * layer + h;
  EXPECT_EQ(m->TotalParams(), total);
  EXPECT_NEAR(static_cast<double>(total), 109e9, 0.015 * 109e9);
  EXPECT_NEAR(static_cast<double>(m->ActiveParams()), 17e9, 0.02 * 17e9);
  EXPECT_FALSE(m->FamilyLayout());  // dtrun does not run it: chunked attention, qk norm, experts
}

// meta-llama/Llama-4-Maverick-17B-128E's language model: Scout's layers
// with 128 routed experts on every second layer (interleave_moe_layer_step
// 2: layers 1, 3, ..., 47) and dense SwiGLUs of intermediate_size_mlp
// (16384) between (built here from Scout's config with those fields). Its
// card: "17B active, 400B total" (the multimodal model).
TEST(Llama4, MaverickInterleavesDenseAndMoeLayers) {
  json j = ScoutJson();
  j["num_local_experts"] = 128;
  j["interleave_moe_layer_step"] = 2;
  json moe = json::array();
  for (int i = 1; i < 48; i += 2) moe.push_back(i);
  j["moe_layers"] = moe;
  auto m = FromJson(j);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->moe_layer_step, 2);
  EXPECT_EQ(m->ffn_hidden, 16384);
  EXPECT_EQ(m->moe_ffn_hidden, 8192);
  EXPECT_EQ(m->moe_layers(), 24);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(m->DenseLayer(i), i % 2 == 0) << i;
  const int64_t h = 5120, v = 202048;
  const int64_t attention = h * 5120 + 2 * h * 1024 + 5120 * h + 2 * 128 + 2 * h;
  const int64_t moe_layer = attention + 128 * h + 129 * 3 * h * 8192, dense_layer = attention + 3 * h * 16384;
  EXPECT_EQ(m->TotalParams(), 2 * v * h + 24 * moe_layer + 24 * dense_layer + h);
  EXPECT_NEAR(static_cast<double>(m->TotalParams()), 400e9, 0.01 * 400e9);
  EXPECT_NEAR(static_cast<double>(m->ActiveParams()), 17e9, 0.02 * 17e9);
  // Planned with the dense layers priced as dense: a stage's layers and
  // FLOPs split by layer kind, and the plan names the feature.
  const PlanSpec p = GpuPlan(*m, 8, 8192);
  ASSERT_TRUE(Validate(p, *m, "plan").ok()) << Validate(p, *m, "plan").message();
  ModelSpec all_moe = *m;
  all_moe.moe_layer_step = 1;
  EXPECT_LT(StepFlops(*m, p, false), StepFlops(all_moe, p, false));
  const std::vector<Feature> used = FeaturesUsed(*m, p);
  EXPECT_NE(std::find(used.begin(), used.end(), Feature::kDenseMoeLayers), used.end());
  // Exported to Megatron-LM as the per-layer --moe-layer-freq list, which
  // imports back to the same layer pattern (the model without its chunked
  // attention, which the Megatron export refuses).
  ModelSpec unchunked = *m;
  unchunked.sliding_window = unchunked.sliding_window_pattern = 0;
  unchunked.window_chunked = false;
  auto flags = MegatronArgs(unchunked, p, true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  std::vector<std::string> argv;
  for (const CliFlag& f : *flags) {
    argv.push_back(f.name);
    if (!f.value.empty()) argv.push_back(f.value);
  }
  const auto freq = std::find(argv.begin(), argv.end(), "--moe-layer-freq");
  ASSERT_NE(freq, argv.end());
  EXPECT_EQ(freq[1].substr(0, 8), "[0,1,0,1");
  auto job = ImportMegatron(argv, p.world(), "maverick");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->model.moe_layer_step, 2);
  EXPECT_EQ(job->model.first_dense_layers, 0);
  EXPECT_EQ(job->model.moe_layers(), 24);
  // A moe_layers list that is not the step's pattern is refused, named.
  j["moe_layers"] = json::array({1, 3, 5});
  auto r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'moe_layers'"), std::string::npos) << r.status().message();
  j["moe_layers"] = moe;
  j["interleave_moe_layer_step"] = 0;
  EXPECT_FALSE(FromJson(j).ok());
}

TEST(Llama4, LayoutKeysAreReadOrRefused) {
  json j = ScoutJson();
  j["moe_layers"] = json::array({1, 3, 5});
  EXPECT_FALSE(FromJson(j).ok());
  // no_rope_layers spelled out as the default pattern: the same model.
  j = ScoutJson();
  json rope = json::array();
  for (int i = 0; i < 48; ++i) rope.push_back((i + 1) % 4 != 0 ? 1 : 0);
  j["no_rope_layers"] = rope;
  auto same = FromJson(j);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->sliding_window_pattern, 4);
  // Another pattern is refused.
  rope[0] = 0;
  j["no_rope_layers"] = rope;
  auto r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'no_rope_layers'"), std::string::npos) << r.status().message();
  // layer_types as transformers writes them for Llama 4.
  j = ScoutJson();
  json types = json::array();
  for (int i = 0; i < 48; ++i) types.push_back(i % 4 != 3 ? "chunked_attention" : "full_attention");
  j["layer_types"] = types;
  same = FromJson(j);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->sliding_window_pattern, 4);
  EXPECT_TRUE(same->window_chunked);
  // "chunked_attention" on a type without chunks is not a window.
  json mistral = ReadJsonFile(Fixture("mistral-7b.json")).value();
  json mt = json::array();
  for (int i = 0; i < mistral["num_hidden_layers"].get<int>(); ++i) mt.push_back("chunked_attention");
  mistral["layer_types"] = mt;
  EXPECT_FALSE(FromJson(mistral).ok());
  // No chunk size: full causal attention on every layer.
  j = ScoutJson();
  j["attention_chunk_size"] = nullptr;
  same = FromJson(j);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->sliding_window, 0);
  EXPECT_FALSE(same->window_chunked);
}

TEST(Llama4, ChunkTileFractionCountsTheTilesAChunkVisits) {
  // 128 query tiles: causal 1 + ... + 128 = 8256; two chunks of 64 tiles,
  // each a causal triangle of 2080.
  EXPECT_DOUBLE_EQ(ChunkTileFraction(16384, 8192), 4160.0 / 8256.0);
  EXPECT_DOUBLE_EQ(ChunkTileFraction(8192, 8192), 1.0);
  EXPECT_DOUBLE_EQ(ChunkTileFraction(4096, 8192), 1.0);
  // A chunk of 1024 at 4096: tile i visits i % 8 + 1 tiles.
  double c = 0;
  for (int i = 0; i < 32; ++i) c += i % 8 + 1;
  EXPECT_DOUBLE_EQ(ChunkTileFraction(4096, 1024), c / 528.0);
  // A chunk visits fewer tiles than a sliding window of the same length
  // (which reaches back a full window from every query), never more.
  for (int chunk : {256, 1024, 2048}) EXPECT_LT(ChunkTileFraction(4096, chunk), WindowTileFraction(4096, chunk)) << chunk;
}

TEST(Llama4, ChunkedLayersSaveExactlyTheirAttentionAndCpIsRefused) {
  const ModelSpec m = FromJson(ScoutJson()).value();
  ModelSpec full = m;
  full.sliding_window = 0;
  full.sliding_window_pattern = 0;
  full.window_chunked = false;
  const PlanSpec p = GpuPlan(m, 2, 32768);
  ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
  const HardwareProfile hw = LoadProfile("h100").value();
  const ClusterSpec c = testing_models::Cluster(8, 8);
  for (int w : testing_models::ExpectChunksSaveTheWindowedAttention(m, full, c, p, hw))
    EXPECT_EQ(w, 9);  // 12 layers per stage, every 4th full
  EXPECT_LT(StepFlops(m, p, false), StepFlops(full, p, false));
  // Context parallelism over chunked layers is not modeled: refused, named.
  PlanSpec q = p;
  q.dp = 4;
  q.cp = 2;
  Status s = Validate(q, m, "plan");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("chunked attention"), std::string::npos) << s.message();
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = 32768;
  auto e = EnumeratePlans(m, c, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_GT(e->grid_rejects["cp > 1 with chunked attention is not modeled"], 0);
  for (const PlanSpec& x : e->plans) EXPECT_EQ(x.cp, 1) << Describe(x);
}

// transformers 5 writes rope_theta and the scaling into `rope_parameters`:
// accepted on every Llama-like type, with the same reading as before.
TEST(RopeParameters, TransformersFiveConfigsLoadAsBefore) {
  json old = ReadJsonFile(Fixture("qwen3-8b.json")).value();
  auto before = FromJson(old);
  ASSERT_TRUE(before.ok()) << before.status().message();
  json v5 = old;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  auto after = FromJson(v5);
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(after->TotalParams(), before->TotalParams());
  EXPECT_EQ(after->rope_theta, 1000000.0);
  EXPECT_FALSE(after->rope_scaled);
  v5["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "yarn"}, {"factor", 4.0}};
  after = FromJson(v5);
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_TRUE(after->rope_scaled);
  // One object per layer type (Gemma 3 under transformers 5).
  v5["rope_parameters"] = {{"full_attention", {{"rope_theta", 1000000.0}, {"rope_type", "linear"}}},
                           {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}};
  after = FromJson(v5);
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_TRUE(after->rope_scaled);
  v5["rope_parameters"] = 3;
  EXPECT_FALSE(FromJson(v5).ok());
}

}  // namespace
}  // namespace dt
