// ZeroShard: ZeRO-1 partitioning of one chunk's flat buffers over a DP group.
//
// The shard covers a list of store spans (default: the whole store, one
// span [0, numel)); their concatenation, n elements in span order, is the
// shard's flat space. It is padded to P = ceil(n / dp) * dp and split into
// dp contiguous shards of S = P / dp; DP rank r owns flat [r*S, min((r+1)*S,
// n)), which lies in the store as the spans `owned()` lists, in order.
// (MoE with expert parallelism shards the dense parameters' spans over the
// DP group and the experts' spans over the expert-DP group: two shards,
// runtime/optim/optimizer.h.)
//   ReduceScatterGrads(store): sums the spans' gradients of all members and
//     leaves member r's share, multiplied by `scale`, in store.grads() at its
//     own offsets (the rest of the spans' grads is stale afterwards).
//   AllGatherValues(store): every member's updated values of its share are
//     gathered back so all members hold identical values in every span.
// Both are blocking collectives over dp. Scratch buffers (P + S elements)
// come from the runtime allocator and are kept between steps; a group of
// size 1 allocates none. bf16 stores (ParamStore::bf16()): value shares are
// all-gathered in bf16 (bf16_values) and gradients reduce-scattered in their
// own type: bf16 (bf16_grads, through bf16 scratch of P + S elements of 2
// bytes) or fp32 main gradients (fp32 scratch, whose storage the bf16 value
// all-gather then reuses). Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"
#include "runtime/optim/adamw.h"
#include "runtime/tensor/bf16.h"

namespace dt::rt {

struct ShardRange {
  int64_t begin = 0, end = 0;  // owned elements [begin, end) of the flat space
  int64_t shard = 0;           // S: shard size including padding
  int64_t padded = 0;          // P
};
ShardRange ComputeShard(int64_t n, int dp_size, int dp_rank);

struct StoreSpan {
  int64_t offset = 0, size = 0;  // store elements [offset, offset + size)
};

class ZeroShard {
 public:
  ZeroShard(Comm* dp, int64_t numel, float scale, bool bf16_values = false, bool bf16_grads = false);
  ZeroShard(Comm* dp, std::vector<StoreSpan> spans, float scale, bool bf16_values = false,
            bool bf16_grads = false);
  const ShardRange& range() const { return range_; }  // in flat coordinates
  const std::vector<StoreSpan>& spans() const { return spans_; }
  const std::vector<StoreSpan>& owned() const { return owned_; }  // range() in the store, in order
  int64_t numel() const { return numel_; }                       // n
  void ReduceScatterGrads(ParamStore& store);
  void AllGatherValues(ParamStore& store);
  // Gathers a share-sized array (element i <-> flat element range().begin+i)
  // into a flat array of numel() elements on every member (a bf16 shard,
  // whose scratch is bf16, uses fp32 temporaries: only checkpoints call it).
  void AllGatherShard(const float* shard, float* full);
  // Copies a flat array of numel() elements to its spans' places in a
  // store-sized array.
  void ScatterFlat(const float* flat, float* store_sized) const;

 private:
  template <typename T>
  void Pack(const T* store_sized, T* flat) const;  // spans -> flat
  template <typename T>
  void Unpack(const T* flat, T* store_sized) const;  // flat -> spans
  Comm* dp_;
  std::vector<StoreSpan> spans_, owned_;
  int64_t numel_;
  float scale_;
  ShardRange range_;
  FloatVec full_, part_;  // fp32 gradients' scratch
  bool bf16_values_ = false, bf16_grads_ = false;
  Bf16Buffer full16_, part16_;  // bf16 gradients' scratch
  // The bf16 value all-gather's scratch: the gradients' (bf16, or the fp32
  // buffers' storage, which is at least as large).
  bf16_t* full16() { return bf16_grads_ ? full16_.data() : reinterpret_cast<bf16_t*>(full_.data()); }
  bf16_t* part16() { return bf16_grads_ ? part16_.data() : reinterpret_cast<bf16_t*>(part_.data()); }
};

}  // namespace dt::rt
