#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "planner/cost/comm_cost.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/validate/case.h"
#include "planner/validate/cross_validation.h"
#include "planner/validate/execute.h"
#include "planner/validate/metrics.h"
#include "planner/validate/run_validation.h"
#include "planner/search/search.h"
#include "tests/planner/test_models.h"

#include <sys/stat.h>

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

// vTrain's rows price collectives with the all-reduce times vTrain measured
// on its own node (profiles/sources/vtrain-a100, from its AR_GPU*_LUT files):
// 8 GPUs, 2 MiB: 93.25 us there, where the generic A100 table's ring model
// gives about 40 us.
TEST(VtrainCsv, UsesTheMeasuredNodesAllReduceTables) {
  auto cases = ReadVtrainCsv(WriteTemp("net.csv", kCsv));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  const HardwareOverride& o = (*cases)[0].hardware;
  ASSERT_NE(o.network, nullptr);
  auto a100 = LoadProfile("A100-SXM4-80GB");
  ASSERT_TRUE(a100.ok());
  HardwareProfile measured = *a100;
  measured.network = *o.network;
  const double mib2 = 2.0 * 1024 * 1024;
  EXPECT_NEAR(CollectiveTime(CollKind::kAllReduce, mib2, 8, 8, false, measured), 93.25e-6, 2e-6);
  EXPECT_NEAR(CollectiveTime(CollKind::kAllReduce, mib2, 2, 2, false, measured), 53.43e-6, 2e-6);
  EXPECT_LT(CollectiveTime(CollKind::kAllReduce, mib2, 8, 8, false, *a100), 60e-6);
  // Device and compute are not taken from it: the calibrated A100 ones stay.
  EXPECT_EQ((*cases)[0].profile, "A100-SXM4-80GB");
}

// The in-memory readers (the fuzz harnesses') read what the file readers
// read and name the given path.
TEST(VtrainCsv, FromTextMatchesTheFileReader) {
  auto from_file = ReadVtrainCsv(WriteTemp("gt.csv", kCsv));
  auto from_text = VtrainCasesFromCsvText(kCsv, "mem/gt.csv");
  ASSERT_TRUE(from_file.ok() && from_text.ok()) << from_text.status().message();
  ASSERT_EQ(from_text->size(), from_file->size());
  for (size_t i = 0; i < from_text->size(); ++i)
    EXPECT_EQ((*from_text)[i].measured_s, (*from_file)[i].measured_s);
  EXPECT_EQ(from_text->front().source, "vTrain gt.csv");
  auto bad = VtrainCasesFromCsvText("", "mem/empty.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mem/empty.csv' is empty"), std::string::npos);
  auto cases = JsonCasesFromText("{\"cases\": 3}", "mem/c.json");
  ASSERT_FALSE(cases.ok());
  EXPECT_NE(cases.status().message().find("case file 'mem/c.json'"), std::string::npos);
}

// The invalid message of the only bad case (the last one), or "" if it is valid.
std::string LastInvalid(const StatusOr<std::vector<ValidationCase>>& r) {
  if (!r.ok() || r->empty()) return "reader failed: " + r.status().message();
  return r->back().invalid;
}

// A bad row is kept as an invalid case (the others are still read and
// scored); a file without the header is an error of the whole file.
TEST(VtrainCsv, RejectsBadRowsNamingLineAndColumn) {
  std::string bad = std::string(kCsv) + "2,16,x,1024,16,24,1024,1,1,2,10\n";
  auto r = ReadVtrainCsv(WriteTemp("bad.csv", bad));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*r)[i].invalid.empty());
  EXPECT_NE(LastInvalid(r).find("line 5"), std::string::npos) << LastInvalid(r);
  EXPECT_NE(LastInvalid(r).find("micro batch"), std::string::npos);
  auto report = RunValidation(*r, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->scored, 3);
  EXPECT_EQ(report->invalid, 1);
  EXPECT_TRUE(report->cases[3].invalid);
  EXPECT_GT(report->mape, 0);
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
    EXPECT_NE(LastInvalid(r).find("line 5"), std::string::npos) << row << LastInvalid(r);
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
    EXPECT_NE(LastInvalid(cases).find("iteration_time_s"), std::string::npos) << t << LastInvalid(cases);
  }
}

