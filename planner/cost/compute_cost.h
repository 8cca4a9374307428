// Compute-time model: predicted seconds of one kernel (a GEMM, an attention
// core or a memory-bound op) on one device described by a HardwareProfile.
//
//   GEMM:         max(flops / (peak * eff(flops)), min_bytes / (bw * mem_eff)) + overhead,
//                 eff from compute.gemm_efficiency (log-log in FLOPs per call);
//                 with measured compute.gemm_points: the measured time of an
//                 identical shape, else the measured time curve interpolated
//                 log-log over FLOPs per call (floored at the kernel overhead).
//   FP8 GEMM (op.fp8): the same with compute.fp8's peak and efficiency curve,
//                 A and B read as 1-byte elements, C written in bf16.
//   attention:    max(flops / (peak * attention_efficiency), bytes / (bw * mem_eff)) + overhead
//   memory-bound: bytes / (bw * memory_bound_efficiency) + overhead
// Monotone: more FLOP/s or bandwidth never makes an op slower; more work
// never makes it faster (PrepareProfile enforces the curve conditions).
// Collectives are priced by comm_cost.h; passing one here is a bug (DT_CHECK).
// Pure functions of their arguments; thread-safe.
#pragma once

#include "planner/cost/layer_ops.h"
#include "planner/profile/profile.h"

namespace dt {

double OpTime(const Op& op, const HardwareProfile& profile);
// The device's time alone: OpTime without the host floor (compute.host_overhead_s),
// for callers that model the host's launch queue themselves (plan_costs.cc).
double OpDeviceTime(const Op& op, const HardwareProfile& profile);

// OK when `profile` can price a plan of this precision for this model:
// FP8 needs compute.fp8 (a GPU with FP8 Tensor Cores) and a dense model
// (FP8 expert GEMMs are not modeled). The error names the fix.
Status CheckPrecision(Precision precision, const ModelSpec& m, const HardwareProfile& profile);

// The profile a plan of `precision` is priced with. A bf16 plan on a profile
// whose math type is fp32 (a measured CPU profile) with compute.bf16 data
// takes those bf16-input GEMM points, efficiency curve, peak and attention
// efficiency: how dtrun runs it there (runtime/backend/bf16_gemm.h). The copy
// is written to *storage, with its compute.bf16 emptied but for the storage
// conversion curves (narrow / widen_s_per_element, which the CPU runtime's
// bf16 storage is priced with), so that a second call returns it unchanged.
// Otherwise returns `profile` itself (no copy).
const HardwareProfile& ProfileForPrecision(const HardwareProfile& profile, Precision precision,
                                           HardwareProfile* storage);
// True when a bf16 plan on `profile` is priced with fp32 GEMM numbers although
// dtrun would run its GEMMs on bf16 operands: a CPU profile without compute.bf16.
bool Bf16PricedAsFp32(const HardwareProfile& profile, Precision precision);

// Achieved fraction of peak of a GEMM of `flops` FLOPs per call from
// compute.gemm_efficiency; `*clamped` (optional) reports extrapolation.
double GemmEfficiency(double flops, const HardwareProfile& profile, bool* clamped = nullptr);

// A batched GEMM op (an MoE layer's grouped expert GEMM) is priced as
// op.batch calls of this many FLOPs each, every one at its own size.
double GemmCallFlops(const Op& op);

// The optimizer step's time per parameter when one rank updates `params`
// of them, relative to compute.optimizer_bytes_per_param's price:
// compute.optimizer_time_by_params (log-linear in parameters, clamped at its
// ends), 1 when the profile has no such curve (every bundled GPU profile).
double OptimizerTimeFactor(double params, const HardwareProfile& profile);

// Sum of OpTime over non-collective ops (collectives are skipped).
double ComputeTime(const std::vector<Op>& ops, const HardwareProfile& profile);

}  // namespace dt
