// HuggingFace config.json loading (planner/spec/hf_config.h): real configs
// (tests/planner/hf_configs, copied from the models' hub pages) give their
// published parameter totals, and what is not modeled is refused by name.
#include "planner/spec/hf_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "planner/memory/param_count.h"
#include "planner/frameworks/framework.h"
#include "planner/spec/capabilities.h"

namespace dt {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/" + name;
}

struct Published {
  const char* file;
  double total;       // published parameter count
  const char* source;
};

// Totals as published on the models' pages (safetensors metadata) or papers.
// Falcon-7B: its page lists 7.22B because the checkpoint stores the tied LM
// head as a second tensor; the model's unique parameters are 7.22B minus
// 65024 x 4544 = 6.92B (transformers ties lm_head to the word embeddings).
const Published kPublished[] = {
    {"gpt2.json", 124439808, "HF gpt2 (124M)"},
    {"opt-125m.json", 125239296, "HF facebook/opt-125m (125M)"},
    {"mistral-7b.json", 7241732096, "HF mistralai/Mistral-7B-v0.1 (7.24B)"},
    {"qwen2-7b.json", 7615616512, "HF Qwen/Qwen2-7B (7.62B)"},
    {"phi3-mini-4k.json", 3821079552, "HF microsoft/Phi-3-mini-4k-instruct (3.82B)"},
    {"gemma-7b.json", 8537680896, "HF google/gemma-7b (8.54B)"},
    {"gemma2-9b.json", 9241705984, "HF google/gemma-2-9b (9.24B)"},
    {"falcon-7b.json", 7217189760.0 - 65024.0 * 4544, "HF tiiuae/falcon-7b (7.22B with the tied head twice)"},
};

TEST(HfConfig, ParameterCountsMatchPublishedTotals) {
  for (const Published& p : kPublished) {
    auto m = LoadModel(Fixture(p.file));
    ASSERT_TRUE(m.ok()) << p.file << ": " << m.status().message();
    const double got = static_cast<double>(m->TotalParams());
    EXPECT_LT(std::abs(got / p.total - 1.0), 0.005) << p.file << ": " << got << " vs " << p.total << " (" << p.source
                                                     << ")";
    // The per-rank count of the memory model agrees at tp = pp = 1.
    PlanSpec plan;
    plan.seq_length = m->seq_length;
    plan.layers_per_chunk = {m->num_layers};
    EXPECT_EQ(StageParamsPerRank(*m, plan, 0), m->TotalParams()) << p.file;
  }
  auto llama = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/llama3-8b.json");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->TotalParams(), 8030261248LL);  // Meta Llama-3-8B
}