// Regression (tests/fuzz, tests/fuzz/corpus/cases/zero_gpus_per_node.json):
// gpus_per_node 0 divided by zero, and huge tp/pp/dp overflowed the int
// product; each is now an invalid case naming the field.
TEST(JsonCases, RejectsZeroGpusPerNodeAndHugeParallelism) {
  const std::pair<const char*, const char*> bad[] = {
      {R"("gpus_per_node": 0)", R"("tp": 1, "pp": 1, "dp": 8)"},
      {R"("gpus_per_node": 8)", R"("tp": 1048576, "pp": 1048576, "dp": 8)"},
      {R"("gpus_per_node": 8)", R"("tp": 0, "pp": 1, "dp": 8)"},
      {R"("gpus_per_node": 8)", R"("tp": 4294967304, "pp": 1, "dp": 8)"}};
  const char* want[] = {"gpus_per_node", "tp x pp x dp", "'tp'", "'tp'"};
  for (size_t i = 0; i < 4; ++i) {
    std::string j = std::string(R"({"cases": [{"id": "x", "source": "s", "hardware": {"gpu": "A100-SXM4-80GB", )") +
                    bad[i].first + R"(}, "model": {"family": "gpt", "num_layers": 2, "hidden_size": 256,
      "num_attention_heads": 4, "vocab_size": 512, "seq_length": 128}, "plan": {)" + bad[i].second +
                    R"(, "global_batch_size": 64}, "measured": {"iteration_time_s": 1}}]})";
    auto cases = JsonCasesFromText(j, "t.json");
    EXPECT_NE(LastInvalid(cases).find(want[i]), std::string::npos) << i << ": " << LastInvalid(cases);
  }
}

// A misspelt field of a case (plan, measured, hardware or the case itself)
// would be priced at its default: it is an invalid case naming the field; a
// num_gpus that is not the plan's world is one too. The spelling dtplan knows
// is scored.
TEST(JsonCases, RejectsUnknownFieldsAndAWrongGpuCount) {
  auto one = [](const std::string& top, const std::string& hw, const std::string& plan, const std::string& meas) {
    return std::string(R"({"cases": [{"id": "x", "source": "s", )") + top +
           R"("hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_node": 8)" + hw + R"(},
      "model": {"family": "gpt", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
                "vocab_size": 512, "seq_length": 128},
      "plan": {"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 64)" + plan + R"(},
      "measured": {"iteration_time_s": 1)" + meas + "}}]}";
  };
  const std::pair<std::string, std::string> bad[] = {
      {one("", "", R"(, "sequence_paralel": true)", ""), "unknown field 'sequence_paralel'"},
      {one("", "", "", R"(, "iteration_time": 2)"), "unknown field 'iteration_time'"},
      {one("", R"(, "gpu_per_node": 4)", "", ""), "unknown field 'gpu_per_node'"},
      {one(R"("precison": "fp8", )", "", "", ""), "unknown field 'precison'"},
      {one(R"("num_gpus": 16, )", "", "", ""), "'num_gpus' 16 != the plan's tp x pp x dp x cp = 8"}};
  for (const auto& [text, want] : bad) {
    auto cases = JsonCasesFromText(text, "t.json");
    EXPECT_NE(LastInvalid(cases).find(want), std::string::npos) << want << ": " << LastInvalid(cases);
  }
  auto good = JsonCasesFromText(one(R"("num_gpus": 8, "notes": "n", )", R"(, "inter_node": "IB")",
                                    R"(, "sequence_parallel": false)", R"(, "mfu": 0.5)"),
                                "t.json");
  ASSERT_TRUE(good.ok());
  ASSERT_EQ(good->size(), 1u);
  EXPECT_TRUE((*good)[0].invalid.empty()) << (*good)[0].invalid;
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
  EXPECT_NE(LastInvalid(bad).find("Z80"), std::string::npos) << LastInvalid(bad);
}

std::string Case(const std::string& id, const std::string& plan, const std::string& measured,
                 const std::string& extra = "") {
  return R"({"id": ")" + id + R"(", "source": "test",
    "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
    "model": {"family": "llama", "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
              "num_kv_heads": 32, "ffn_hidden_size": 11008, "vocab_size": 32000, "seq_length": 4096},
    "plan": )" + plan + R"(, "measured": )" + measured + extra + "}";
}

