// RunValidation: predicts every case (simulating fully fixed plans, searching
// the unset dimensions of partly fixed ones, as a user would) and compares
// with the measurement: per-case error, overall MAPE and max error, and
// Spearman's rank correlation within each model group.
// Parallel over cases; deterministic output order (the input order).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/lower/prediction.h"
#include "planner/validate/case.h"

namespace dt {

struct CaseResult {
  std::string id, group;
  PlanSpec plan;        // the plan simulated (searched dims filled in)
  double measured_s = 0, predicted_s = 0;
  double error = 0;     // (predicted - measured) / measured
  bool fits = true;     // predicted memory fits (vTrain plans all ran)
  bool searched = false;
  TimeBreakdown breakdown;  // of the predicted step
};

struct ValidationReport {
  std::vector<CaseResult> cases;
  double mape = 0, max_error = 0;
  std::map<std::string, double> spearman;  // group -> rho
  std::map<std::string, int> group_size;
};

struct ValidationOptions {
  std::string profile_override;  // empty: each case's own profile
  int threads = 0;
};

StatusOr<ValidationReport> RunValidation(const std::vector<ValidationCase>& cases,
                                         const ValidationOptions& opt);

json ToJson(const ValidationReport& r);

}  // namespace dt
