// HardwareProfile: what one device and its network can do, as the cost
// models read it. One schema serves bundled profiles built from public
// numbers (profiles/*.json, every value sourced in the file) and measured
// profiles written by `dtplan profile`; docs/profiles.md documents each field.
//
// LoadProfile resolves a bundled name ("a100", "A100-SXM4-80GB", "h100",
// "H100-SXM5-80GB", "cpu", "cpu-generic") under DT_SOURCE_DIR "/profiles/",
// or reads a file path. Errors are Status values naming the file, the field
// and the fix; an unknown name is NotFound and lists the bundled names.
// A loaded profile is immutable data, safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/json_fields.h"
#include "planner/cost/layer_ops.h"
#include "planner/profile/interp.h"

namespace dt {

struct DeviceProfile {
  std::string kind = "gpu";          // "gpu" | "cpu"
  int64_t memory_bytes = 0;          // device memory capacity
  int64_t reserved_bytes = 0;        // context + NCCL buffers + allocator reserve
  double fragmentation = 0;          // fraction of the rest lost to fragmentation, [0, 1)
  std::string dtype = "bf16";        // "bf16" | "fp32": the training math type
  double peak_flops = 0;             // dense peak for dtype, FLOP/s
  double memory_bandwidth_Bps = 0;   // device memory bandwidth, bytes/s
  std::string note;
  int bytes_per_element() const { return dtype == "fp32" ? 4 : 2; }
};

// One measured GEMM: `batch` independent C[m,n] = A[m,k] B[k,n] in one call.
struct GemmPoint {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  double seconds = 0;
  double flops() const { return 2.0 * m * n * k * batch; }
  bool operator==(const GemmPoint& o) const {
    return m == o.m && n == o.n && k == o.k && batch == o.batch && seconds == o.seconds;
  }
};

// FP8 GEMMs (Transformer-Engine style: E4M3/E5M2 inputs with per-tensor
// scales, fp32 accumulation, bf16 output). Optional: peak_flops 0 means the
// device has no FP8 data and FP8 plans are refused on it.
struct Fp8Compute {
  double peak_flops = 0;  // dense FP8 Tensor Core peak, FLOP/s
  Curve gemm_efficiency;  // x = FLOPs per call, y = fraction of peak_flops (log-log)
  std::string note;
  bool available() const { return peak_flops > 0; }
  bool operator==(const Fp8Compute& o) const {
    return peak_flops == o.peak_flops && gemm_efficiency == o.gemm_efficiency && note == o.note;
  }
};

// Measured CPU profiles: the GEMMs and the attention core again with GEMM
// operands rounded to bf16 and fp32 accumulation, which is how dtrun runs a
// precision=bf16 plan on CPU (runtime/backend/bf16_gemm.h: oneDNN's
// AVX512-BF16 kernel where the CPU has one, else emulated at fp32 speed).
// Optional: no gemm_points = not measured, and bf16 plans are then priced
// with the fp32 numbers (ProfileForPrecision, planner/cost/compute_cost.h).
struct Bf16InputsCompute {
  double peak_flops = 0;                // best measured bf16-input GEMM rate, FLOP/s
  std::vector<GemmPoint> gemm_points;   // as ComputeProfile::gemm_points
  Curve gemm_efficiency;                // measured rate / peak_flops (as the fp32 curve)
  double attention_efficiency = 0;      // runtime attention fwd+bwd, fraction of peak_flops
  // The CPU runtime's bf16 storage conversions (runtime/tensor/bf16.h
  // NarrowToBf16 / WidenFromBf16), timed on the runtime: x = elements per
  // call, y = seconds per element, the call repeated on one buffer (so data
  // that fits in the caches is converted from them). Optional (empty:
  // planner/lower/plan_costs.cc prices the conversions as memory-bound
  // traffic); both or neither.
  Curve narrow_s_per_element;
  Curve widen_s_per_element;
  std::string note;
  Curve measured_gemm_seconds;          // derived by PrepareProfile, as ComputeProfile's
  bool available() const { return !gemm_points.empty(); }
  bool has_conversions() const { return !narrow_s_per_element.empty(); }
  bool operator==(const Bf16InputsCompute& o) const {
    return peak_flops == o.peak_flops && gemm_points == o.gemm_points && gemm_efficiency == o.gemm_efficiency &&
           attention_efficiency == o.attention_efficiency && narrow_s_per_element == o.narrow_s_per_element &&
           widen_s_per_element == o.widen_s_per_element && note == o.note;
  }
};

// A measured profile's own end check: one whole training step the profiler
// ran with the runtime, against the profile's prediction of it (after every
// fit). Says how far this profile's predictions are from its machine.
struct StepCheck {
  std::string what;          // e.g. "gpt-tiny training step mbs8"
  double measured_s = 0;     // median step time, max over the node's ranks
  double predicted_s = 0;
  // The step's precision, "fp32" or "bf16" (JSON: absent = fp32): bf16
  // steps are predicted as the planner prices a 1-rank bf16 plan.
  std::string precision = "fp32";
  bool operator==(const StepCheck& o) const {
    return what == o.what && measured_s == o.measured_s && predicted_s == o.predicted_s &&
           precision == o.precision;
  }
};

// Host time of an eager Megatron-Core MoE block (router, token dispatcher,
// permutations, combine; not its expert GEMM launches, which OpTime prices
// one per expert) per layer and microbatch, measured on a GPU machine's host
// (scripts/moe-host-overhead.py). Optional, GPU profiles; all 0 = the MoE
// block's host time is not priced. The dropless dispatcher synchronises the
// host with the device once per forward, after routing (the token counts it
// needs as host integers); plan_costs.cc prices that synchronisation.
struct MoeHostProfile {
  double router_s = 0;    // forward: router, aux loss, counts, first permutation (before the sync)
  double dispatch_s = 0;  // forward: dispatch, experts' glue, combine, unpermutation (after it)
  double backward_s = 0;  // backward of the whole block
  std::string note;
  bool available() const { return router_s > 0 || dispatch_s > 0 || backward_s > 0; }
  bool operator==(const MoeHostProfile& o) const {
    return router_s == o.router_s && dispatch_s == o.dispatch_s && backward_s == o.backward_s && note == o.note;
  }
};

struct ComputeProfile {
  Curve gemm_efficiency;                // x = FLOPs per call, y = fraction of peak (log-log)
  std::string gemm_efficiency_note;
  std::vector<GemmPoint> gemm_points;   // optional measurements; preferred when present
  double attention_efficiency = 0;      // fraction of peak of the attention core
  // Optional, measured: the attention core's efficiency (planner FLOPs: the
  // full square, backward twice the forward) by the number of keys each query
  // row meets (Op::n). Flash kernels fill the GPU better on longer sequences.
  // Used instead of attention_efficiency when present.
  Curve attention_efficiency_by_keys;
  std::string attention_efficiency_by_keys_note;
  // Optional, measured: the same for cuDNN's fused attention (Transformer
  // Engine's kernel on Hopper), used for plans with cudnn_attention
  // (plan_spec.h); a plan that asks for it on a profile without it is
  // priced with the default curve and flagged outside the profile.
  Curve attention_efficiency_by_keys_cudnn;
  std::string attention_efficiency_by_keys_cudnn_note;
  // Optional, measured: the same two kernels without a causal mask, by the
  // keys of the block (the full block counted: it is all computed). Used for
  // the non-causal blocks of a context-parallel ring (Op::cp_ring); without
  // them a ring is priced as one causal kernel over the whole sequence.
  Curve attention_noncausal_by_keys;
  std::string attention_noncausal_by_keys_note;
  Curve attention_noncausal_by_keys_cudnn;
  std::string attention_noncausal_by_keys_cudnn_note;
  double memory_bound_efficiency = 0;   // fraction of memory bandwidth for streaming kernels
  double kernel_overhead_s = 0;         // launch + tail per kernel
  double optimizer_bytes_per_param = 0; // bytes moved per parameter by one optimizer step
  // Optional, measured (CPU profiles): the optimizer step's time per
  // parameter by the number of parameters one rank updates (x), relative to
  // what optimizer_bytes_per_param prices (y; 1 at the size that value was
  // measured at). A step over a few hundred thousand parameters keeps its
  // weights, gradients and moments in the caches and streams them 2-3x
  // faster than one over millions, which go to DRAM. Log-linear between the
  // points, clamped to the end values outside them; empty = 1 everywhere.
  // y * x must not decrease with x (more parameters never take less time).
  Curve optimizer_time_by_params;
  std::string optimizer_time_by_params_note;
  // Host (framework) time to launch one kernel or collective. Launches are
  // asynchronous, so an op takes max(device time, host time): small ops are
  // host-bound, large ones device-bound. Optional (0 = never host-bound).
  double host_overhead_s = 0;
  // The framework's host runs ahead of the device across layers (no host
  // synchronisation between a chunk's layers: Megatron-Core's eager layers),
  // so a layer's op list is priced in its steady state, where a host that
  // keeps ahead hides its launches, rather than from a start in step with
  // the device (the default: the A100 sources' Megatron-DeepSpeed and 2021
  // Megatron-LM fit that start better). Optional, GPU profiles.
  bool host_runs_ahead = false;
  // Host time per training step outside the kernels (optimizer bookkeeping,
  // loss/grad-norm synchronisation, data loading, logging). Optional.
  double step_overhead_s = 0;
  MoeHostProfile moe_host;  // optional (GPU profiles)
  // What a full recompute costs in situ over what its op list prices (the
  // forward's ops re-run right before each layer's backward), measured by
  // `dtplan profile` on CPUs as (step with full recompute - plain step) /
  // priced recompute, median over the microbatch sizes it times; it
  // multiplies the compute of full-recompute op lists (plan_costs.cc).
  // Optional, 1 = priced as a forward (GPU profiles).
  double recompute_cost_ratio = 1.0;
  Fp8Compute fp8;  // optional (GPUs with FP8 Tensor Cores)
  Bf16InputsCompute bf16;  // optional (measured CPU profiles)
  std::vector<StepCheck> step_checks;  // optional (profiles measured by dtplan profile)
  std::string note;
  // Derived by PrepareProfile from gemm_points (not serialized): x = FLOPs
  // per call, y = seconds, made non-decreasing (running maximum).
  Curve measured_gemm_seconds;
};

// One row of a collective table. `key` is the group size (intra-node) or the
// group's ranks per node (inter-node).
struct LinkEntry {
  int key = 0;
  double latency_s = 0;   // small-message time (intra) / per-step base (inter); see docs
  double busbw_Bps = 0;   // nccl-tests bus bandwidth plateau (large messages)
  Curve points;           // optional: x = message bytes, y = busbw (measured)
  std::string note;
  bool operator==(const LinkEntry& o) const {
    return key == o.key && latency_s == o.latency_s && busbw_Bps == o.busbw_Bps &&
           points == o.points && note == o.note;
  }
};

struct CollectiveTable {
  std::vector<LinkEntry> intra;  // sorted by key (group size >= 2)
  std::vector<LinkEntry> inter;  // sorted by key (ranks per node >= 1)
};

struct NetworkProfile {
  int gpus_per_node = 1;
  // Indexed by CollKind: all_reduce, reduce_scatter, all_gather, send_recv.
  // No all_to_all table: comm_cost.h derives it from all_gather.
  std::array<CollectiveTable, 4> collectives;
  std::string note;
  const CollectiveTable& table(CollKind k) const {
    DT_CHECK(k != CollKind::kAllToAll) << "profiles hold no all_to_all table; price it with CollectiveTime";
    return collectives[static_cast<int>(k)];
  }
};

// Which machine a measured CPU profile describes (empty for the bundled
// GPU profiles, whose numbers come from datasheets and papers). CPU speeds
// differ between CPU models, so a planner run on another machine warns.
struct MachineSpec {
  std::string cpu_model;     // /proc/cpuinfo "model name"
  int cores = 0;             // logical CPUs of the measured machine
  int ranks_per_node = 0;    // MPI ranks measured concurrently
  // The runtime backend's GEMM as measured: "OpenBLAS 0.3.21, SkylakeX kernels",
  // "Eigen", "cuBLAS".
  std::string gemm_library;
};

struct HardwareProfile {
  std::string name;
  MachineSpec machine;
  std::string description;
  std::string created;                          // ISO date
  std::map<std::string, std::string> sources;   // key -> citation
  DeviceProfile device;
  ComputeProfile compute;
  NetworkProfile network;
};

// JSON key of a collective in the schema: "all_reduce", "reduce_scatter",
// "all_gather", "send_recv".
const char* CollectiveKey(CollKind k);

// Names of the bundled profiles (file stems under DT_SOURCE_DIR/profiles).
std::vector<std::string> BundledProfileNames();

// Bundled name, alias ("a100", "h100", "cpu") or path to a JSON file.
StatusOr<HardwareProfile> LoadProfile(const std::string& name_or_path);
// The file LoadProfile reads for `name_or_path` (NotFound for an unknown
// bundled name, with the list).
StatusOr<std::string> ProfilePath(const std::string& name_or_path);

// For a profile with step checks (ComputeProfile::step_checks, written by
// `dtplan profile`): one line with the range of its prediction errors on
// those steps and the worst one, the error to expect on its machine; empty
// without checks.
std::string StepCheckNote(const HardwareProfile& hw);
// Parses and validates; `where` names the source in error messages.
StatusOr<HardwareProfile> ProfileFromJson(const json& j, const std::string& where);
// A profile file's content (ParseJsonText + ProfileFromJson), no file
// access; `path` names the source in errors. LoadProfile of a path is this
// on the file's content.
StatusOr<HardwareProfile> ProfileFromJsonText(const std::string& text, const std::string& path);
// Inverse of ProfileFromJson: ProfileFromJson(ToJson(p)) == p.
json ToJson(const HardwareProfile& p);

// Validates every field and fills the derived lookup tables; call it after
// building or editing a profile in code. ProfileFromJson calls it.
Status PrepareProfile(HardwareProfile* p, const std::string& where);

// Ok when the profile can price plans with cudnn_attention (it has
// compute.attention_efficiency_by_keys_cudnn); else InvalidArgument naming
// the profile and what to do.
Status CheckCudnnAttentionCurve(const HardwareProfile& p);

bool operator==(const HardwareProfile& a, const HardwareProfile& b);

}  // namespace dt
