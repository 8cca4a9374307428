// Megatron-LM pipeline layouts (--pipeline-model-parallel-layout and the
// validation cases' plan.pipeline_layout): grouped repetitions, a last chunk
// holding only the multi-token-prediction module and the loss (DeepSeek-V3's
// Megatron-Bridge recipe, "Et|(tt|)*30mL"), and the refusals.
#include <gtest/gtest.h>

#include <string>

#include "planner/frameworks/megatron_args.h"
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

TEST(PipelineLayout, EmptyLastChunkOnlyForTheMtpModules) {
  PlanSpec p;
  p.pp = 2;
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  p.num_microbatches = 4;
  p.seq_length = 128;
  p.layers_per_chunk = {2, 2, 2, 0};
  EXPECT_TRUE(Validate(p, WithMtp(1), "plan").ok()) << Validate(p, WithMtp(1), "plan").message();
  EXPECT_FALSE(Validate(p, WithMtp(0), "plan").ok());
  p.layers_per_chunk = {2, 0, 2, 2};
  EXPECT_FALSE(Validate(p, WithMtp(1), "plan").ok());
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

}  // namespace
}  // namespace dt