TEST(HfConfig, FieldByFieldMapping) {
  auto gpt2 = LoadModel(Fixture("gpt2.json"));
  ASSERT_TRUE(gpt2.ok()) << gpt2.status().message();
  EXPECT_EQ(gpt2->family, ModelFamily::kGpt);
  EXPECT_EQ(gpt2->num_layers, 12);
  EXPECT_EQ(gpt2->ffn_hidden, 3072);  // n_inner absent: 4 * n_embd
  EXPECT_TRUE(gpt2->FamilyLayout());  // exactly the runtime's GPT
  EXPECT_TRUE(gpt2->uses_dropout());   // resid/embd/attn_pdrop 0.1
  {
    // All dropout rates 0: the model trains without dropout (no masks priced).
    json j = ReadJsonFile(Fixture("gpt2.json")).value();
    for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) j[key] = 0.0;
    auto nodrop = ModelFromHfConfig(j, "gpt2 without dropout");
    ASSERT_TRUE(nodrop.ok()) << nodrop.status().message();
    EXPECT_FALSE(nodrop->uses_dropout());
    EXPECT_TRUE(nodrop->FamilyLayout());
    EXPECT_EQ(nodrop->TotalParams(), gpt2->TotalParams());
    j["attn_pdrop"] = 1.5;
    EXPECT_FALSE(ModelFromHfConfig(j, "gpt2 bad rate").ok());
  }
  auto opt = LoadModel(Fixture("opt-125m.json"));  // dropout 0.1, attention_dropout 0: priced with dropout
  ASSERT_TRUE(opt.ok());
  EXPECT_TRUE(opt->uses_dropout());
  auto falcon = LoadModel(Fixture("falcon-7b.json"));
  ASSERT_TRUE(falcon.ok());
  EXPECT_EQ(falcon->kv_heads, 1);  // multi_query
  EXPECT_EQ(falcon->norms_per_layer, 1);
  EXPECT_FALSE(falcon->linear_bias());
  EXPECT_FALSE(falcon->learned_positions());
  EXPECT_FALSE(falcon->FamilyLayout());
  auto gemma = LoadModel(Fixture("gemma-7b.json"));
  ASSERT_TRUE(gemma.ok());
  EXPECT_EQ(gemma->head_dim(), 256);
  EXPECT_EQ(gemma->q_dim(), 4096);  // != hidden 3072
  EXPECT_TRUE(gemma->tied_embeddings);
  auto mistral = LoadModel(Fixture("mistral-7b.json"));
  ASSERT_TRUE(mistral.ok());
  EXPECT_EQ(mistral->seq_length, 8192);  // default capped at 8192; its 4096-key window is modeled
  EXPECT_EQ(mistral->sliding_window, 4096);
  auto qwen = LoadModel(Fixture("qwen2-7b.json"));
  ASSERT_TRUE(qwen.ok());
  EXPECT_TRUE(qwen->qkv_bias);
  EXPECT_EQ(qwen->sliding_window, 0);  // use_sliding_window: false
}

// Qwen3 dense and Gemma 3: the model cards give totals and non-embedding
// counts (rounded: Qwen3-8B 8.2B / 6.95B, Qwen3-0.6B 0.44B non-embedding;
// Gemma 3 technical report, Table 1: 1B = 302M embedding + 698M other).
TEST(HfConfig, Qwen3AndGemma3MatchTheirModelCards) {
  struct Card {
    const char* file;
    double total, non_embedding;  // 0: not published
  };
  for (const Card& c : {Card{"qwen3-8b.json", 8.2e9, 6.95e9}, Card{"qwen3-0.6b.json", 0, 0.44e9},
                        Card{"gemma3-1b.json", 1.0e9, 698e6}}) {
    auto m = LoadModel(Fixture(c.file));
    ASSERT_TRUE(m.ok()) << c.file << ": " << m.status().message();
    const double total = static_cast<double>(m->TotalParams());
    const double embedding = static_cast<double>(m->vocab) * m->hidden * (m->tied_embeddings ? 1 : 2);
    if (c.total > 0) {
      EXPECT_LT(std::abs(total / c.total - 1), 0.005) << c.file << ": " << total;
    }
    EXPECT_LT(std::abs((total - embedding) / c.non_embedding - 1), 0.005) << c.file << ": " << total - embedding;
    EXPECT_TRUE(m->qk_norm) << c.file;
  }
  auto gemma3 = LoadModel(Fixture("gemma3-1b.json"));
  ASSERT_TRUE(gemma3.ok());
  EXPECT_EQ(gemma3->norms_per_layer, 4);
  EXPECT_EQ(gemma3->q_dim(), 1024);  // 4 heads of 256, hidden 1152
  EXPECT_EQ(gemma3->sliding_window, 512);
  // sliding_window_pattern 6: layers 5, 11, 17 and 23 attend globally.
  for (int i = 0; i < gemma3->num_layers; ++i) EXPECT_EQ(gemma3->WindowedLayer(i), i % 6 != 5) << i;
  // A multimodal wrapper is refused with the way out (its text_config).
  json mm = {{"model_type", "gemma3"}, {"text_config", ReadJsonFile(Fixture("gemma3-1b.json")).value()},
             {"vision_config", {{"hidden_size", 1152}}}};
  Status s = ModelFromJson(mm, "config.json").status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("text_config"), std::string::npos) << s.message();
}

