// AdamW over one contiguous range of a ParamStore's flat buffers.
//
// The update (decoupled weight decay, bias-corrected moments, as in
// Loshchilov & Hutter and PyTorch's AdamW), for step t = 1, 2, ...:
//   g = grad * grad_scale                (grad_scale = clipping coefficient)
//   p = p - lr * weight_decay * p        (only where decay applies)
//   m = b1*m + (1-b1)*g ;  v = b2*v + (1-b2)*g*g
//   p = p - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
// No weight decay on norms and biases: a Param is exempt when its full shape
// has one dimension (every bias and norm gain/bias) or its name contains
// "norm" or ends in "bias". Embeddings and weight matrices are decayed.
//
// AdamWShard owns m and v (AdamMoments, adam_moments.h: fp32, or bf16 with
// bf16_moments) for elements [begin, end) of the store only; with ZeRO-1 that range is the DP
// rank's shard, so Adam state is never held for the rest. For a bf16 store
// (ParamStore::bf16(), runtime/model/bf16_params.h) it also owns the fp32
// master weights of that range, copied from the store's initial fp32
// values at construction: Update steps the master from the widened bf16
// gradients and writes the bf16 model copy (round to nearest even).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/model/param_store.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float max_grad_norm = 1.0f;  // global-norm clipping; <= 0 disables
};

// True when `p` is exempt from weight decay (see header comment).
bool NoWeightDecay(const Param& p);

using FloatVec = std::vector<float, TrackingAllocator<float>>;

// The update above for n contiguous elements (p, g, m, v), at step t
// (1-based); the one loop every AdamW in the runtime runs.
void AdamWApply(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale, bool decay, int64_t n,
                float* p, const float* g, float* m, float* v);

class AdamMoments;

class AdamWShard {
 public:
  AdamWShard(const ParamStore& store, int64_t begin, int64_t end, bool bf16_moments = false);
  ~AdamWShard();
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

  // One update of values[begin, end) from grads[begin, end); t is 1-based.
  void Update(ParamStore& store, const AdamWConfig& cfg, int64_t t, float lr, float grad_scale);

  // m and v; element i <-> store element begin + i.
  AdamMoments& moments() { return *moments_; }
  bool has_master() const { return !master_.empty(); }
  // bf16 stores: the fp32 master weights, element i <-> store element begin + i.
  FloatVec& master() { return master_; }

 private:
  struct Segment {
    int64_t begin, end;  // store offsets, within [begin_, end_)
    bool decay;
  };
  int64_t begin_, end_;
  std::vector<Segment> segments_;
  std::unique_ptr<AdamMoments> moments_;
  FloatVec master_;  // bf16 stores only: fp32 master weights of [begin, end)
};

}  // namespace dt::rt
