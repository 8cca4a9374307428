// Memory of one GPU of a pipeline rank: weights, gradients, optimizer
// states (with ZeRO sharding over the dp*cp replicas, Rajbhandari et al.
// 2020), activations (Korthikanti et al. 2022, see activation_memory.h),
// temporaries and reserved bytes. Pure function of validated inputs; a
// pipeline_rank outside [0, pp) aborts. Formulas: docs/memory.md.
#pragma once

#include "planner/memory/memory_params.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct StageMemory {  // bytes per GPU
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, temporary = 0, reserved = 0;
  double total = 0;  // weights + gradients + optimizer + (activations + temporary) * (1 + fragmentation) + reserved
};

// in_flight_microbatches: peak (microbatch, chunk) pairs live on the rank,
// in microbatches of one model chunk (planner/schedule/in_flight.h). Stored
// activations = per-layer bytes x (StageLayers / vpp) x in_flight, plus the
// recompute working set, the first/last-stage extras and p2p buffers. Under
// combined 1F1B (moe_a2a_overlap) the pair's forward is counted in
// in_flight_microbatches but runs layer by layer against a backward, so
// one chunk-microbatch less plus one layer is stored (docs/memory.md).
StageMemory EstimateStageMemory(const ModelSpec& m, const PlanSpec& p, const MemoryParams& mp,
                                int pipeline_rank, int in_flight_microbatches);

// What a framework's caching allocator counts as allocated at the peak
// (torch.cuda.max_memory_allocated): everything but the reserve (context,
// communication buffers: outside the allocator) and the fragmentation
// allowance (cached, not allocated).
inline double AllocatedBytes(const StageMemory& s) {
  return s.weights + s.gradients + s.optimizer + s.activations + s.temporary;
}

// total <= capacity_bytes.
inline bool FitsDevice(const StageMemory& s, const MemoryParams& mp) {
  return s.total <= mp.capacity_bytes;
}

}  // namespace dt
