// Which GEMMs to measure: the shapes a model's plans run (every TP split and
// microbatch size, forward and both backward products of each linear layer
// and the LM head, from planner/cost/layer_ops.h) plus a generic size grid
// so that shapes of other models interpolate inside the measured range.
//
// Shapes are keyed as the planner keys them (Op::m, n, k); `call` records
// how the runtime's linear layer (runtime/ops/linear.cc) issues that
// product, so the profiler times the very call the runtime makes:
//   kForward  planner (m=T, n=out, k=in)  -> Gemm(N, T, m, n, k)   y = x W^T
//   kDgrad    planner (m=T, n=in, k=out)  -> Gemm(N, N, m, n, k)   dx = dy W
//   kWgrad    planner (m=in, n=out, k=T)  -> Gemm(T, N, n, m, k)   dW += dy^T x
// (the wgrad's C is stored [out, in], the planner's transpose, same FLOPs).
// Pure functions; no failure modes (models are Validate()d by LoadModel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/spec/model_spec.h"

namespace dt {

enum class GemmCall { kForward, kDgrad, kWgrad };

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  GemmCall call = GemmCall::kForward;
  std::string origin;  // e.g. "gpt2-124m tp2 mbs4 fc1_wgrad", or "grid"
  double flops() const { return 2.0 * m * n * k; }
};

// TP sizes that divide the model's heads, up to max_tp.
std::vector<int> TpSplits(const ModelSpec& m, int max_tp);

// GEMMs of one transformer layer and the LM head for every (tp, mbs).
std::vector<GemmShape> ModelGemmShapes(const ModelSpec& m, int seq_length,
                                       const std::vector<int>& tps, const std::vector<int>& mbs);

// Roughly log-spaced square-ish forward GEMMs from 2*16^3 FLOPs up to max_flops.
std::vector<GemmShape> GenericGemmGrid(double max_flops);

// Dedupes by (m, n, k) (first occurrence wins), drops shapes above
// max_flops (returned in *skipped when non-null), sorts by FLOPs.
std::vector<GemmShape> SelectGemmShapes(std::vector<GemmShape> all, double max_flops,
                                        std::vector<GemmShape>* skipped);

}  // namespace dt
