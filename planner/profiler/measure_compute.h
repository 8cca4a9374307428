// Compute measurements on one rank, with the runtime's own Backend and ops
// (runtime/backend, runtime/ops, runtime/optim), so the profile prices the
// code the runtime actually runs. Every measurement runs on all ranks at
// once (the ranks of a node share its cores and memory bandwidth: that
// contention is what a training step sees) and reports the slowest rank's
// median over repetitions.
//
// `sync` is a host communicator over the measuring ranks (MpiComm over the
// world), used only for barriers and max-reductions of timings; nullptr for
// a single process. The backend may be CPU or CUDA (calls are followed by
// Synchronize()). Device errors abort (DT_CHECK), as in the runtime.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "planner/profile/profile.h"
#include "planner/profiler/gemm_shapes.h"
#include "runtime/backend/backend.h"
#include "runtime/comm/comm.h"

namespace dt {

using ProgressFn = std::function<void(const std::string&)>;

struct MeasureConfig {
  rt::Backend* be = nullptr;
  rt::Comm* sync = nullptr;     // barriers / max over ranks; may be null
  int warmup = 1;
  int max_reps = 5;             // repetitions per point (median), at least 3 when time allows
  double point_budget_s = 0.3;  // time spent per point beyond the warmup
  ProgressFn progress;          // may be empty
  // MeasureModelSteps: also time every GEMM inside the step (host wall
  // time per call: meaningful on a synchronous backend, the CPU's only).
  bool time_gemms_in_step = false;
};

// The plan of the profiler's runtime steps: one chunk of all the model's
// layers, no recompute, unfused attention, no dropout (a fixed reference
// step; dropout's passes are priced as memory traffic like other elementwise ops),
// num_microbatches microbatches of micro_batch sequences of seq tokens.
PlanSpec ProfilerStepPlan(const ModelSpec& m, int seq, int micro_batch, int num_microbatches);

// Runs fn (then be->Synchronize()) concurrently on every rank of
// cfg.sync; returns the slowest rank's median seconds per call.
double ConcurrentMedianSeconds(const MeasureConfig& cfg, const std::function<void()>& fn);

// One measured GemmPoint per shape (planner keys, runtime call variants):
// the median of three rounds over the shapes, each round in its own fixed
// shuffle (identical on every rank), with a third of the per-point budget
// each, so that a drift of the machine's speed during the profile does not
// line up with GEMM size.
std::vector<GemmPoint> MeasureGemms(const MeasureConfig& cfg, const std::vector<GemmShape>& shapes);

// The same (in rounds) on two backends, shape by shape: shape i on cfg,
// then (when its FLOPs are at most second_max_flops) on second_cfg, so that the two sets
// see the same machine speed (a VM's speed drifts by 10-20% within minutes:
// measured one after the other, their ratio would carry that drift).
void MeasureGemmsInterleaved(const MeasureConfig& cfg, const MeasureConfig& second_cfg,
                             double second_max_flops, const std::vector<GemmShape>& shapes,
                             std::vector<GemmPoint>* first, std::vector<GemmPoint>* second);

// Stream copy bandwidth per rank (bytes read + written per second) over
// buffers of `bytes`, all ranks copying at once.
double MeasureCopyBandwidth(const MeasureConfig& cfg, int64_t bytes);

// Time of a tiny kernel (an elementwise add of one element).
double MeasureTinyOp(const MeasureConfig& cfg);

// A measured group of kernels and what the planner's cost model counts for
// the same work (planner/cost/layer_ops.h): its FLOPs, bytes and op count.
struct KernelSample {
  std::string what;
  double planner_flops = 0;
  double planner_bytes = 0;
  int planner_ops = 0;
  double seconds = 0;
};

// Attention core forward + backward (runtime/ops/attention) of one layer
// at (seq, mbs, heads / tp) for each tp and mbs with forward FLOPs <= cap.
std::vector<KernelSample> MeasureAttention(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                           const std::vector<int>& tps,
                                           const std::vector<int>& mbs, double max_flops);

// The memory-bound kernels of one GPT layer, forward + backward, as
// runtime/model/gpt_layer.cc issues them (LayerNorm, bias adds, GeLU,
// residual adds, bias grads), against the planner's memory-bound ops.
std::vector<KernelSample> MeasureLayerMemoryOps(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                                const std::vector<int>& tps, int mbs);

// One whole-model training step (zero grads, forward + backward, clip +
// AdamW) on the runtime (runtime/model/
// ModelChunk: embedding, every layer, final norm, LM head and loss; tp = pp
// = 1, no recompute, unfused attention, no dropout) at microbatch `mbs`,
// with the planner ops describing the same work (layer_ops.h). What the
// runtime does beyond the isolated kernels — tensor allocation and zero
// fill, clones, per-head attention calls, the embedding and the loss —
// shows up as the residual between the two; AssembleProfile fits it.
struct ModelSample {
  std::string what;
  std::vector<Op> ops;  // planner ops of the same work (no collectives)
  int64_t params = 0;   // parameters the optimizer step updates
  double seconds = 0;   // zero grads + forward + backward + optimizer step
  // With MeasureConfig::time_gemms_in_step: this rank's time per call of
  // each linear-layer GEMM inside the timed steps (MedianOverSteps of each
  // step's mean per call), keyed as the planner keys it (the shapes of
  // `ops`; attention's per-head GEMMs are left out).
  std::vector<GemmPoint> in_step_gemms;
  // With MeasureModelSteps' recompute_max_step_s: the same step with every
  // layer fully recomputed (dtrun's --recompute full: each layer's forward
  // re-run right before its backward), its steps alternated with the plain
  // ones (median; 0 when not measured), and the planner ops that recompute
  // adds (TransformerLayerOps(...).recompute of each layer).
  double full_recompute_seconds = 0;
  std::vector<Op> recompute_ops;
  // The model and the 1-rank plan the step ran (ProfilerStepPlan with the
  // step's precision): what a whole-plan prediction of the step prices.
  ModelSpec model;
  PlanSpec plan;
};

// Per shape, the median over steps of each step's time per call (a shape
// missing from a step has one sample fewer). A call descheduled for
// milliseconds on a shared VM moves one step's sample, not the result.
std::vector<GemmPoint> MedianOverSteps(const std::vector<std::vector<GemmPoint>>& steps);
// recompute_max_step_s > 0: microbatch sizes whose plain step (its warm-up)
// takes at most that long are also timed with full recompute, each timed
// step of one kind followed by one of the other (the order flipped every
// repetition), so a machine whose speed drifts moves both alike.
// precision kBf16: the runtime's bf16 steps (bf16 storage, the stash
// narrowed, GEMMs on cfg.be, which must then be the bf16-input backend); the
// in-step GEMM times are those of compute.bf16.
std::vector<ModelSample> MeasureModelSteps(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                           const std::vector<int>& mbs, double recompute_max_step_s = 0,
                                           Precision precision = Precision::kFp32);

// The runtime's bf16 storage conversions (runtime/tensor/bf16.h:
// NarrowToBf16, WidenFromBf16), each over one buffer of `elements`
// elements, every rank at once, the call repeated on the same buffers (a
// buffer that fits in the caches is converted from them, as a layer's
// freshly written stash is): seconds per element of each.
struct ConversionPoint {
  int64_t elements = 0;
  double narrow_s = 0;  // per element
  double widen_s = 0;   // per element
};
std::vector<ConversionPoint> MeasureBf16Conversions(const MeasureConfig& cfg, const std::vector<int64_t>& elements);

// One optimizer step (gradient squares for the norm + AdamW update,
// runtime/optim) over `params` parameters: seconds.
double MeasureOptimizerStep(const MeasureConfig& cfg, int64_t params);

}  // namespace dt
