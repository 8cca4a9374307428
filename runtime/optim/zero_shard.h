// ZeroShard: ZeRO-1 partitioning of one chunk's flat buffers over a DP group.
//
// The flat buffer of n elements is padded to P = ceil(n / dp) * dp and split
// into dp contiguous shards of S = P / dp; DP rank r owns [r*S, min((r+1)*S, n)).
//   ReduceScatterGrads(store): sums the full gradient buffers of all members
//     and leaves member r's shard, multiplied by `scale`, in store.grads()
//     at its own offsets (the rest of grads is stale afterwards).
//   AllGatherValues(store): every member's updated value shard is gathered
//     back so all members hold identical full values.
// Both are blocking collectives over dp. Scratch buffers (P + S floats) come
// from the runtime allocator and are kept between steps; a group of size 1
// allocates none. bf16 stores (bf16 = true; ParamStore::bf16()): gradients
// are reduce-scattered and value shards all-gathered in bf16, through bf16
// scratch (P + S elements of 2 bytes). Not thread-safe.
#pragma once

#include <cstdint>

#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"
#include "runtime/optim/adamw.h"
#include "runtime/tensor/bf16.h"

namespace dt::rt {

struct ShardRange {
  int64_t begin = 0, end = 0;  // owned elements [begin, end) of the store
  int64_t shard = 0;           // S: shard size including padding
  int64_t padded = 0;          // P
};
ShardRange ComputeShard(int64_t n, int dp_size, int dp_rank);

class ZeroShard {
 public:
  ZeroShard(Comm* dp, int64_t numel, float scale, bool bf16 = false);
  const ShardRange& range() const { return range_; }
  void ReduceScatterGrads(ParamStore& store);
  void AllGatherValues(ParamStore& store);
  // Gathers a shard-sized array (element i <-> store element begin+i) into a
  // full flat array of `numel` elements on every member.
  void AllGatherShard(const float* shard, float* full);

 private:
  Comm* dp_;
  int64_t numel_;
  float scale_;
  ShardRange range_;
  FloatVec full_, part_;
  bool bf16_ = false;
  Bf16Buffer full16_, part16_;
};

}  // namespace dt::rt
