// Closed-loop validation: run plans for real with the bundled runtime
// (`dtrun` under `mpirun`) and compare measured step time and peak memory
// per rank with the simulator's predictions.
//
// The planner never links the runtime: it writes plan files, launches
// `mpirun -np W dtrun --plan F --steps S --metrics M.jsonl` as a child
// process, and reads the metrics file back. Each run has a timeout; a run
// that fails or times out is reported (not fatal) with its exit status.
// Not thread-safe (runs plans one after another: they share the cores).
#pragma once

#include <string>
#include <vector>

#include "planner/profile/profile.h"
#include "planner/search/search.h"

namespace dt {

struct ExecuteOptions {
  std::string dtrun;            // path of the dtrun binary
  std::string mpirun = "mpirun";
  std::string work_dir;         // plan and metrics files go here
  int steps = 6;                // steps per run; the first is excluded from the median
  // Runs per plan, made in rounds (every plan once, then every plan again):
  // a plan's time is the median of its runs' medians, so a machine whose
  // speed drifts over minutes (shared VMs) slows every plan alike instead
  // of the ones that happened to run late. Odd rounds run the plans in
  // reverse order, so no plan always runs first or last in its round (a
  // drift within a round, or what the previous run leaves behind, falls on
  // both ends alike).
  int rounds = 1;
  int top = 8;                  // how many of the ranked plans to run (0: all fitting)
  double timeout_s = 300;
  bool verbose = true;          // progress on stderr
  // argv of `dtplan profile --speed-check PROFILE` (planner/profiler/
  // speed_check.h), run right before every plan run; empty: not run. Each
  // run's time is then also scaled by the speed the check measured (step
  // time at the machine speed of the profile), and the report gives the
  // errors both ways, so the model's error can be told from the machine's
  // drift. A failed check fails the whole execution (the user asked for it).
  std::vector<std::string> speed_check;
};

struct ExecutedPlan {
  PlanSpec plan;
  Prediction predicted;
  bool ok = false;
  std::string error;            // why the run failed
  double measured_step_s = 0;   // median over rounds of the median over steps 2..S of the max over ranks
  std::vector<double> round_step_s;  // each round's median
  // With ExecuteOptions::speed_check: the machine's speed against the
  // profile's, measured right before each of those runs (1 = as profiled),
  // and the step time at the profile's speed: median over the runs of
  // round_step_s x the median speed of that run's round (one check is
  // noisy, +-10% on a shared VM; the round's median over every plan's check
  // follows the drift of minutes), and its error.
  std::vector<double> round_speed;
  std::vector<int> run_round;  // the round of each entry of round_step_s
  double speed_adjusted_step_s = 0, speed_adjusted_error = 0;
  double measured_peak_bytes = 0;   // max over ranks
  double predicted_peak_bytes = 0;  // max over stages, without the reserved baseline
  double time_error = 0, memory_error = 0;  // (pred - meas) / meas
  // Per pipeline stage: predicted and measured (max over the stage's ranks).
  std::vector<double> stage_predicted_bytes, stage_measured_bytes;
  // The stage whose prediction misses its measurement by the most (what
  // ExecuteReport::memory_max_error takes the max of) and that signed error;
  // -1 when no stage was measured.
  int worst_stage = -1;
  double worst_stage_error = 0;
};

struct ExecuteReport {
  std::vector<ExecutedPlan> plans;  // in predicted order (best first)
  double time_mape = 0, time_max_error = 0, memory_max_error = 0, spearman = 0;
  double regret = 0;  // measured time of the predicted-best plan / best measured - 1
  int failed = 0;
  // With ExecuteOptions::speed_check: the median of every run's speed, each
  // round's median, and the step-time metrics against the speed-adjusted times.
  bool speed_checked = false;
  double median_speed = 0, min_speed = 0, max_speed = 0;
  std::vector<double> round_median_speed;
  double adjusted_time_mape = 0, adjusted_time_max_error = 0, adjusted_spearman = 0, adjusted_regret = 0;
};

// Reads the JSON line `dtplan profile --speed-check` printed into `log`:
// its "speed" (> 0). An error value when there is none.
StatusOr<double> ReadSpeedCheck(const std::string& log);

StatusOr<ExecuteReport> ExecutePlans(const ModelSpec& m, const ClusterSpec& c,
                                     const HardwareProfile& hw, const std::vector<RankedPlan>& plans,
                                     const std::string& profile_name, const ExecuteOptions& opt);

json ToJson(const ExecuteReport& r);

// Reads a dtrun --metrics file (one JSON object per line; lines with "step"
// and "rank" are per-step records) into out->measured_step_s (median over
// steps after the first of the slowest rank's step time) and the measured
// peak bytes per pipeline stage of plan p. A missing file, a malformed line
// or a record of the wrong types is an error value, never an exception.
Status ReadMetrics(const std::string& path, const PlanSpec& p, ExecutedPlan* out);

}  // namespace dt
