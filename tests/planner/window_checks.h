// Shared check of the sliding-window and chunked-attention tests
// (window_test.cc, llama4_test.cc): a plan's chunk costs for model `m`
// (with windowed or chunked layers) and for `full` (the same model with
// full causal attention everywhere) differ by exactly the windowed layers'
// attention-core time, forward and backward. Returns the number of
// windowed layers per chunk, for the caller's own expectations.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/plan_costs.h"

namespace dt::testing_models {

inline std::vector<int> ExpectChunksSaveTheWindowedAttention(const ModelSpec& m, const ModelSpec& full,
                                                             const ClusterSpec& c, const PlanSpec& p,
                                                             const HardwareProfile& hw) {
  const PlanCosts windowed = ComputePlanCosts(m, c, p, hw), causal = ComputePlanCosts(full, c, p, hw);
  auto core = [&](bool w, bool bwd) {
    const LayerOps l = TransformerLayerOps(m, p, 2, w);
    double t = 0;
    for (const Op& op : bwd ? l.backward : l.forward)
      if (op.kind == OpKind::kAttention) t += OpTime(op, hw);
    return t;
  };
  const double save_f = core(false, false) - core(true, false), save_b = core(false, true) - core(true, true);
  EXPECT_GT(save_f, 0);
  std::vector<int> per_chunk;
  for (int ch = 0; ch < p.num_chunks(); ++ch) {
    const int w = m.WindowedLayers(p.ChunkFirstLayer(ch), p.layers_per_chunk[ch]);
    per_chunk.push_back(w);
    EXPECT_NEAR(causal.chunks[ch].fwd_compute - windowed.chunks[ch].fwd_compute, w * save_f, 1e-9) << ch;
    EXPECT_NEAR(causal.chunks[ch].bwd_compute - windowed.chunks[ch].bwd_compute, w * save_b, 1e-9) << ch;
  }
  return per_chunk;
}

}  // namespace dt::testing_models