// GLM-4.5 and GLM-4.5-Air (zai-org config.json): DeepSeek-V3's expert layout
// (dense leading layers, one shared expert, an MTP module) over grouped-
// query attention of 96 heads of 128 with Q/K/V biases and half-rotary
// heads. The counts below are the architecture's, term by term; the model
// cards round (Air: 106B total, 12B active; GLM-4.5: 355B, 32B) without
// saying whether embeddings or the MTP module are in: dtplan's totals are
// within 1% of theirs and the active counts without embeddings within 2%.
TEST(HfConfig, Glm45CountsItsArchitecture) {
  struct Glm {
    const char* file;
    int64_t h, layers, dense, ffn, moe_ffn, experts;
    bool qk_norm;
    double card_total, card_active;
  };
  for (const Glm& g : {Glm{"glm-4.5-air.json", 4096, 46, 1, 10944, 1408, 128, false, 106e9, 12e9},
                       Glm{"glm-4.5.json", 5120, 92, 3, 12288, 1536, 160, true, 355e9, 32e9}}) {
    auto m = LoadModel(Fixture(g.file));
    ASSERT_TRUE(m.ok()) << g.file << ": " << m.status().message();
    EXPECT_EQ(m->q_dim(), 96 * 128) << g.file;
    EXPECT_TRUE(m->qkv_bias) << g.file;
    EXPECT_EQ(m->qk_norm, g.qk_norm) << g.file;
    EXPECT_EQ(m->rotary_fraction, 0.5) << g.file;
    EXPECT_EQ(m->first_dense_layers, g.dense) << g.file;
    EXPECT_EQ(m->mtp_layers, 1) << g.file;
    const int64_t h = g.h, v = 151552;
    const int64_t attention = h * 12288 + 12288 + 2 * (h * 1024 + 1024) + 12288 * h + (g.qk_norm ? 256 : 0);
    const int64_t expert = 3 * h * g.moe_ffn;
    const int64_t moe_mlp = (g.experts + 1) * expert + g.experts * h;  // routed + shared + router
    const int64_t total = 2 * v * h + g.layers * (attention + 2 * h) + g.dense * 3 * h * g.ffn +
                          (g.layers - g.dense) * moe_mlp + h;
    EXPECT_EQ(m->TotalParams(), total) << g.file;
    EXPECT_LT(std::abs(static_cast<double>(total) / g.card_total - 1), 0.01) << g.file;
    const double active = static_cast<double>(m->ActiveParams() - 2 * v * h);
    EXPECT_LT(std::abs(active / g.card_active - 1), 0.02) << g.file << ": " << active;
  }
}

// OLMo 2 and OLMoE (allenai config.json): the Llama layout with norms after
// the blocks and an RMSNorm over the whole q and k projections, which dtplan
// prices per head (2 x head_dim weights per layer where the models have
// q_dim + kv_dim). The architecture's own totals, term by term: OLMo-2-7B
// 7,298,617,344 (32 layers of 4096, MLP 11008, 100352 rows untied); OLMoE
// 6,919,161,856 (16 layers of 2048, 64 experts of 1024, top 8; its paper:
// "7B total, 1B active"). dtplan's counts differ by the norm weights only.
TEST(HfConfig, OlmoCountsItsArchitectureBarTheQkNormWidth) {
  struct Olmo {
    const char* file;
    int64_t h, layers, ffn, experts, top_k, vocab;
    double total;
  };
  for (const Olmo& o : {Olmo{"olmo2-7b.json", 4096, 32, 11008, 0, 0, 100352, 7298617344.0},
                        Olmo{"olmoe-1b-7b.json", 2048, 16, 1024, 64, 8, 50304, 6919161856.0}}) {
    auto m = LoadModel(Fixture(o.file));
    ASSERT_TRUE(m.ok()) << o.file << ": " << m.status().message();
    EXPECT_TRUE(m->qk_norm) << o.file;
    EXPECT_EQ(m->num_experts, o.experts) << o.file;
    const int64_t h = o.h, mlp = 3 * h * o.ffn;
    const int64_t attention = 4 * h * h, norms = 2 * h;
    const int64_t layer = attention + norms + (o.experts > 0 ? o.experts * h + o.experts * mlp : mlp);
    const int64_t exact = 2 * o.vocab * h + o.layers * (layer + 2 * h) + h;  // + full-width q and k norms
    EXPECT_EQ(static_cast<double>(exact), o.total) << o.file;
    EXPECT_EQ(m->TotalParams(), exact - o.layers * (2 * h - 2 * 128)) << o.file;  // head_dim 128 in both
    EXPECT_NEAR(static_cast<double>(m->TotalParams()), o.total, 1e-4 * o.total) << o.file;
  }
  const ModelSpec olmoe = LoadModel(Fixture("olmoe-1b-7b.json")).value();
  EXPECT_NEAR(static_cast<double>(olmoe.ActiveParams()), 1.3e9, 0.025 * 1.3e9);
}