// Throughputs are converted to iteration times: tokens/s per GPU at read
// time, TFLOP/s per GPU from the step FLOPs of the predicted plan. NeMo's
// published Llama-2 7B FP8 row (8 GPUs, GBS 128, seq 4096) gives both
// 16847 tokens/s and 776 model TFLOP/s per GPU and derives 3.89 s from the
// former: the TFLOP/s conversion must land on the same time.
// MoE cases: expert parallelism, the run's sequence length (a HuggingFace
// config's is its context limit), and force-balanced routing, which prices
// expert work at the balanced share (a lower time than the allowance gives).
// Microbatch 8: enough device work per layer for the host's launches to hide
// (at microbatch 2 this tiny model is host-bound on the H100 profile, and
// every variant below costs its launches alike).
TEST(JsonCases, MoeCasesCarryEpSequenceAndRouting) {
  auto text = [](const std::string& routing) {
    return std::string(R"({"cases": [{
      "id": "moe", "source": "test",
      "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
      "model": {"family": "llama", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
                "num_kv_heads": 4, "ffn_hidden_size": 2816, "vocab_size": 32000, "seq_length": 32768,
                "num_experts": 8, "moe_top_k": 2, "moe_ffn_hidden_size": 1408},
      "plan": {"tp": 1, "pp": 1, "dp": 8, "ep": 4, "seq_length": 2048, "global_batch_size": 64,
               "microbatch_size": 8, "recompute": "none", "zero_stage": 1, "schedule": "1f1b",
               "sequence_parallel": false},
      )") + routing + R"("measured": {"iteration_time_s": 1.0}}]})";
  };
  auto learned = ReadJsonCases(WriteTemp("moe1.json", text("")));
  auto balanced = ReadJsonCases(WriteTemp("moe2.json", text(R"("moe_routing": "force_balanced",)")));
  ASSERT_TRUE(learned.ok() && balanced.ok());
  const ValidationCase& c = (*balanced)[0];
  ASSERT_TRUE(c.invalid.empty()) << c.invalid;
  EXPECT_EQ(*c.constraints.ep, 4);
  EXPECT_EQ(c.constraints.seq_length, 2048);
  EXPECT_TRUE(c.constraints.force_balanced_routing);
  EXPECT_FALSE((*learned)[0].constraints.force_balanced_routing);
  auto rl = RunValidation(*learned, {}), rb = RunValidation(*balanced, {});
  ASSERT_TRUE(rl.ok() && rb.ok());
  ASSERT_TRUE(rl->cases[0].skipped.empty() && rb->cases[0].skipped.empty());
  EXPECT_EQ(rb->cases[0].plan.ep, 4);
  EXPECT_TRUE(rb->cases[0].plan.force_balanced_routing);
  EXPECT_LT(rb->cases[0].predicted_s, rl->cases[0].predicted_s);

  auto bad = ReadJsonCases(WriteTemp("moe3.json", text(R"("moe_routing": "random",)")));
  EXPECT_NE(LastInvalid(bad).find("moe_routing"), std::string::npos) << LastInvalid(bad);

  // plan.moe_dispatcher: "deduplicated" reaches the scored plan and, with
  // ep 4 inside a node, sends fewer bytes than every routed copy.
  auto with_dispatcher = [&](const std::string& d) {
    std::string t = text("");
    const std::string key = R"("sequence_parallel": false)";
    t.replace(t.find(key), key.size(), key + R"(, "moe_dispatcher": ")" + d + "\"");
    return ReadJsonCases(WriteTemp("moe4.json", t));
  };
  auto dedup = with_dispatcher("deduplicated");
  ASSERT_TRUE(dedup.ok());
  ASSERT_TRUE((*dedup)[0].invalid.empty()) << (*dedup)[0].invalid;
  EXPECT_EQ((*dedup)[0].constraints.moe_dispatcher, MoeDispatcher::kDeduplicated);
  auto rd = RunValidation(*dedup, {});
  ASSERT_TRUE(rd.ok() && rd->cases[0].skipped.empty());
  EXPECT_EQ(rd->cases[0].plan.moe_dispatcher, MoeDispatcher::kDeduplicated);
  EXPECT_LT(rd->cases[0].predicted_s, rl->cases[0].predicted_s);
  auto unknown = with_dispatcher("deepep");
  EXPECT_NE(LastInvalid(unknown).find("moe_dispatcher"), std::string::npos) << LastInvalid(unknown);
}

