// ValidationCase: one measured training configuration to check the
// simulator against: the model, the cluster, the plan (fully or partly
// fixed: unset dimensions are searched, as a user of the published number
// would have to), the hardware deviations from the bundled profile, and the
// measured iteration time.
//
// Readers: ReadJsonCases (schema of shared/validation/published-calibration.json)
// and ReadVtrainCsv (vTrain's ground_truth_*.csv, run settings from its
// README). Errors name the file, the line or case id, and the field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/search/constraints.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// Physical differences of the measured cluster from the profile's nodes.
struct HardwareOverride {
  std::optional<double> inter_node_Bps_per_node;  // total NIC line rate per node
};

struct ValidationCase {
  std::string id;
  std::string group;    // cases of one model: Spearman is computed within a group
  std::string profile;  // bundled profile name for the case's GPU
  ModelSpec model;
  ClusterSpec cluster;
  SearchConstraints constraints;  // fixed fields; the rest searched
  int64_t dp_bucket_bytes = 0;    // 0: plan default
  HardwareOverride hardware;
  double measured_s = 0;
  std::string note;
};

StatusOr<std::vector<ValidationCase>> ReadJsonCases(const std::string& path);
StatusOr<std::vector<ValidationCase>> ReadVtrainCsv(const std::string& path);
// Picks the reader by extension (.csv or .json).
StatusOr<std::vector<ValidationCase>> ReadCases(const std::string& path);

}  // namespace dt
