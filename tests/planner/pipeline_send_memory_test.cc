// dtrun's pipeline sends (MemoryParams::sends_held_until_received): a sent
// forward output stays allocated until the next rank posts its receive, so
// a CPU plan's non-last pipeline ranks hold up to one message per
// microbatch in flight; the last rank (no forward sends without interleaving)
// and GPU plans (frameworks wait for their sends) hold none.
#include <gtest/gtest.h>

#include <string>

#include "planner/lower/memory_params_for.h"
#include "planner/memory/stage_memory.h"
#include "planner/schedule/in_flight.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

TEST(PipelineSendMemory, DtrunRanksHoldTheirUnreceivedForwardSends) {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const HardwareProfile& cpu = testing_models::LocalCpu();
  ASSERT_TRUE(MemoryParamsFor(cpu).sends_held_until_received);
  ASSERT_FALSE(MemoryParamsFor(testing_models::H100()).sends_held_until_received);
  for (Schedule sched : {Schedule::kGpipe, Schedule::k1F1B}) {
    PlanSpec p = testing_models::PipelinePlan(sched, 2, 1, 16);
    p.seq_length = m->seq_length;
    p.flash_attention = false;
    p.layers_per_chunk = {2, 2};
    MemoryParams held = MemoryParamsFor(cpu, p), waited = held;
    waited.sends_held_until_received = false;
    const double message = static_cast<double>(p.micro_batch) * p.seq_length * m->hidden * held.activation_bytes;
    for (int s = 0; s < p.pp; ++s) {
      const int in_flight = InFlightMicrobatches(p, s);
      const StageMemory a = EstimateStageMemory(*m, p, held, s, in_flight),
                        b = EstimateStageMemory(*m, p, waited, s, in_flight);
      const double expected = s < p.pp - 1 ? in_flight * message : 0.0;
      EXPECT_DOUBLE_EQ(a.temporary - b.temporary, expected) << ToString(sched) << " stage " << s;
      EXPECT_EQ(a.activations, b.activations);
    }
  }
}

}  // namespace
}  // namespace dt
