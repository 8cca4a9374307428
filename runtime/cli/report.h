// Reporting helpers for dtrun: model FLOPs per step, the per-step log line
// (Megatron / llm.c style), the JSON-lines metrics record, and the end-of-run
// summary that puts the plan file's prediction next to what was measured.
//
// Model FLOPs follow docs/flops.md (Narayanan et al. Eq. 3 counting GEMMs and
// the attention core, no recompute): per layer forward
//   2 B s (4 h^2 + 2 h ffn) + 4 B s^2 h,  LM head forward 2 B s h V,
// times 3 (forward + backward). With ffn = 4h this is exactly
//   72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
// Recompute is not counted (model FLOPs, not hardware FLOPs).
// Pure functions; no I/O except WriteSummary / the strings they return.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt::rt {

double ModelFlopsPerStep(const ModelSpec& m, const PlanSpec& p);

// Median of `v` (0 when empty).
double Median(std::vector<double> v);

// One rank's measurement of one step.
struct RankStepMetrics {
  int rank = 0;
  int64_t step = 0;           // 1-based step just completed
  double loss = 0.0;          // global step loss (same on every rank)
  double step_time_s = 0.0;   // this rank's wall time of the step
  double tokens_per_s = 0.0;  // global tokens per step / step time
  double flops_per_s = 0.0;   // model FLOPs per step / step time (whole job)
  int64_t peak_bytes = 0;     // this rank's tensor peak so far (runtime allocator)
  double grad_norm = 0.0;     // global gradient norm before clipping (same on every rank)
};
std::string MetricsJsonLine(const RankStepMetrics& r);

// "step    3/10 | loss 5.4321 | lr 1.20e-03 | norm 0.812 | 41.2 ms | 12.4k tok/s |
//  0.92 GFLOP/s | peak 3.1 MiB"
std::string StepLine(int64_t step, int64_t total_steps, double loss, double lr, double grad_norm,
                     double step_time_s, double tokens_per_s, double flops_per_s, int64_t peak_bytes);

// End-of-run comparison. `prediction` is the plan file's "prediction" (may be
// null); measured_stage_peak[s] is the max peak over the ranks of pipeline
// stage s.
struct RunSummary {
  int64_t steps_run = 0;
  double median_step_time_s = 0.0;  // excluding the first step of this process
  double median_tokens_per_s = 0.0;
  double median_flops_per_s = 0.0;
  double final_loss = 0.0;
  int64_t peak_bytes = 0;  // max over ranks
  std::vector<int64_t> measured_stage_peak;
};
std::string SummaryText(const RunSummary& s, const json& prediction);

std::string FormatBytes(double bytes);

}  // namespace dt::rt