TEST(JsonCases, ThroughputsBecomeIterationTimes) {
  const std::string plan = R"({"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 128, "microbatch_size": 1,
      "recompute": "none", "zero_stage": 1, "schedule": "1f1b", "sequence_parallel": false})";
  const std::string j = "{\"cases\": [" + Case("tok", plan, R"({"tokens_per_s_per_gpu": 16847})") + "," +
                        Case("model", plan, R"({"tflops_per_gpu": 776, "flops_convention": "model"})") + "," +
                        Case("hw", plan, R"({"tflops_per_gpu": 776, "flops_convention": "hardware"})") + "," +
                        Case("noconv", plan, R"({"tflops_per_gpu": 776})") + "," +
                        Case("causal", plan, R"({"tflops_per_gpu": 776, "flops_convention": "model_causal"})") + "]}";
  auto cases = ReadJsonCases(WriteTemp("tp.json", j));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  EXPECT_NEAR((*cases)[0].measured_s, 128.0 * 4096 / (16847.0 * 8), 1e-9);
  EXPECT_NE((*cases)[3].invalid.find("flops_convention"), std::string::npos) << (*cases)[3].invalid;
  EXPECT_NE((*cases)[3].invalid.find("model_causal"), std::string::npos) << (*cases)[3].invalid;
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->scored, 4);
  EXPECT_EQ(report->invalid, 1);
  EXPECT_NEAR(report->cases[1].measured_s, 3.89, 0.02 * 3.89);
  // No recompute: hardware and model FLOPs are the same count.
  EXPECT_NEAR(report->cases[2].measured_s, report->cases[1].measured_s, 1e-9);
  // Causal: the same TFLOP/s over fewer counted FLOPs is a shorter step, by
  // half the attention core's share (Llama 2 7B at 4096 tokens: 3 passes of
  // 4 B s^2 h per layer against the model count).
  const auto& r = report->cases[4];
  const double B = 128, s = 4096, h = 4096, l = 32, world = 8, rate = 776e12;
  EXPECT_NEAR(report->cases[1].measured_s - r.measured_s, 0.5 * 12 * B * s * s * h * l / (rate * world), 1e-6);
  EXPECT_FALSE(report->cases[1].measured_from.empty());
}

// measured.peak_allocated_gib: scored against stage 0's allocations (the
// prediction without the reserve and the fragmentation allowance), apart
// from the time; cases without it are not counted; a non-positive value
// makes the case invalid.
TEST(JsonCases, PeakAllocatedMemoryIsScoredApart) {
  const std::string plan = R"({"tp": 1, "pp": 2, "dp": 4, "global_batch_size": 128, "microbatch_size": 1,
      "recompute": "none", "zero_stage": 1, "schedule": "1f1b", "sequence_parallel": false})";
  const std::string j = "{\"cases\": [" + Case("mem", plan, R"({"iteration_time_s": 4.0, "peak_allocated_gib": 40})") +
                        "," + Case("time", plan, R"({"iteration_time_s": 4.0})") + "," +
                        Case("bad", plan, R"({"iteration_time_s": 4.0, "peak_allocated_gib": -1})") + "]}";
  auto cases = ReadJsonCases(WriteTemp("mem.json", j));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  EXPECT_DOUBLE_EQ((*cases)[0].measured_peak_allocated_bytes, 40.0 * 1073741824.0);
  EXPECT_EQ((*cases)[1].measured_peak_allocated_bytes, 0.0);
  EXPECT_NE((*cases)[2].invalid.find("peak_allocated_gib"), std::string::npos) << (*cases)[2].invalid;
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->memory_scored, 1);
  const CaseResult& r = report->cases[0];
  // Stage 0 of the same plan, allocations only: below the stage's total.
  auto sim = SimulatePlan(
      [&] {
        ModelSpec m = (*cases)[0].model;
        m.seq_length = 4096;
        return m;
      }(),
      (*cases)[0].cluster, r.plan, *LoadProfile("H100-SXM5-80GB"));
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  const StageMemory& s0 = sim->stages[0].memory;
  EXPECT_DOUBLE_EQ(r.predicted_allocated_bytes, AllocatedBytes(s0));
  EXPECT_LT(r.predicted_allocated_bytes, s0.total - s0.reserved);
  EXPECT_NEAR(r.memory_error, r.predicted_allocated_bytes / (40.0 * 1073741824.0) - 1.0, 1e-12);
  EXPECT_NEAR(report->memory_mape, std::fabs(r.memory_error), 1e-12);
  EXPECT_EQ(report->cases[1].measured_allocated_bytes, 0.0);
  EXPECT_EQ(report->scored, 2);  // the time of both valid cases
}

