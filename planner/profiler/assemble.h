// Turns raw measurements into a HardwareProfile (planner/profile schema).
// Pure functions of their inputs (no I/O), so tests can feed synthetic
// measurements. Fits are chosen so that the planner's cost model
// (planner/cost/compute_cost.h, comm_cost.h) reproduces the measured times:
//
//  * peak_flops = best measured GEMM rate ("measured", not theoretical);
//    gemm_points = every measured GEMM; gemm_efficiency = measured rate /
//    peak over FLOPs (log bins, made non-decreasing and never faster than
//    size, as PrepareProfile requires) for when gemm_points are ignored.
//  * attention_efficiency = sum planner FLOPs / (peak * sum(t - ops * overhead)).
//  * compute.bf16 (when bf16_gemms were measured): the same three fits on the
//    bf16-input GEMMs and attention, against their own best GEMM rate.
//  * memory_bound_efficiency = sum planner bytes / (bw * sum(t - ops * overhead)).
//  * optimizer_bytes_per_param = (t_step - overhead) * bw * mem_eff / params;
//    optimizer_time_by_params = each measured size's time per parameter over
//    that of optimizer_params (a larger size never taking less time in all).
//  * Collectives: LinkEntryFromSeries (planner/profile/collective_series.h).
// Fitted fractions outside (0, 1] are clamped and the clamp is noted.
// Fails (InvalidArgument) when the measurements are unusable (no GEMMs, a
// non-positive time); the result has passed PrepareProfile.
#pragma once

#include <string>
#include <vector>

#include "planner/profile/profile.h"
#include "planner/profile/machine_info.h"
#include "planner/profiler/measure_comm.h"
#include "planner/profiler/measure_compute.h"

namespace dt {

struct Measurements {
  std::string name;                    // profile name
  std::string device_kind = "cpu";     // cpu | gpu
  std::string device_name;             // CPU model or GPU name
  std::string gemm_library;            // the backend's GEMM; empty: "Eigen" (cpu) / "cuBLAS" (gpu)
  MachineInfo machine;
  int ranks_per_node = 1;
  int threads_per_rank = 1;
  std::vector<std::string> models;     // whose plan shapes were measured
  std::string command;                 // how it was run
  std::vector<GemmPoint> gemms;
  // The same GEMMs and attention shapes on the backend of precision=bf16
  // plans (bf16-rounded GEMM operands); empty: not measured.
  std::vector<GemmPoint> bf16_gemms;
  std::vector<KernelSample> bf16_attention;
  std::vector<ConversionPoint> bf16_conversions;  // the runtime's bf16 storage conversions
  std::vector<ModelSample> bf16_model_steps;       // whole-model bf16 steps (in-step bf16 GEMM times)
  std::string bf16_gemm;               // that GEMM's description
  double copy_Bps = 0;                 // stream copy per rank
  double tiny_op_s = 0;
  std::vector<KernelSample> attention;
  std::vector<KernelSample> memory_ops;
  std::vector<ModelSample> model_steps;  // whole-model fwd+bwd on the runtime
  double optimizer_s = 0;              // one step over optimizer_params
  double optimizer_params = 0;
  // The same step over other parameter counts (the caches hold small ones):
  // compute.optimizer_time_by_params. Empty: not measured.
  struct OptimizerPoint {
    double params = 0;
    double seconds = 0;
  };
  std::vector<OptimizerPoint> optimizer_sizes;
  int64_t memory_bytes = 0;            // per rank
  int64_t reserved_bytes = 0;          // baseline RSS / context per rank
  std::vector<CollSeries> collectives;
  // The same collectives timed inside the runtime's tp and dp steps
  // (measure_step_comm.h); empty: not measured (the series stay isolated).
  std::vector<CollSeries> in_step_collectives;
  // The machine's speed at the profile's start and at its end, measured the
  // same way both times (a shared VM's host can slow every kernel by 1.5x
  // for minutes, 2026-11-28): stream copy per rank and one whole training
  // step of the first model. Zero: not measured.
  struct SpeedProbe {
    double copy_Bps = 0;
    double step_s = 0;
  };
  SpeedProbe speed_start, speed_end;
  std::string speed_step_what;  // which step, e.g. "gpt-tiny training step mbs1"
};

// How much the machine's speed changed between Measurements::speed_start
// and speed_end, as |relative change|: the whole step's when it was timed
// both times, else the copy rate's; 0 when neither was.
double SpeedChange(const Measurements& m);

// One sentence stating both probes and their change ("" when not measured).
std::string SpeedProbeSummary(const Measurements& m);

// A warning for the user when SpeedChange exceeds `threshold` (the profile
// then mixes two machine speeds), naming what moved and how to re-run;
// "" otherwise.
std::string UnsteadyMachineWarning(const Measurements& m, double threshold = 0.2);

// Efficiency curve from GEMM points against `peak` (see header comment).
Curve GemmEfficiencyCurve(const std::vector<GemmPoint>& pts, double peak);

StatusOr<HardwareProfile> AssembleProfile(const Measurements& m);

}  // namespace dt