// Phi-3.5-MoE (microsoft/Phi-3.5-MoE-instruct config.json; the fixture keeps
// every key of the hub's file, with rope_scaling's 64-entry long and short
// factor arrays and mscales left out: they change no size or cost). Mixtral's
// layout over 16 experts of 6400, top 2, with LayerNorms and biases on q, k,
// v, o and the LM head. The architecture's total, term by term, is
// 41,873,153,344 (Microsoft: "42B", the hub "41.9B"; 6.6B active); dtplan
// counts it without the o, norm and head biases (429,376 weights).
TEST(HfConfig, PhiMoeCountsItsArchitectureBarThreeBiases) {
  auto m = LoadModel(Fixture("phi3.5-moe.json"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->num_experts, 16);
  EXPECT_EQ(m->moe_top_k, 2);
  EXPECT_EQ(m->moe_ffn_hidden, 6400);
  EXPECT_TRUE(m->qkv_bias);
  EXPECT_FALSE(m->tied_embeddings);
  const int64_t h = 4096, kv = 1024, v = 32064, layers = 32, expert = 3 * h * 6400;
  const int64_t attention = h * h + h + 2 * (h * kv + kv) + h * h + h;  // q, k, v, o with biases
  const int64_t norms = 2 * 2 * h;                                      // two LayerNorms, weight and bias
  const int64_t layer = attention + norms + 16 * h + 16 * expert;       // router (no bias) + experts
  const int64_t exact = v * h + layers * layer + 2 * h + v * h + v;      // final LayerNorm, biased head
  EXPECT_EQ(exact, 41873153344);
  const int64_t uncounted = layers * h + layers * 2 * h + h + v;  // o biases, norm biases, head bias
  EXPECT_EQ(uncounted, 429376);
  EXPECT_EQ(m->TotalParams(), exact - uncounted);
  EXPECT_NEAR(static_cast<double>(m->TotalParams()), 41.9e9, 0.005 * 41.9e9);
  EXPECT_NEAR(static_cast<double>(m->ActiveParams()), 6.6e9, 0.01 * 6.6e9);
  // dtrun's Llama layer has RMSNorms: a model variant it does not run.
  PlanSpec p;
  p.seq_length = 4096;
  p.layers_per_chunk = {m->num_layers};
  const std::vector<Feature> used = FeaturesUsed(*m, p);
  EXPECT_NE(std::find(used.begin(), used.end(), Feature::kModelVariant), used.end());
  // Megatron-LM's flags cannot say it: --add-bias-linear would bias the experts too.
  const Status mg = CheckExpressible(Framework::kMegatron, *m, p);
  EXPECT_NE(mg.message().find("no Phi-3.5-MoE layout"), std::string::npos) << mg.message();
  m->qkv_bias = false;  // without attention_bias still a variant
  const std::vector<Feature> used2 = FeaturesUsed(*m, p);
  EXPECT_NE(std::find(used2.begin(), used2.end(), Feature::kModelVariant), used2.end());
}

// SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config.json): Llama's layout with
// GQA (16 heads, 4 KV heads), tied embeddings and RoPE left out of every
// fourth layer (no_rope_layers), which changes no size. Term by term
// 3,075,098,624 weights (the hub: 3.08B); a model variant for dtrun, which
// rotates every layer. A no_rope_layers list of the wrong length is refused.
TEST(HfConfig, SmolLM3CountsItsArchitecture) {
  auto m = LoadModel(Fixture("smollm3-3b.json"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->tied_embeddings);
  EXPECT_EQ(m->kv_heads, 4);
  EXPECT_EQ(m->sliding_window, 0);
  const int64_t h = 2048, kv = 512, v = 128256, layers = 36;
  const int64_t layer = h * h + 2 * h * kv + h * h + 3 * h * 11008 + 2 * h;
  EXPECT_EQ(m->TotalParams(), v * h + layers * layer + h);
  EXPECT_EQ(m->TotalParams(), 3075098624);
  PlanSpec p;
  p.seq_length = 4096;
  p.layers_per_chunk = {m->num_layers};
  const std::vector<Feature> used = FeaturesUsed(*m, p);
  EXPECT_NE(std::find(used.begin(), used.end(), Feature::kModelVariant), used.end());
  json j = ReadJsonFile(Fixture("smollm3-3b.json")).value();
  j["no_rope_layers"].erase(j["no_rope_layers"].begin());
  const Status s = ModelFromJson(j, "config.json").status();
  EXPECT_NE(s.message().find("'no_rope_layers' has 35 entries for 36 layers"), std::string::npos) << s.message();
}

Status LoadJson(const json& j) { return ModelFromJson(j, "config.json").status(); }

TEST(HfConfig, ExpertKeysOnDenseTypesAreRefusedNotShrunk) {
  // MoE types are mapped (tests/planner/moe_test.cc, mla_test.cc); expert
  // keys on a dense model_type are refused.
  json j = ReadJsonFile(Fixture("mistral-7b.json")).value();
  j["num_local_experts"] = 8;
  Status s = LoadJson(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("num_local_experts"), std::string::npos) << s.message();
}

TEST(HfConfig, UnknownTypesAndKeysAreRefusedByName) {
  json j = ReadJsonFile(Fixture("mistral-7b.json")).value();
  j["model_type"] = "mamba";
  Status s = LoadJson(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'mamba' is not supported"), std::string::npos) << s.message();
  for (const std::string& t : SupportedHfTypes()) EXPECT_NE(s.message().find(t), std::string::npos) << t;

  j = ReadJsonFile(Fixture("mistral-7b.json")).value();
  j["num_extra_layers"] = 4;
  s = LoadJson(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'num_extra_layers'"), std::string::npos) << s.message();

  j = ReadJsonFile(Fixture("falcon-7b.json")).value();
  j["alibi"] = true;
  s = LoadJson(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("alibi"), std::string::npos) << s.message();

  j = ReadJsonFile(Fixture("mistral-7b.json")).value();
  j["quantization_config"] = {{"bits", 4}};
  EXPECT_FALSE(LoadJson(j).ok());
  j = ReadJsonFile(Fixture("gpt2.json")).value();
  j.erase("model_type");
  EXPECT_FALSE(LoadJson(j).ok());
}

TEST(HfConfig, LayoutSurvivesPlanFileRoundTrip) {
  for (const char* f : {"gemma2-9b.json", "falcon-7b.json", "opt-125m.json", "qwen2-7b.json", "qwen3-8b.json",
                        "gemma3-1b.json"}) {
    auto m = LoadModel(Fixture(f));
    ASSERT_TRUE(m.ok()) << f;
    auto back = ModelFromJson(ToJson(*m), "round trip");
    ASSERT_TRUE(back.ok()) << f << ": " << back.status().message();
    EXPECT_EQ(back->TotalParams(), m->TotalParams()) << f;
    EXPECT_EQ(ToJson(*back), ToJson(*m)) << f;
  }
}

}  // namespace
}  // namespace dt