// plan.attention_kernel "cudnn" prices the case with the profile's cuDNN
// attention curve (faster than the default at 4k tokens on the H100); a
// profile without the curve makes the case invalid, an unknown kernel too.
TEST(JsonCases, AttentionKernelCudnn) {
  const std::string plan = R"({"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 64, "microbatch_size": 1,
      "recompute": "none", "zero_stage": 1, "schedule": "1f1b", "sequence_parallel": false)";
  const std::string j = "{\"cases\": [" + Case("default", plan + "}", R"({"iteration_time_s": 3})") + "," +
                        Case("cudnn", plan + R"(, "attention_kernel": "cudnn"})", R"({"iteration_time_s": 3})") + "," +
                        Case("bad", plan + R"(, "attention_kernel": "flash3"})", R"({"iteration_time_s": 3})") + "]}";
  auto cases = ReadJsonCases(WriteTemp("ak.json", j));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  EXPECT_TRUE((*cases)[1].constraints.cudnn_attention);
  EXPECT_NE((*cases)[2].invalid.find("attention_kernel"), std::string::npos) << (*cases)[2].invalid;
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->scored, 2);
  EXPECT_TRUE(report->cases[1].plan.cudnn_attention);
  EXPECT_LT(report->cases[1].predicted_s, report->cases[0].predicted_s);
  ValidationOptions a100;
  a100.profile_override = "A100-SXM4-80GB";
  auto r2 = RunValidation(*cases, a100);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->cases[1].invalid);
  EXPECT_NE(r2->cases[1].skipped.find("cuDNN attention curve"), std::string::npos) << r2->cases[1].skipped;
}

// A recipe that selects the attention kernel by environment is priced with
// it: dgxc-benchmarking v25.02's Llama 3.1 launch script disables
// FlashAttention (NVTE_FLASH_ATTN=0), leaving cuDNN's fused attention. A
// case's own plan.attention_kernel still decides; other sources keep the
// profile's default.
TEST(JsonCases, RecipeSelectedAttentionKernel) {
  const std::string plan = R"({"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 64, "microbatch_size": 1,
      "recompute": "none", "zero_stage": 1, "schedule": "1f1b", "sequence_parallel": false)";
  auto from = [](std::string c, const std::string& source) {
    const std::string key = R"("source": "test")";
    c.replace(c.find(key), key.size(), R"("source": ")" + source + "\"");
    return c;
  };
  const std::string dgxc = "NVIDIA dgxc-benchmarking v25.02";
  const std::string j =
      "{\"cases\": [" + from(Case("recipe", plan + "}", R"({"iteration_time_s": 3})"), dgxc) + "," +
      from(Case("told", plan + R"(, "attention_kernel": "default"})", R"({"iteration_time_s": 3})"), dgxc) + "," +
      from(Case("later", plan + "}", R"({"iteration_time_s": 3})"), "NVIDIA/dgxc-benchmarking grok1/README_314b.md") +
      "," + Case("other", plan + "}", R"({"iteration_time_s": 3})") + "]}";
  auto cases = ReadJsonCases(WriteTemp("recipe_ak.json", j));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  ASSERT_EQ(cases->size(), 4u);
  EXPECT_TRUE((*cases)[0].constraints.cudnn_attention);
  EXPECT_FALSE((*cases)[1].constraints.cudnn_attention);
  EXPECT_FALSE((*cases)[2].constraints.cudnn_attention);
  EXPECT_FALSE((*cases)[3].constraints.cudnn_attention);
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->cases[0].plan.cudnn_attention);
  EXPECT_LT(report->cases[0].predicted_s, report->cases[3].predicted_s);
}

// FP8 cases are priced with the profile's FP8 GEMMs (faster than their
// bf16 twin), never as bf16; a plan predicted not to fit is scored anyway
// (fixed plan: its own time; searched: the plan closest to fitting).
TEST(JsonCases, Fp8AndNonFittingCasesAreScored) {
  const std::string fixed = R"({"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 64, "microbatch_size": 8,
      "recompute": "none", "zero_stage": 0, "schedule": "1f1b", "sequence_parallel": false})";
  const std::string searched =
      R"({"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 64, "recompute": "none", "zero_stage": 0})";
  const std::string j = "{\"cases\": [" + Case("fp8", fixed, R"({"iteration_time_s": 3})", R"(, "precision": "fp8")") +
                        "," + Case("fixed-oom", fixed, R"({"iteration_time_s": 3})") + "," +
                        Case("searched-oom", searched, R"({"iteration_time_s": 3})") + "," +
                        Case("fp4", fixed, R"({"iteration_time_s": 3})", R"(, "precision": "fp4")") + "]}";
  auto cases = ReadJsonCases(WriteTemp("nf.json", j));
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  EXPECT_TRUE((*cases)[0].not_modeled.empty()) << (*cases)[0].not_modeled;
  EXPECT_EQ((*cases)[0].constraints.precision, Precision::kFp8);
  EXPECT_NE((*cases)[3].invalid.find("fp4"), std::string::npos) << (*cases)[3].invalid;
  auto report = RunValidation(*cases, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->not_modeled, 0);
  EXPECT_EQ(report->invalid, 1);
  EXPECT_EQ(report->scored, 3);
  EXPECT_EQ(report->cases[0].plan.precision, Precision::kFp8);
  EXPECT_LT(report->cases[0].predicted_s, report->cases[1].predicted_s);  // same plan in bf16
  for (int i : {0, 1, 2}) {
    EXPECT_FALSE(report->cases[i].fits) << report->cases[i].id;  // 7B, full Adam on one GPU, no recompute
    EXPECT_GT(report->cases[i].predicted_s, 0) << report->cases[i].id;
    // The case says by how much: its peak above the device's capacity.
    EXPECT_GT(report->cases[i].peak_memory_bytes, report->cases[i].capacity_bytes) << report->cases[i].id;
    EXPECT_GT(report->cases[i].capacity_bytes, 0) << report->cases[i].id;
  }
  EXPECT_TRUE(report->cases[2].searched);
}

}  // namespace
}  // namespace dt

