// Pipeline sends (PlanSpec::overlap_p2p_comm, PlanCosts::blocking_sends):
// on GPUs a send holds its stage's compute until it is done, unless the plan
// interleaves with Megatron-LM's --overlap-p2p-communication; dtrun never
// blocks, but its receiving core copies each message in. Plan files, the Megatron round trip, what a plan pays, and the
// validation cases' defaults by source.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/frameworks/megatron_args.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/validate/case.h"
#include "tests/planner/test_cases.h"
#include "tests/planner/test_models.h"
#include "tests/planner/test_profiles.h"

namespace dt {
namespace {

using testing_profiles::A100;

PlanSpec Pipeline(const ModelSpec& m, Schedule s, bool overlap) {
  PlanSpec p;
  p.pp = 4;
  p.dp = 2;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = 2048;
  p.schedule = s;
  p.vpp = s == Schedule::kInterleaved ? 2 : 1;
  p.overlap_p2p_comm = overlap;
  p.layers_per_chunk = EvenSplit(m.num_layers, p.pp * p.vpp);
  return p;
}

ClusterSpec OneNode() {
  ClusterSpec c;
  c.gpus_per_node = 8;
  return c;
}

TEST(PipelineSends, WhoBlocks) {
  const ModelSpec m = testing_models::Llama8B();
  auto cpu = LoadProfile("cpu-generic");
  ASSERT_TRUE(cpu.ok());
  for (bool overlap : {true, false}) {
    // Framework schedules without interleaving block whatever the flag says.
    EXPECT_TRUE(BlockingSends(Pipeline(m, Schedule::k1F1B, overlap), A100()));
    EXPECT_TRUE(BlockingSends(Pipeline(m, Schedule::kGpipe, overlap), A100()));
    // Interleaved ones block without --overlap-p2p-communication.
    EXPECT_EQ(BlockingSends(Pipeline(m, Schedule::kInterleaved, overlap), A100()), !overlap);
    // dtrun sends with MPI_Isend.
    for (Schedule s : {Schedule::k1F1B, Schedule::kGpipe, Schedule::kInterleaved})
      EXPECT_FALSE(BlockingSends(Pipeline(m, s, overlap), *cpu));
  }
}

// Blocking the sender costs at most the critical stage's own sends (each
// at most once on its compute stream: 2 per microbatch and chunk), never
// less than nothing, and shows as exposed PP communication at least as
// large as that stage's send time.
TEST(PipelineSends, BlockingCostsAtMostTheSendsOfAStage) {
  const ModelSpec m = testing_models::Llama8B();
  const ClusterSpec c = OneNode();
  const PlanSpec overlapped = Pipeline(m, Schedule::kInterleaved, true);
  const PlanSpec blocking = Pipeline(m, Schedule::kInterleaved, false);
  ASSERT_TRUE(Validate(blocking, m, "plan").ok()) << Validate(blocking, m, "plan").message();
  auto a = SimulatePlan(m, c, overlapped, A100());
  auto b = SimulatePlan(m, c, blocking, A100());
  ASSERT_TRUE(a.ok() && b.ok());
  const double p2p = ComputePlanCosts(m, c, blocking, A100()).p2p;
  ASSERT_GT(p2p, 0);
  const double sends_per_stage = 2.0 * blocking.num_microbatches * blocking.vpp;
  const double dt = b->step_time_s - a->step_time_s;
  EXPECT_GT(dt, 0);
  EXPECT_LE(dt, (blocking.pp * sends_per_stage) * p2p + 1e-12);
  // The critical stage sends all but one direction of its first / last chunk.
  EXPECT_GE(b->time.pp_exposed, (sends_per_stage - 2.0 * blocking.num_microbatches) * p2p - 1e-12);
  EXPECT_DOUBLE_EQ(b->peak_memory_bytes, a->peak_memory_bytes);
  // On a CPU profile the flag changes nothing: dtrun's sends never block.
  auto cpu = LoadProfile("cpu-generic");
  ASSERT_TRUE(cpu.ok());
  ClusterSpec cc;
  cc.nodes = 4;
  cc.gpus_per_node = 2;
  auto ca = SimulatePlan(m, cc, overlapped, *cpu);
  auto cb = SimulatePlan(m, cc, blocking, *cpu);
  ASSERT_TRUE(ca.ok() && cb.ok()) << (ca.ok() ? cb.status().message() : ca.status().message());
  EXPECT_DOUBLE_EQ(ca->step_time_s, cb->step_time_s);
}

// dtrun on CPU ranks: the receiving rank's core copies each message in
// (PlanCosts::receiver_copies), so every receive of the critical stage sits
// on its compute stream: exposed PP communication is exactly its receives
// (an interleaved stage receives an activation for each forward but the
// first chunk's and a gradient for each backward but the last chunk's).
// GPU plans keep their sends on the link streams.
TEST(PipelineSends, DtrunReceiversCopyTheirMessages) {
  const ModelSpec m = testing_models::Llama8B();
  auto cpu = LoadProfile("cpu-generic");
  ASSERT_TRUE(cpu.ok());
  ClusterSpec cc;
  cc.nodes = 4;
  cc.gpus_per_node = 2;
  for (Schedule s : {Schedule::k1F1B, Schedule::kGpipe, Schedule::kInterleaved}) {
    const PlanSpec p = Pipeline(m, s, true);
    const PlanCosts costs = ComputePlanCosts(m, cc, p, *cpu);
    EXPECT_TRUE(costs.receiver_copies);
    ASSERT_GT(costs.p2p, 0);
    auto r = SimulatePlan(m, cc, p, *cpu);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // A middle stage receives 2 per microbatch and chunk; an end stage m
    // fewer (no activation into chunk 0, no gradient into the last chunk).
    const double most = 2.0 * p.num_microbatches * p.vpp, least = most - p.num_microbatches;
    EXPECT_GE(r->time.pp_exposed, least * costs.p2p - 1e-12) << ToString(s);
    EXPECT_LE(r->time.pp_exposed, most * costs.p2p + 1e-12) << ToString(s);
  }
  EXPECT_FALSE(ComputePlanCosts(m, OneNode(), Pipeline(m, Schedule::k1F1B, true), A100()).receiver_copies);
  PlanSpec one = Pipeline(m, Schedule::k1F1B, true);
  one.pp = 1;
  one.layers_per_chunk = EvenSplit(m.num_layers, 1);
  EXPECT_FALSE(ComputePlanCosts(m, cc, one, *cpu).receiver_copies);
}

TEST(PipelineSends, PlanFilesAndDescribe) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec on = Pipeline(m, Schedule::kInterleaved, true), off = Pipeline(m, Schedule::kInterleaved, false);
  EXPECT_FALSE(ToJson(on).contains("overlap_p2p_comm"));  // absent: overlapped
  auto back = PlanFromJson(ToJson(off), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->overlap_p2p_comm);
  EXPECT_TRUE(PlanFromJson(ToJson(on), m, "test")->overlap_p2p_comm);
  EXPECT_NE(Describe(off).find("p2p-blocking"), std::string::npos);
  EXPECT_EQ(Describe(on).find("p2p-blocking"), std::string::npos);
  // Without interleaving the flag means nothing, and Describe says nothing.
  EXPECT_EQ(Describe(Pipeline(m, Schedule::k1F1B, false)).find("p2p-blocking"), std::string::npos);
}

// Export writes --no-overlap-p2p-communication for interleaved plans with
// blocking sends (the overlap is Megatron-LM's default); import reads it.
TEST(PipelineSends, MegatronRoundTripBothWays) {
  const ModelSpec m = testing_models::Llama8B();
  for (bool overlap : {true, false}) {
    const PlanSpec p = Pipeline(m, Schedule::kInterleaved, overlap);
    auto flags = MegatronArgs(m, p, true);
    ASSERT_TRUE(flags.ok()) << flags.status().message();
    const std::string line = FormatFlags(*flags);
    EXPECT_EQ(line.find("--no-overlap-p2p-communication") != std::string::npos, !overlap) << line;
    auto words = SplitCommandLine(line);
    ASSERT_TRUE(words.ok());
    auto job = ImportMegatron(*words, p.world(), "x");
    ASSERT_TRUE(job.ok()) << job.status().message();
    EXPECT_EQ(job->plan.overlap_p2p_comm, overlap);
  }
  // 1F1B: no flag written, and the imported plan keeps the default.
  const PlanSpec p = Pipeline(m, Schedule::k1F1B, true);
  auto flags = MegatronArgs(m, p, true);
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(FormatFlags(*flags).find("overlap-p2p-communication"), std::string::npos);
  auto job = ImportMegatron(*SplitCommandLine(FormatFlags(*flags)), p.world(), "x");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.overlap_p2p_comm);
}

// Validation cases: overlapped unless the case says otherwise or its
// software had no such option (Megatron-LM of SC21).
TEST(PipelineSends, ValidationCasesDefaultBySource) {
  struct Row {
    std::string source, extra;
    bool overlap;
  } rows[] = {{"Narayanan et al. SC21, Table 1", "", false},
              {"NVIDIA dgxc-benchmarking v25.02", "", true},
              {"yanring/Megatron-MoE-ModelZoo", R"(, "overlap_p2p_comm": false)", false},
              {"Narayanan et al. SC21", R"(, "overlap_p2p_comm": true)", true}};
  for (const Row& r : rows)
    EXPECT_EQ(testing_cases::OneCaseConstraints(r.source, R"(, "tp": 1, "pp": 2, "dp": 4)" + r.extra, 4)
                  .overlap_p2p_comm,
              r.overlap)
        << r.source << r.extra;
}

}  // namespace
}  // namespace dt
