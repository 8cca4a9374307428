// Megatron-LM pipeline layouts (--pipeline-model-parallel-layout and the
// validation cases' plan.pipeline_layout): grouped repetitions, a last chunk
// holding only the multi-token-prediction module and the loss (DeepSeek-V3's
// Megatron-Bridge recipe, "Et|(tt|)*30mL"), and the refusals.
#include <gtest/gtest.h>

#include <string>

#include "planner/frameworks/megatron_args.h"
#include "planner/lower/simulate.h"
#include "planner/search/enumerate.h"
#include "planner/validate/case.h"
#include "planner/validate/run_validation.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

TEST(PipelineLayout, GroupsExpandAndTheMtpChunkMayHoldNoLayer) {
  int mtp = -1;
  auto l = ParseMegatronLayout("Et|(tt|)*30mL", &mtp);
  ASSERT_TRUE(l.ok()) << l.status().message();
  std::vector<int> want(32, 2);
  want.front() = 1;
  want.back() = 0;
  EXPECT_EQ(*l, want);
  EXPECT_EQ(mtp, 1);
  // Nested groups and t*N inside them.
  l = ParseMegatronLayout("E(t*2|(t|)*2)*2L", &mtp);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(*l, (std::vector<int>{2, 1, 1, 2, 1, 1, 0}));
  EXPECT_EQ(mtp, 0);
  for (const char* bad : {"E(tt|L", "Et)*2|tL", "E(tt)|tL", "E(t)*|tL", "E(t|)*99999999L", "E(tx|)*2L"}) {
    auto r = ParseMegatronLayout(bad, &mtp);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

ModelSpec WithMtp(int mtp) {
  ModelSpec m = testing_models::Llama8B();
  m.num_layers = 6;
  m.mtp_layers = mtp;
  return m;
}

// Only the end chunks may hold no layer: the first the embedding alone, the
// last the head and loss (and MTP modules) alone, as Megatron-LM's layouts
// with the embedding and loss counted as layers allow.
TEST(PipelineLayout, OnlyTheEndChunksMayHoldNoLayer) {
  PlanSpec p;
  p.pp = 2;
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  p.num_microbatches = 4;
  p.seq_length = 128;
  p.layers_per_chunk = {2, 2, 2, 0};
  EXPECT_TRUE(Validate(p, WithMtp(1), "plan").ok()) << Validate(p, WithMtp(1), "plan").message();
  EXPECT_TRUE(Validate(p, WithMtp(0), "plan").ok()) << Validate(p, WithMtp(0), "plan").message();
  p.layers_per_chunk = {0, 3, 3, 0};
  EXPECT_TRUE(Validate(p, WithMtp(0), "plan").ok()) << Validate(p, WithMtp(0), "plan").message();
  p.layers_per_chunk = {2, 0, 2, 2};
  const Status middle = Validate(p, WithMtp(1), "plan");
  EXPECT_FALSE(middle.ok());
  EXPECT_NE(middle.message().find("only the first chunk"), std::string::npos) << middle.message();
  p.pp = 1;
  p.vpp = 1;
  p.schedule = Schedule::k1F1B;
  p.layers_per_chunk = {0};  // one chunk: it must hold the layers
  EXPECT_FALSE(Validate(p, WithMtp(0), "plan").ok());
}

std::string Case(const std::string& layout, bool fixed) {
  return R"({"cases": [{"id": "c", "hardware": {"gpu": "H100"},
    "model": {"family": "llama", "num_layers": 6, "hidden_size": 1024, "num_attention_heads": 8,
              "vocab_size": 32000, "seq_length": 1024, "mtp_layers": 1},
    "plan": {"tp": 1, "pp": 2, "dp": 4, "virtual_stages": 2, "global_batch_size": 32,
             "pipeline_layout": ")" + layout + R"(")" +
         (fixed ? R"(, "microbatch_size": 1, "schedule": "interleaved", "recompute": "none",
             "zero_stage": 1, "sequence_parallel": false)" : "") +
         R"(},
    "measured": {"iteration_time_s": 1.0}}]})";
}

TEST(PipelineLayout, CasesUseTheLayoutOnFullyFixedPlans) {
  auto cases = JsonCasesFromText(Case("Et|tt|tt|tmL", true), "t.json");
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  ASSERT_EQ(cases->size(), 1u);
  EXPECT_TRUE((*cases)[0].invalid.empty()) << (*cases)[0].invalid;
  EXPECT_EQ((*cases)[0].layers_per_chunk, (std::vector<int>{1, 2, 2, 1}));
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->scored, 1) << report->cases[0].skipped;
  EXPECT_EQ(report->cases[0].plan.layers_per_chunk, (std::vector<int>{1, 2, 2, 1}));
  // A plan left to the search cannot take a layout; a layout whose MTP
  // count differs from the model's is an input error.
  cases = JsonCasesFromText(Case("Et|tt|tt|tmL", false), "t.json");
  ASSERT_TRUE(cases.ok());
  report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->scored, 0);
  EXPECT_NE(report->cases[0].skipped.find("fully fixed"), std::string::npos) << report->cases[0].skipped;
  cases = JsonCasesFromText(Case("Et|tt|tt|tL", true), "t.json");
  ASSERT_TRUE(cases.ok());
  EXPECT_NE((*cases)[0].invalid.find("pipeline_layout"), std::string::npos) << (*cases)[0].invalid;
}


