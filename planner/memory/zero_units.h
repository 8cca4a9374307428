// ZeroUnits: the ZeRO-2/3 units of a model chunk as the runtime forms them
// (runtime/model/model_chunk.h, sharded_params.h), so the memory model and
// the lowering count the same buffers and collectives the runtime issues.
//
// Units: embedding.word and embedding.position (first chunk), one per
// transformer layer, final_ln and lm_head (last chunk; lm_head is a unit of
// its own when untied or when the tied embedding is copied onto a later
// chunk, else the head reuses embedding.word). Each unit of n parameters is
// padded to ceil(n / shard) * shard and every member of the shard group
// keeps ceil(n / shard) of it.
// Per microbatch, a chunk uses its units in this order — forward: embedding
// (word, position), layers ascending, head (final_ln, lm_head); backward:
// head, layers descending, embedding — and each use is one parameter
// all-gather (ZeRO-3) and, in backward, one gradient reduce-scatter. The
// tied word unit on a single-chunk model is used twice (embedding and head).
// Pure functions; no failure modes beyond DT_CHECK on an out-of-range chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct ChunkUnits {
  std::vector<int64_t> units;  // parameters of each unit (per rank, before ZeRO), once each
  std::vector<int64_t> uses;   // parameters of each use in one microbatch's forward (= backward)
  int64_t layer = 0;           // one layer unit
  int64_t head_use = 0;        // parameters the head's backward holds in full (last chunk)
};

ChunkUnits ZeroChunkUnits(const ModelSpec& m, const PlanSpec& p, int chunk);

// Elements one member keeps of a unit of n parameters: ceil(n / shard).
int64_t UnitShard(int64_t n, int shard);
// n padded to a multiple of shard: what an all-gather / reduce-scatter moves.
int64_t UnitPadded(int64_t n, int shard);

}  // namespace dt
