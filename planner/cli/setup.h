// LoadSetup: model, cluster and hardware profile from the common flags,
// with defaults (profile A100-SXM4-80GB for gpu; for cpu the measured
// profiles/local-cpu.json when present and it covers the cluster, else
// cpu-generic, saying so in Setup::note).
// Errors are Status values naming the flag or file and the fix.
#pragma once

#include <tuple>

#include "planner/cli/commands.h"
#include "planner/profile/profile.h"
#include "planner/spec/plan_spec.h"

namespace dt::cli {

struct Setup {
  ModelSpec model;
  ClusterSpec cluster;
  HardwareProfile hw;
  // Non-empty when a default was replaced (e.g. the measured CPU profile
  // cannot price this cluster): printed before the results.
  std::string note;
};

StatusOr<Setup> LoadSetup(const CommonOptions& o);

StatusOr<HardwareProfile> LoadProfileFor(const std::string& name, const std::string& device, int ranks_per_node = 0);

}  // namespace dt::cli
