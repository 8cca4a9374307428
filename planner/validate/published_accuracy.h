// PublishedAccuracy: how far dtplan's step-time predictions for one class of
// models have been checked, quoted wherever such a plan is reported so that
// a user reads the prediction with its error bar.
//
// One class for now: mixture-of-experts models, scored against the published
// Megatron-LM MoE training runs in examples/validation/published-moe.json
// (H100; sources and per-row analysis in docs/validation.md, "Mixture of
// experts"). The figures are data, not promises: tests/planner/
// published_accuracy_test.cc re-scores that file and fails when a figure
// claims better than the file gives, or lags it by more than a tolerance,
// so a change of the simulator that moves them must update them here.
//
// Plain constants and one formatter; no failure modes.
#pragma once

#include <string>

namespace dt {

struct PublishedAccuracy {
  const char* file;     // the bundled case file, relative to the repository
  int cases;            // scored cases in it
  double mape;          // mean |predicted - measured| / measured
  double max_error;     // largest |predicted - measured| / measured
  // Largest measured / predicted (the run slower than priced) and
  // predicted / measured (faster than priced), as factors >= 1.
  double slowest_ratio;
  double fastest_ratio;
};

// MoE step times (2026-11-29, the measured sustained H100 GEMM rate and the CP
// ring priced block by block): what is not priced is named in the message.
constexpr PublishedAccuracy kMoeAccuracy{"examples/validation/published-moe.json", 50, 0.155, 0.486, 1.59, 1.49};

// One paragraph for the plan report of an MoE model: the figures above and
// the two mechanisms behind the largest errors (eager MoE layers, whose
// measured host time and token-count synchronisation are priced but which
// still run slower than priced; the attention kernel's speed, which changes
// between software releases).
std::string MoeAccuracyNote();

}  // namespace dt
