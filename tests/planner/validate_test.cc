#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "planner/validate/case.h"
#include "planner/validate/metrics.h"
#include "planner/validate/run_validation.h"

namespace dt {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Metrics, MapeMaxAndSpearman) {
  EXPECT_NEAR(Mape({1.1, 0.9}, {1.0, 1.0}), 0.1, 1e-12);
  EXPECT_NEAR(MaxApe({1.1, 0.7}, {1.0, 1.0}), 0.3, 1e-12);
  EXPECT_NEAR(Spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(Spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0, 1e-12);
  // One swap among 5: rho = 1 - 6*2/(5*24) = 0.9.
  EXPECT_NEAR(Spearman({1, 2, 3, 4, 5}, {1, 3, 2, 4, 5}), 0.9, 1e-12);
  EXPECT_EQ(AverageRanks({5, 1, 5}), (std::vector<double>{2.5, 1, 2.5}));
}

const char* kCsv =
    "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
    "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
    "2,16,8,1024,16,24,1024,1,1,2,372.16\n"
    "8,32,4,1024,16,24,1024,2,2,2,219.73\n"
    "4,16,2,1024,16,24,1024,1,4,1,300.0\n";

TEST(VtrainCsv, ReadsRowsWithRunSettings) {
  auto cases = ReadVtrainCsv(WriteTemp("gt.csv", kCsv));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  ASSERT_EQ(cases->size(), 3u);
  const ValidationCase& c = (*cases)[1];
  EXPECT_EQ(*c.constraints.tp, 2);
  EXPECT_EQ(*c.constraints.dp, 2);
  EXPECT_EQ(*c.constraints.pp, 2);
  EXPECT_EQ(*c.constraints.recompute, Recompute::kFull);
  EXPECT_FALSE(c.constraints.flash_attention);
  EXPECT_NEAR(c.measured_s, 0.21973, 1e-9);
  EXPECT_EQ(c.cluster.world(), 8);
  EXPECT_EQ(c.model.vocab, 50257);

  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->cases.size(), 3u);
  for (const auto& r : report->cases) {
    EXPECT_GT(r.predicted_s, 0);
    EXPECT_NEAR(r.error, (r.predicted_s - r.measured_s) / r.measured_s, 1e-12);
  }
  EXPECT_EQ(report->spearman.size(), 1u);  // one model with 3 cases
}

TEST(VtrainCsv, RejectsBadRowsNamingLineAndColumn) {
  std::string bad = std::string(kCsv) + "2,16,x,1024,16,24,1024,1,1,2,10\n";
  auto r = ReadVtrainCsv(WriteTemp("bad.csv", bad));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 5"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("micro batch"), std::string::npos);
  auto missing = ReadVtrainCsv(WriteTemp("hdr.csv", "a,b\n1,2\n"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing column"), std::string::npos);
}

// Numbers that are not whole counts or positive times are errors before
// any cast (nan / inf / 1e10 used to be cast to int; a time of nan, -5 or 0
// used to print "MAPE nan%" or "inf%").
TEST(VtrainCsv, RejectsNonFiniteAndOutOfRangeNumbers) {
  for (const char* row : {"2,16,nan,1024,16,24,1024,1,1,2,10\n", "2,16,2,inf,16,24,1024,1,1,2,10\n",
                          "2,16,2,1e10,16,24,1024,1,1,2,10\n", "2,16,2.5,1024,16,24,1024,1,1,2,10\n",
                          "2,16,2,1024,16,24,1024,1,1,2,nan\n", "2,16,2,1024,16,24,1024,1,1,2,-5\n",
                          "2,16,2,1024,16,24,1024,1,1,2,0\n"}) {
    auto r = ReadVtrainCsv(WriteTemp("range.csv", std::string(kCsv) + row));
    ASSERT_FALSE(r.ok()) << row;
    EXPECT_NE(r.status().message().find("line 5"), std::string::npos) << r.status().message();
  }
}

TEST(JsonCases, RejectsNonPositiveMeasuredTimes) {
  for (const char* t : {"0", "-5", "-0.001"}) {
    std::string j = std::string(R"({"cases": [{"id": "x", "source": "s",
      "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_node": 8},
      "model": {"family": "gpt", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
                "vocab_size": 512, "seq_length": 128},
      "plan": {"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 64},
      "measured": {"iteration_time_s": )") + t + "}}]}";
    auto cases = ReadJsonCases(WriteTemp("t.json", j));
    ASSERT_FALSE(cases.ok()) << t;
    EXPECT_NE(cases.status().message().find("iteration_time_s"), std::string::npos) << cases.status().message();
  }
}

TEST(JsonCases, ReadsPartlyFixedPlansAndSearchesTheRest) {
  const char* j = R"({"cases": [{
    "id": "x", "source": "Narayanan et al. SC21",
    "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_node": 8},
    "model": {"family": "gpt", "num_layers": 24, "hidden_size": 2304, "num_attention_heads": 24,
              "vocab_size": 51200, "seq_length": 2048},
    "plan": {"tp": 1, "pp": 1, "dp": 16, "global_batch_size": 256, "microbatch_size": null,
             "recompute": "full", "zero_stage": 0, "schedule": null},
    "measured": {"iteration_time_s": 3.5}}]})";
  auto cases = ReadJsonCases(WriteTemp("c.json", j));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  ASSERT_EQ(cases->size(), 1u);
  EXPECT_FALSE((*cases)[0].constraints.micro_batch.has_value());
  EXPECT_FALSE((*cases)[0].constraints.flash_attention);  // SC21 predates FlashAttention
  EXPECT_EQ((*cases)[0].cluster.nodes, 2);
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->cases[0].searched);
  EXPECT_TRUE(report->spearman.empty());  // one case: no rank correlation

  auto bad = ReadJsonCases(WriteTemp("b.json", R"({"cases": [{"id": "y", "hardware": {"gpu": "Z80"},
      "model": {}, "plan": {}, "measured": {}}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Z80"), std::string::npos);
}

}  // namespace
}  // namespace dt
