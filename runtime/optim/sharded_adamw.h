// ShardedAdamW: the optimizer side of ZeRO-2/3 for one chunk: AdamW moments
// (m, v) for this DP rank's slots only, laid out like the ShardedParams
// shard arrays (runtime/model/sharded_params.h), the update of the owned
// values from the gradient shard, and the gradient-norm contribution.
//
// Weight decay and norm weighting follow adamw.h / grad_norm.h per Param:
// each owned slot range is split at Param boundaries into segments. The
// ShardedParams must outlive this object. Not thread-safe.
// bf16 (ShardedParams::bf16()): also owns the fp32 master weights of the
// owned slots (shard layout), taken at construction from the store's flat
// fp32 values, which must still be there; Update steps the master from the
// gradient shard (bf16 widened, or fp32 main gradients) and rounds it into
// the bf16 values kept (ShardedParams::OwnedValues16).
#pragma once

#include <vector>

#include "runtime/model/sharded_params.h"
#include "runtime/optim/adam_moments.h"
#include "runtime/optim/adamw.h"

namespace dt::rt {

class ShardedAdamW {
 public:
  explicit ShardedAdamW(ShardedParams* params, bool bf16_moments = false);

  // AdamW on every owned element (values via ShardedParams::OwnedValues).
  void Update(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale);
  // Sum of squares of the owned gradient elements, weighted as in
  // LocalGradSquares (grad_norm.h).
  double LocalGradSquares(bool count_tied) const;
  // The gradient shard of tied Param `param` (its unit holds it alone, so
  // every copy of it on any stage has the same slot layout): pointer and
  // slot length (S_u floats) for the tied all-reduce.
  float* TiedGradSlot(int param, int64_t* n);
  bf16_t* TiedGradSlot16(int param, int64_t* n);  // bf16 gradients

  AdamMoments& moments() { return moments_; }  // shard layout
  TrackedFloats& master() { return master_; }  // bf16 only; shard layout

 private:
  struct Segment {
    int unit;
    int param;
    int64_t unit_begin, unit_end;  // unit elements [unit_begin, unit_end), owned
    bool decay;
  };
  // Slot offset (shard arrays) and length of a tied Param's gradient.
  int64_t TiedSlot(int param, int64_t* n) const;
  ShardedParams* params_;
  std::vector<Segment> segments_;
  AdamMoments moments_;
  TrackedFloats master_;
};

}  // namespace dt::rt