namespace dt {
namespace {

// Cases read from a vTrain-style CSV whose "measurements" are the A100
// profile's own predictions at host_overhead_s = 40 us, each times
// noise[i] (none: exact), alternating between sources "even" and "odd".
std::vector<ValidationCase> CasesMadeAt40us(const char* file, const char* csv, const std::vector<double>& noise) {
  auto read = ReadVtrainCsv(WriteTemp(file, csv));
  EXPECT_TRUE(read.ok()) << read.status().message();
  if (!read.ok()) return {};
  std::vector<ValidationCase> cases = *read;
  auto truth = LoadProfile("A100-SXM4-80GB");
  EXPECT_TRUE(truth.ok());
  if (!truth.ok()) return {};
  truth->compute.host_overhead_s = 40e-6;
  std::map<std::string, HardwareProfile> profs = {{"A100-SXM4-80GB", *truth}};
  ValidationOptions vo;
  vo.profiles = &profs;
  auto gen = RunValidation(cases, vo);
  EXPECT_TRUE(gen.ok()) << gen.status().message();
  if (!gen.ok()) return {};
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].source = i % 2 ? "odd" : "even";
    cases[i].measured_s = gen->cases[i].predicted_s * (i < noise.size() ? noise[i] : 1.0);
  }
  return cases;
}

std::vector<CvKnob> HostOverheadKnob() {
  std::vector<CvKnob> knobs;
  for (const CvKnob& k : CalibratedKnobs())
    if (k.profile == "A100-SXM4-80GB" && k.name == "host_overhead_s") knobs.push_back(k);
  return knobs;
}

// Cross-validation recovers a parameter that really generated the data:
// "measurements" are the predictions of the A100 profile with a host
// overhead of 40 us, split into two sources; every fold must refit 40 us
// and score its left-out source with (near) zero error, while the shipped
// profile (80 us) does not.
TEST(CrossValidation, RecoversTheParameterThatMadeTheData) {
  const std::vector<ValidationCase> cases = CasesMadeAt40us("cv.csv", kCsv, {});
  ASSERT_EQ(cases.size(), 3u);
  const std::vector<CvKnob> knobs = HostOverheadKnob();
  ASSERT_EQ(knobs.size(), 1u);
  auto rep = CrossValidate(cases, knobs, 1);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->sources.size(), 2u);
  EXPECT_DOUBLE_EQ(rep->fit_knobs.at("A100-SXM4-80GB.host_overhead_s"), 40e-6);
  for (const CvSource& s : rep->sources) {
    EXPECT_DOUBLE_EQ(s.left_out_knobs.at("A100-SXM4-80GB.host_overhead_s"), 40e-6) << s.name;
    EXPECT_LT(s.left_out_mape, 1e-9) << s.name;
  }
  EXPECT_GT(rep->mean_shipped, 0.01);  // the shipped 80 us is measurably off on this data
  EXPECT_EQ(rep->settings_evaluated, static_cast<int>(knobs[0].grid.size()) + 1);  // the grid + the source value
}

