#include <gtest/gtest.h>

#include "planner/spec/capabilities.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"
#include "planner/spec/rank_grid.h"

namespace dt {
namespace {

TEST(RankGrid, TpInnermostPpOutermost) {
  auto g = RankGrid::Create(/*tp=*/4, /*cp=*/1, /*dp=*/2, /*pp=*/2);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->world(), 16);
  EXPECT_EQ(g->Group(5, Dim::kTp), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g->Group(5, Dim::kDp), (std::vector<int>{1, 5}));
  EXPECT_EQ(g->Group(5, Dim::kPp), (std::vector<int>{5, 13}));
  for (int r = 0; r < 16; ++r) EXPECT_EQ(g->RankOf(g->CoordOf(r)), r);
  EXPECT_FALSE(RankGrid::Create(1, 1, 1, 1, "tp-dp-pp").ok());
  EXPECT_FALSE(RankGrid::Create(1, 1, 1, 1, "tp-tp-dp-pp").ok());
}

TEST(ModelSpec, HuggingFaceLlamaConfig) {
  json hf = {{"model_type", "llama"},        {"hidden_size", 4096},
             {"num_hidden_layers", 32},      {"num_attention_heads", 32},
             {"num_key_value_heads", 8},     {"intermediate_size", 14336},
             {"vocab_size", 128256},         {"max_position_embeddings", 8192},
             {"tie_word_embeddings", false}};
  auto m = ModelFromJson(hf, "config.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->family, ModelFamily::kLlama);
  EXPECT_EQ(m->kv_heads, 8);
  // Llama-3 8B has 8.03e9 parameters (Meta's model card).
  EXPECT_NEAR(m->TotalParams() / 1e9, 8.03, 0.01);
  EXPECT_EQ(m->rope_theta, 10000.0);  // defaults
  EXPECT_EQ(m->rms_norm_eps, 1e-5);
  // The runtime's RoPE base and RMSNorm epsilon: read from HF, kept through our schema.
  hf["rope_theta"] = 500000.0;
  hf["rms_norm_eps"] = 1e-6;
  auto r = ModelFromJson(hf, "config.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rope_theta, 500000.0);
  EXPECT_EQ(r->rms_norm_eps, 1e-6);
  auto back = ModelFromJson(ToJson(*r), "plan model");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->rope_theta, 500000.0);
  EXPECT_EQ(back->rms_norm_eps, 1e-6);
  // rope_scaling (Llama-3.1): priced the same, but not executed by the runtime's plain RoPE.
  EXPECT_FALSE(back->rope_scaled);
  hf["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  auto scaled = ModelFromJson(hf, "config.json");
  ASSERT_TRUE(scaled.ok()) << scaled.status().message();
  EXPECT_TRUE(scaled->rope_scaled);
  EXPECT_EQ(scaled->TotalParams(), r->TotalParams());
  EXPECT_TRUE(ModelFromJson(ToJson(*scaled), "plan model")->rope_scaled);
  PlanSpec p;
  p.seq_length = 64;
  p.layers_per_chunk = {scaled->num_layers};
  p.flash_attention = false;
  p.dropout = false;
  EXPECT_TRUE(CheckExecutable(*r, p, RuntimeDevice::kCpu).ok()) << CheckExecutable(*r, p, RuntimeDevice::kCpu).message();
  EXPECT_FALSE(CheckExecutable(*scaled, p, RuntimeDevice::kCpu).ok());
  hf["rope_scaling"] = nullptr;  // HF writes null for "none"
  EXPECT_FALSE(ModelFromJson(hf, "config.json")->rope_scaled);
  hf["rope_theta"] = -1.0;
  EXPECT_FALSE(ModelFromJson(hf, "config.json").ok());
}

TEST(ModelSpec, Gpt3_175bParameterCount) {
  json j = {{"family", "gpt"}, {"num_layers", 96}, {"hidden_size", 12288},
            {"num_attention_heads", 96}, {"vocab_size", 50257}, {"seq_length", 2048}};
  auto m = ModelFromJson(j, "gpt3");
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->TotalParams() / 1e9, 175.0, 0.5);
}

TEST(ModelSpec, RejectsInconsistentHeads) {
  json j = {{"family", "gpt"}, {"num_layers", 2}, {"hidden_size", 100},
            {"num_attention_heads", 3}, {"vocab_size", 10}, {"seq_length", 8}};
  auto m = ModelFromJson(j, "m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("num_attention_heads"), std::string::npos);
  // An explicit head_dim lifts the divisibility rule (GLM-4.5: 96 x 128 over
  // 4096), but heads x head_dim must stay in range (an int product).
  j["head_dim"] = 40;
  EXPECT_TRUE(ModelFromJson(j, "m.json").ok());
  j["num_attention_heads"] = 65536;
  j["head_dim"] = 65536;
  m = ModelFromJson(j, "m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("outside"), std::string::npos) << m.status().message();
}

// The in-memory entry points (what the fuzz harnesses call) name the given
// path in their errors, as the file loaders do, and name an unnamed model by
// the path's stem.
TEST(ModelSpec, FromJsonTextNamesThePath) {
  auto m = ModelFromJsonText(R"({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                 "vocab_size": 256, "seq_length": 32})",
                             "dir/tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "tiny");
  auto bad = ModelFromJsonText("{\"num_layers\": ", "dir/broken.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'dir/broken.json' is not valid JSON"), std::string::npos);
  auto missing = ModelFromJsonText("{}", "dir/empty.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model file 'dir/empty.json'"), std::string::npos);
  auto plan = PlanFileFromJsonText("[]", "p.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("plan file 'p.json'"), std::string::npos);
}

TEST(PlanSpec, JsonRoundTripAndValidation) {
  json mj = {{"family", "gpt"}, {"num_layers", 8}, {"hidden_size", 64},
             {"num_attention_heads", 4}, {"vocab_size", 256}, {"seq_length", 32}};
  ModelSpec m = *ModelFromJson(mj, "m");
  PlanSpec p;
  p.dp = 2; p.tp = 2; p.pp = 2; p.vpp = 2; p.schedule = Schedule::kInterleaved;
  p.num_microbatches = 4; p.seq_length = 32; p.layers_per_chunk = EvenSplit(8, 4);
  ASSERT_TRUE(Validate(p, m, "p").ok());
  auto back = PlanFromJson(ToJson(p), m, "p");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(p));
  p.tp = 3;
  Status s = Validate(p, m, "p");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tp=3"), std::string::npos);
}

// Integer fields that do not fit an int are refused by name, never truncated
// (4294967304 = 2^32 + 8 would otherwise run as 8).
TEST(PlanSpec, IntegersBeyondIntAreRefusedNotTruncated) {
  json mj = {{"family", "gpt"}, {"num_layers", 8}, {"hidden_size", 64},
             {"num_attention_heads", 4}, {"vocab_size", 256}, {"seq_length", 32}};
  ModelSpec m = *ModelFromJson(mj, "m");
  PlanSpec p;
  p.num_microbatches = 4; p.seq_length = 32; p.layers_per_chunk = EvenSplit(8, 1);
  ASSERT_TRUE(PlanFromJson(ToJson(p), m, "p").ok());
  for (const char* key : {"dp", "micro_batch", "num_microbatches", "zero_stage", "seq_length"}) {
    json j = ToJson(p);
    j[key] = 4294967304LL;
    auto r = PlanFromJson(j, m, "p");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  json j = ToJson(p);
  j["layers_per_chunk"] = json::array({4294967304LL});
  EXPECT_FALSE(PlanFromJson(j, m, "p").ok());
  auto c = ClusterFromJson(json{{"nodes", 4294967297LL}, {"gpus_per_node", 8}}, "c");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("nodes"), std::string::npos) << c.status().message();
}

// A learned position table bounds the sequence (no row for position 64 of a
// 64-position GPT); rotary positions have no table, so a Llama plan longer
// than max_position_embeddings (a context extension) passes: the same rule
// for dtplan, plan files and dtrun (which once refused the latter).
TEST(PlanSpec, LearnedPositionsBoundTheSequenceRotaryOnesDoNot) {
  json gj = {{"family", "gpt"}, {"num_layers", 2}, {"hidden_size", 64}, {"num_attention_heads", 4},
             {"vocab_size", 256}, {"seq_length", 64}, {"max_position", 64}};
  ModelSpec gpt = *ModelFromJson(gj, "m");
  json lj = gj;
  lj["family"] = "llama";
  ModelSpec llama = *ModelFromJson(lj, "m");
  ASSERT_TRUE(gpt.learned_positions());
  ASSERT_FALSE(llama.learned_positions());
  PlanSpec p;
  p.num_microbatches = 1; p.layers_per_chunk = EvenSplit(2, 1);
  p.seq_length = 64;
  EXPECT_TRUE(Validate(p, gpt, "p").ok());
  p.seq_length = 128;
  Status s = Validate(p, gpt, "p");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceeds the model's 64 learned positions"), std::string::npos) << s.message();
  EXPECT_FALSE(PlanFromJson(ToJson(p), gpt, "p").ok());
  EXPECT_TRUE(Validate(p, llama, "p").ok());
  EXPECT_TRUE(PlanFromJson(ToJson(p), llama, "p").ok());
}

TEST(PlanSpec, EvenSplitPutsRemainderFirst) {
  EXPECT_EQ(EvenSplit(10, 4), (std::vector<int>{3, 3, 2, 2}));
}

}  // namespace
}  // namespace dt
