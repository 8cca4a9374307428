// A plan written as Megatron-LM flags (MegatronArgs, bf16) and read back
// (ImportMegatron), for tests that check a plan field survives the trip.
// Fails (the status) where either direction refuses.
#pragma once

#include "planner/frameworks/megatron_args.h"

namespace dt::testing_models {

inline StatusOr<MegatronJob> MegatronRoundTrip(const ModelSpec& m, const PlanSpec& p) {
  auto flags = MegatronArgs(m, p, true);
  if (!flags.ok()) return flags.status();
  auto words = SplitCommandLine(FormatFlags(*flags));
  if (!words.ok()) return words.status();
  return ImportMegatron(*words, p.world(), "x");
}

}  // namespace dt::testing_models