// The one-standard-error rule: data too noisy to tell the host overhead's
// grid values apart leave it at its cited source value (60 us), even though
// the noisy objective's least lies elsewhere on the grid. The "measurements"
// are the 40 us predictions times +-5..30% noise, in two sources.
TEST(CrossValidation, KeepsTheSourceValueWhereTheDataCannotTellTheGridApart) {
  const char* csv =
      "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
      "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
      "1,8,4,4096,32,4,2048,1,1,1,1\n"
      "1,8,8,4096,32,4,2048,1,1,1,1\n"
      "2,16,4,4096,32,4,2048,2,1,1,1\n"
      "2,16,8,4096,32,4,2048,1,2,1,1\n"
      "4,16,4,4096,32,4,2048,2,1,2,1\n"
      "4,16,2,4096,32,4,2048,1,2,2,1\n"
      "8,32,4,4096,32,4,2048,2,2,2,1\n"
      "8,32,4,4096,32,4,2048,4,2,1,1\n";
  const std::vector<ValidationCase> cases =
      CasesMadeAt40us("cv_noisy.csv", csv, {1.30, 0.75, 1.10, 0.90, 1.25, 0.80, 1.05, 0.95});
  ASSERT_EQ(cases.size(), 8u);
  const std::vector<CvKnob> knobs = HostOverheadKnob();
  ASSERT_EQ(knobs.size(), 1u);
  const double source = knobs[0].source_value;

  // The plain least of the objective (mean over the two sources of their
  // MAPE) is not the source value: the rule is what keeps it.
  auto a100 = LoadProfile("A100-SXM4-80GB");
  ASSERT_TRUE(a100.ok());
  double least = 1e9, argmin = -1;
  for (double v : knobs[0].grid) {
    std::map<std::string, HardwareProfile> p = {{"A100-SXM4-80GB", *a100}};
    knobs[0].apply(&p.at("A100-SXM4-80GB"), v);
    ValidationOptions o;
    o.profiles = &p;
    auto r = RunValidation(cases, o);
    ASSERT_TRUE(r.ok());
    double sum[2] = {0, 0};
    for (size_t i = 0; i < cases.size(); ++i) sum[i % 2] += std::fabs(r->cases[i].error);
    const double obj = (sum[0] / 4 + sum[1] / 4) / 2;
    if (obj < least) least = obj, argmin = v;
  }
  ASSERT_NE(argmin, source);

  auto rep = CrossValidate(cases, knobs, 1);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_DOUBLE_EQ(rep->fit_knobs.at("A100-SXM4-80GB.host_overhead_s"), source);
}

// dtrun's metrics file: the median step after the first, of the slowest
// rank, and per-stage peaks; a damaged record is an error, not a throw.
TEST(ExecuteMetrics, MedianOfTheSlowestRankAndTypedRecords) {
  PlanSpec p;
  p.dp = 1;
  p.pp = 2;
  p.layers_per_chunk = {1, 1};
  const std::string good = WriteTemp("metrics_good.jsonl",
                                     "{\"step\":0,\"rank\":0,\"step_time_s\":9.0,\"peak_bytes\":10}\n"
                                     "{\"step\":1,\"rank\":0,\"step_time_s\":1.0,\"peak_bytes\":100}\n"
                                     "{\"step\":1,\"rank\":1,\"step_time_s\":2.0,\"peak_bytes\":300}\n"
                                     "{\"step\":2,\"rank\":1,\"step_time_s\":4.0,\"peak_bytes\":200}\n"
                                     "{\"summary\":true}\n");
  ExecutedPlan out;
  ASSERT_TRUE(ReadMetrics(good, p, &out).ok());
  EXPECT_DOUBLE_EQ(out.measured_step_s, 3.0);  // steps 1 and 2: max over ranks 2 and 4
  ASSERT_EQ(out.stage_measured_bytes.size(), 2u);
  EXPECT_DOUBLE_EQ(out.stage_measured_bytes[0], 100);
  EXPECT_DOUBLE_EQ(out.stage_measured_bytes[1], 300);
  for (const char* bad : {"{\"step\":\"1\",\"rank\":0}", "{\"step\":1.5,\"rank\":0}",
                          "{\"step\":1,\"rank\":-3}", "{\"step\":1,\"rank\":0,\"step_time_s\":\"fast\"}",
                          "{\"step\":99999999999,\"rank\":0}", "not json"}) {
    const std::string path = WriteTemp("metrics_bad.jsonl", std::string(bad) + "\n");
    ExecutedPlan o;
    const Status st = ReadMetrics(path, p, &o);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("bad metrics line"), std::string::npos) << st.message();
  }
  ExecutedPlan none;
  EXPECT_FALSE(ReadMetrics(::testing::TempDir() + "no_such_metrics.jsonl", p, &none).ok());
}

