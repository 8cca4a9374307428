#include "planner/cost/compute_cost.h"

#include <algorithm>
#include <cmath>

namespace dt {
namespace {

double GemmFlops(const Op& op) {
  if (op.flops > 0) return op.flops;
  return 2.0 * static_cast<double>(op.m) * op.n * op.k * op.batch;
}

// Bytes a GEMM must at least move: read A and B, write C, once each.
double GemmMinBytes(const Op& op, const HardwareProfile& p) {
  const double in = static_cast<double>(op.m) * op.k + static_cast<double>(op.k) * op.n;
  const double out = static_cast<double>(op.m) * op.n;
  const int e = p.device.bytes_per_element();
  return (in * (op.fp8 ? 1 : e) + out * e) * op.batch;
}

double MemoryTime(double bytes, const HardwareProfile& p) {
  return bytes / (p.device.memory_bandwidth_Bps * p.compute.memory_bound_efficiency);
}

// The attention core's efficiency: the measured curve over the keys each
// query row meets where the profile has one (clamped at its ends), else the
// profile's single value. A context-parallel ring (Op::cp_ring = cp > 1)
// on a profile with the kernel's non-causal curve runs, per rank, one causal
// block of its s = m local queries and keys (full-square work s^2, at the
// causal curve's efficiency at s keys) and cp - 1 non-causal blocks of
// s x s/2 (Transformer Engine's load-balanced halves: all of it computed,
// at the non-causal curve's efficiency at the blocks' geometric-mean side
// s / sqrt 2). The op counts cp s^2 (the full square), so the efficiency
// that prices the ring's time is cp / (1 / e_causal + (cp - 1) / (2 e_nc)).
double AttentionEfficiency(const Op& op, const HardwareProfile& p) {
  const ComputeProfile& pc = p.compute;
  const bool cudnn = op.cudnn_attention && !pc.attention_efficiency_by_keys_cudnn.empty();
  const Curve& c = cudnn ? pc.attention_efficiency_by_keys_cudnn : pc.attention_efficiency_by_keys;
  if (c.empty()) return pc.attention_efficiency;
  auto at = [](const Curve& curve, double keys) {
    return Interpolate(curve, std::max(keys, 1.0), Scale::kLog, Scale::kLinear).value;
  };
  const Curve& nc = cudnn ? pc.attention_noncausal_by_keys_cudnn : pc.attention_noncausal_by_keys;
  if (op.cp_ring <= 1 || nc.empty()) return at(c, static_cast<double>(op.n));
  const double s = static_cast<double>(std::max<int64_t>(op.m, 1));
  const double e_causal = at(c, s), e_nc = at(nc, s / std::sqrt(2.0));
  const int cp = op.cp_ring;
  return cp / (1.0 / e_causal + (cp - 1) / (2.0 * e_nc));
}

double GemmCalls(const Op& op) { return static_cast<double>(std::max<int64_t>(op.batch, 1)); }

double MeasuredGemmTime(const Op& op, const HardwareProfile& p) {
  const ComputeProfile& c = p.compute;
  for (const GemmPoint& g : c.gemm_points)
    if (g.m == op.m && g.n == op.n && g.k == op.k && g.batch == op.batch) return g.seconds;
  // Time per FLOP is what scales with peak; the measured curve already holds
  // the overheads of the measured kernels. A batched GEMM is `batch` calls,
  // each timed at its own size (dtrun runs an MoE rank's experts one by one).
  const double per_call = GemmCallFlops(op);
  double t = Interpolate(c.measured_gemm_seconds, per_call, Scale::kLog, Scale::kLog).value;
  if (per_call < c.measured_gemm_seconds.x.front()) t *= per_call / c.measured_gemm_seconds.x.front();
  if (per_call > c.measured_gemm_seconds.x.back()) t *= per_call / c.measured_gemm_seconds.x.back();
  return GemmCalls(op) * std::max(t, c.kernel_overhead_s);
}

}  // namespace

double GemmCallFlops(const Op& op) { return GemmFlops(op) / GemmCalls(op); }

double GemmEfficiency(double flops, const HardwareProfile& p, bool* clamped) {
  InterpResult r = Interpolate(p.compute.gemm_efficiency, std::max(flops, 1.0), Scale::kLog,
                               Scale::kLog);
  if (clamped) *clamped = r.clamped;
  return r.value;
}

namespace {
double DeviceTime(const Op& op, const HardwareProfile& p);
}

// One op on its own: bound by the device or by the host that launches it,
// whichever is slower. Op lists are priced as a launch queue instead
// (planner/lower/plan_costs.cc), from OpDeviceTime.
double OpTime(const Op& op, const HardwareProfile& p) {
  const double t = OpDeviceTime(op, p);
  return t > 0 ? std::max(t, p.compute.host_overhead_s) : 0.0;
}

double OpDeviceTime(const Op& op, const HardwareProfile& p) {
  return DeviceTime(op, p) * op.imbalance;  // the busiest rank's routed tokens (MoE)
}

namespace {
double DeviceTime(const Op& op, const HardwareProfile& p) {
  const double peak = p.device.peak_flops;
  const double overhead = p.compute.kernel_overhead_s;
  switch (op.kind) {
    case OpKind::kGemm: {
      double flops = GemmFlops(op);
      if (flops <= 0) return 0;
      // A batched GEMM (the grouped GEMM of an MoE layer's local experts) is
      // `batch` GEMM calls of flops / batch each, every one at the
      // efficiency of its own size: Transformer Engine's grouped linear runs
      // one cuBLAS GEMM per expert (multi_stream_cublas_gemm, its default on
      // Hopper), and dtrun loops over its experts. One launch overhead per
      // call: the streams overlap the GPU tails, but the host still issues
      // every call (on one H100, 16 experts' six GEMMs at 256 tokens each took
      // 3.7x longer launched one by one than replayed from a CUDA graph:
      // profiles/sources/h100-moe-gemms-2026-11-27.json).
      const double per_call = GemmCallFlops(op);
      const double launches = overhead * GemmCalls(op);
      if (op.fp8) {
        const Fp8Compute& f = p.compute.fp8;
        DT_CHECK(f.available()) << "FP8 GEMM '" << op.name << "' on profile '" << p.name
                                << "' without compute.fp8 (CheckPrecision not called)";
        const double eff = Interpolate(f.gemm_efficiency, std::max(per_call, 1.0), Scale::kLog, Scale::kLog).value;
        return std::max(flops / (f.peak_flops * eff), MemoryTime(GemmMinBytes(op, p), p)) + launches;
      }
      if (!p.compute.gemm_points.empty()) return MeasuredGemmTime(op, p);
      double math = flops / (peak * GemmEfficiency(per_call, p));
      return std::max(math, MemoryTime(GemmMinBytes(op, p), p)) + launches;
    }
    case OpKind::kAttention: {
      if (op.flops <= 0 && op.bytes <= 0) return 0;
      double math = op.flops / (peak * AttentionEfficiency(op, p));
      return std::max(math, MemoryTime(op.bytes, p)) + overhead;
    }
    case OpKind::kMemoryBound:
      if (op.bytes <= 0) return 0;
      return MemoryTime(op.bytes, p) + overhead;
    case OpKind::kCollective:
      DT_CHECK(false) << "OpTime called on collective '" << op.name
                      << "'; price collectives with CollectiveTime (comm_cost.h)";
  }
  return 0;
}
}  // namespace

Status CheckPrecision(Precision precision, const ModelSpec& m, const HardwareProfile& p) {
  if (precision != Precision::kFp8) return Status::Ok();
  if (!p.compute.fp8.available())
    return InvalidArgument("precision fp8: profile '" + p.name +
                           "' has no FP8 GEMM data (compute.fp8); FP8 is modeled on H100-SXM5-80GB "
                           "(--profile h100), or use --precision bf16");
  return Status::Ok();
}

const HardwareProfile& ProfileForPrecision(const HardwareProfile& p, Precision precision,
                                           HardwareProfile* storage) {
  if (precision != Precision::kBf16 || p.device.dtype != "fp32" || !p.compute.bf16.available()) return p;
  *storage = p;
  Bf16InputsCompute b = std::move(storage->compute.bf16);
  storage->compute.bf16 = Bf16InputsCompute();
  // The storage conversions stay: plan_costs.cc prices the CPU runtime's
  // bf16 storage with them.
  storage->compute.bf16.narrow_s_per_element = std::move(b.narrow_s_per_element);
  storage->compute.bf16.widen_s_per_element = std::move(b.widen_s_per_element);
  storage->device.peak_flops = b.peak_flops;
  ComputeProfile& c = storage->compute;
  c.gemm_points = std::move(b.gemm_points);
  c.measured_gemm_seconds = std::move(b.measured_gemm_seconds);
  c.gemm_efficiency = std::move(b.gemm_efficiency);
  c.gemm_efficiency_note = "bf16 GEMM inputs (compute.bf16)";
  c.attention_efficiency = b.attention_efficiency;
  return *storage;
}

bool Bf16PricedAsFp32(const HardwareProfile& p, Precision precision) {
  return precision == Precision::kBf16 && p.device.kind == "cpu" && p.device.dtype == "fp32" &&
         !p.compute.bf16.available();
}

double OptimizerTimeFactor(double params, const HardwareProfile& p) {
  const Curve& c = p.compute.optimizer_time_by_params;
  if (c.empty()) return 1.0;
  return Interpolate(c, std::max(params, 1.0), Scale::kLog, Scale::kLinear).value;
}

double ComputeTime(const std::vector<Op>& ops, const HardwareProfile& p) {
  double t = 0;
  for (const Op& op : ops)
    if (op.kind != OpKind::kCollective) t += OpTime(op, p);
  return t;
}

}  // namespace dt
