// Deterministic, plan-independent parameter initialisation.
//
// Each element's value is a pure function of (seed, global parameter name,
// global element index): a counter-based hash (splitmix64) gives two
// uniforms, Box-Muller turns them into a standard normal. So a TP shard
// holds exactly the values of the matching slice of the unsharded tensor,
// whatever the plan, and two runs with the same seed start identically.
// Pure functions; thread-safe; no failure modes beyond DT_CHECK on shapes.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/param_store.h"

namespace dt::rt {

// Standard normal sample for (seed, name, index).
float HashNormal(uint64_t seed, const std::string& name, int64_t index);

// Global (unsharded, row-major) index of local element `local_index` of p.
int64_t GlobalIndex(const Param& p, int64_t local_index);
// First row (kSplitDim0) or column (kSplitDim1) of the TP shard of dimension
// size `full` on rank r of n: r * full / n (shards may differ by one).
inline int64_t ShardBegin(int64_t full, int r, int n) { return full * r / n; }

// values[i] = stddev * HashNormal(seed, p.name, GlobalIndex(p, i)).
void InitNormal(const Param& p, uint64_t seed, float stddev, float* values);
void InitConstant(const Param& p, float v, float* values);

}  // namespace dt::rt