TEST(PipelineLayout, AccountedSplitCountsEmbeddingHeadAndMtpAsLayers) {
  ModelSpec v3 = WithMtp(1);
  v3.num_layers = 61;
  std::vector<int> want(32, 2);
  want.front() = 1;
  want.back() = 0;
  EXPECT_EQ(AccountedSplit(v3, 32), want);  // Megatron-Bridge's "Et|(tt|)*30mL"
  ModelSpec qwen = WithMtp(0);
  qwen.num_layers = 94;
  std::vector<int> q(32, 3);
  q.front() = q.back() = 2;
  EXPECT_EQ(AccountedSplit(qwen, 32), q);
  qwen.num_layers = 32;  // 34 units: 9, 9, 8, 8, less the embedding and the head at the ends
  EXPECT_EQ(AccountedSplit(qwen, 4), (std::vector<int>{8, 9, 8, 7}));
  EXPECT_TRUE(AccountedSplit(qwen, 1).empty());  // no pipeline
  qwen.num_layers = 94;  // one unit per chunk: the embedding alone, 94 layers, the loss alone
  std::vector<int> alone(96, 1);
  alone.front() = alone.back() = 0;
  EXPECT_EQ(AccountedSplit(qwen, 96), alone);  // Megatron-MoE-ModelZoo's PP 32 x VPP 3 layout
  qwen.num_layers = 4;  // 6 units over 4 chunks: 2, 2, 1, 1
  EXPECT_EQ(AccountedSplit(qwen, 4), (std::vector<int>{1, 2, 1, 0}));
  EXPECT_TRUE(AccountedSplit(qwen, 7).empty());  // more chunks than units: a chunk would hold nothing
  // Describe shows a split that is not the even one.
  PlanSpec p;
  p.pp = 8;
  p.vpp = 4;
  p.layers_per_chunk = want;
  EXPECT_NE(Describe(p).find("layers=1,2*30,0"), std::string::npos) << Describe(p);
  p.layers_per_chunk = EvenSplit(61, 32);
  EXPECT_EQ(Describe(p).find("layers="), std::string::npos) << Describe(p);
}

TEST(PipelineLayout, SearchTriesBothSplitsUnlessTold) {
  ModelSpec m = WithMtp(0);
  m.num_layers = 30;
  m.seq_length = 2048;
  const ClusterSpec c = testing_models::Cluster(1, 8);
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = 2048;
  k.pp = 4;
  k.tp = 2;
  auto count = [&](SearchConstraints::Split split) {
    k.split = split;
    int even = 0, accounted = 0;
    const auto e = EnumeratePlans(m, c, k);
    EXPECT_TRUE(e.ok()) << e.status().message();
    for (const PlanSpec& p : e->plans) {
      if (p.layers_per_chunk == EvenSplit(m.num_layers, p.num_chunks())) ++even;
      else if (p.layers_per_chunk == AccountedSplit(m, p.num_chunks())) ++accounted;
      else ADD_FAILURE() << Describe(p);
    }
    return std::make_pair(even, accounted);
  };
  const auto both = count(SearchConstraints::Split::kBoth);
  EXPECT_GT(both.first, 0);
  EXPECT_GT(both.second, 0);
  EXPECT_EQ(count(SearchConstraints::Split::kEven).second, 0);
  const auto only = count(SearchConstraints::Split::kAccounted);
  EXPECT_EQ(only.second, both.second);
  EXPECT_LT(only.first, both.first);  // even plans only where the two splits agree
}


// The search's memory fast path (stages 0, 1 and pp-1) finds the peak of
// accounted-split plans as the full per-stage model does.
TEST(PipelineLayout, FastMemoryCheckHoldsForTheAccountedSplit) {
  auto loaded = LoadModel(std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/deepseek-v3.json");
  ASSERT_TRUE(loaded.ok());
  const ModelSpec m = *loaded;
  const HardwareProfile hw = LoadProfile("h100").value();
  const ClusterSpec c = testing_models::Cluster(128, 8);
  SearchConstraints k;
  k.global_batch = 2048;
  k.seq_length = 4096;
  k.split = SearchConstraints::Split::kAccounted;
  k.tp = 2;
  auto e = EnumeratePlans(m, c, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  int checked = 0;
  for (size_t i = 0; i < e->plans.size(); i += 1 + e->plans.size() / 150) {
    const PlanSpec& p = e->plans[i];
    if (p.pp < 4 || !UnevenSplit(p)) continue;
    auto full = SimulatePlan(m, c, p, hw);
    ASSERT_TRUE(full.ok()) << Describe(p);
    EXPECT_DOUBLE_EQ(PredictMemory(m, p, hw).peak_memory_bytes, full->peak_memory_bytes) << Describe(p);
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

}  // namespace
}  // namespace dt
