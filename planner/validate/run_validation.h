// RunValidation: predicts every case (simulating fully fixed plans, searching
// the unset dimensions of partly fixed ones, as a user would) and compares
// with the measurement: per-case error, overall MAPE and max error, and
// Spearman's rank correlation within each model group; for cases that give
// a measured peak allocation, its error too (memory_mape).
// Every case gets a row. A plan predicted not to fit is scored anyway (the
// time of the given plan; for a searched case, of the plan closest to
// fitting) and flagged. Cases that are invalid, not modeled or fail to
// simulate are listed with the reason (`skipped`) and left out of the
// metrics; one such case never stops the others.
// Parallel over cases; deterministic output order (the input order).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/lower/prediction.h"
#include "planner/profile/profile.h"
#include "planner/validate/case.h"

namespace dt {

struct CaseResult {
  std::string id, group;
  PlanSpec plan;        // the plan simulated (searched dims filled in)
  double measured_s = 0, predicted_s = 0;
  double error = 0;     // (predicted - measured) / measured
  bool fits = true;     // predicted memory fits (vTrain plans all ran)
  double peak_memory_bytes = 0, capacity_bytes = 0;  // predicted peak per GPU (largest stage), device capacity
  bool searched = false;
  TimeBreakdown breakdown;  // of the predicted step
  // Peak allocated memory of pipeline rank 0, when the case gives it
  // (measured_allocated_bytes > 0): AllocatedBytes of stage 0 and the error.
  double measured_allocated_bytes = 0, predicted_allocated_bytes = 0, memory_error = 0;
  std::string measured_from;  // how measured_s was derived, when not given as a time
  bool attention_overridden = false;  // ValidationOptions::cudnn_attention changed this case's kernel
  std::string skipped;        // why the case is not scored (empty: scored)
  bool invalid = false;       // skipped because its input is wrong (vs not modeled)
};

struct ValidationReport {
  std::vector<CaseResult> cases;
  double mape = 0, max_error = 0;  // over scored cases
  int scored = 0, invalid = 0, not_modeled = 0;
  // Scored cases whose attention kernel ValidationOptions::cudnn_attention set.
  int attention_overridden = 0;
  std::map<std::string, double> spearman;  // group -> rho
  std::map<std::string, int> group_size;
  // Cases with a measured peak allocation: how many, MAPE and max error.
  int memory_scored = 0;
  double memory_mape = 0, memory_max_error = 0;
};

struct ValidationOptions {
  std::string profile_override;  // empty: each case's own profile
  // When set: the profiles by name (each case's profile, or the override),
  // used instead of loading the bundled files (cross-validation).
  const std::map<std::string, HardwareProfile>* profiles = nullptr;
  int threads = 0;
  // When set (dtplan validate --attention-kernel): price every case whose
  // plan runs a fused attention core on a profile with a cuDNN attention
  // curve with that kernel (true: cuDNN, false: the profile's default),
  // whatever its own plan.attention_kernel or reader rule says. A what-if
  // for the kernel question (docs/validation.md); cases with an unfused core
  // or on a profile without the curve keep their own kernel.
  std::optional<bool> cudnn_attention;
};

StatusOr<ValidationReport> RunValidation(const std::vector<ValidationCase>& cases,
                                         const ValidationOptions& opt);

json ToJson(const ValidationReport& r);

}  // namespace dt