// The speed check's JSON line is read back; anything else is an error value.
TEST(ExecuteSpeedCheck, ReadsTheSpeedLine) {
  auto ok = ReadSpeedCheck(WriteTemp("speed_ok.log",
                                     "dtplan profile: mpirun ...\n{\"speed_check\":{\"checks\":[],\"speed\":0.87}}\n"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_DOUBLE_EQ(*ok, 0.87);
  for (const char* bad : {"no json here\n", "{\"speed_check\":{\"speed\":\"fast\"}}\n",
                          "{\"speed_check\":{\"speed\":-1}}\n", "{\"speed_check\":{\"speed\":0.9\n"}) {
    auto r = ReadSpeedCheck(WriteTemp("speed_bad.log", bad));
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_FALSE(ReadSpeedCheck(::testing::TempDir() + "no_such_speed.log").ok());
}

std::string WriteScript(const std::string& name, const std::string& text) {
  const std::string path = WriteTemp(name, "#!/bin/sh\n" + text);
  chmod(path.c_str(), 0755);
  return path;
}

// With a speed check, every run is paired with one; a run's time at the
// profile's speed is its time x the median speed of its round, and a plan's
// adjusted time the median over its rounds. Stand-ins for mpirun, dtrun and
// the check: round r's runs take 10 / 30 / 20 ms, its checks say 0.5 /
// 0.25 / 1.0.
TEST(ExecuteSpeedCheck, RunsAreScaledByTheirRoundsSpeed) {
  const std::string dir = ::testing::TempDir() + "speed_exec";
  mkdir(dir.c_str(), 0755);
  const std::string counter = dir + "/checks";
  std::remove(counter.c_str());
  ExecuteOptions eo;
  eo.mpirun = WriteScript("fake_mpirun.sh", "shift 4\nexec \"$@\"\n");  // drop --allow.. --oversubscribe -np N
  eo.dtrun = WriteScript("fake_dtrun.sh",
                         "while [ $# -gt 0 ]; do [ \"$1\" = --metrics ] && m=\"$2\"; shift; done\n"
                         "case \"$m\" in *.round2.jsonl) t=0.030;; *.round3.jsonl) t=0.020;; *) t=0.010;; esac\n"
                         "for s in 1 2 3; do echo \"{\\\"step\\\":$s,\\\"rank\\\":0,\\\"step_time_s\\\":$t}\" >> \"$m\"; done\n");
  eo.speed_check = {WriteScript("fake_check.sh",
                                "n=$(cat '" + counter + "' 2>/dev/null || echo 0); echo $((n + 1)) > '" + counter + "'\n"
                                "case $((n / 2)) in 0) s=0.5;; 1) s=0.25;; *) s=1.0;; esac\n"
                                "echo \"{\\\"speed_check\\\":{\\\"speed\\\":$s}}\"\n")};
  eo.work_dir = dir;
  eo.rounds = 3;
  eo.top = 0;
  eo.verbose = false;
  const ModelSpec m = testing_models::Llama8B();
  std::vector<RankedPlan> plans(2);
  for (RankedPlan& r : plans) {
    r.plan.micro_batch = 1;
    r.plan.num_microbatches = 1;
    r.plan.seq_length = 128;
    r.plan.layers_per_chunk = {m.num_layers};
    r.prediction.step_time_s = 0.0075;
  }
  auto rep = ExecutePlans(m, testing_models::Cluster(1, 1), LoadProfile("cpu-generic").value(), plans, "cpu-generic", eo);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_TRUE(rep->speed_checked);
  EXPECT_EQ(rep->round_median_speed, (std::vector<double>{0.5, 0.25, 1.0}));
  EXPECT_DOUBLE_EQ(rep->median_speed, 0.5);
  for (const ExecutedPlan& e : rep->plans) {
    ASSERT_TRUE(e.ok) << e.error;
    EXPECT_DOUBLE_EQ(e.measured_step_s, 0.020);          // median of 10, 30, 20 ms
    EXPECT_DOUBLE_EQ(e.speed_adjusted_step_s, 0.0075);  // median of 5, 7.5, 20 ms
    EXPECT_NEAR(e.speed_adjusted_error, 0.0, 1e-12);
  }
  EXPECT_NEAR(rep->adjusted_time_mape, 0.0, 1e-12);
  EXPECT_NEAR(rep->time_mape, 0.625, 1e-12);  // 7.5 against 20 ms
  // A failing check fails the execution.
  eo.speed_check = {"/bin/false"};
  auto failed = ExecutePlans(m, testing_models::Cluster(1, 1), LoadProfile("cpu-generic").value(), plans,
                             "cpu-generic", eo);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("speed check exited"), std::string::npos) << failed.status().message();
}

}  // namespace
}  // namespace dt
