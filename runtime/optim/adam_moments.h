// AdamMoments: the Adam first and second moments (m, v) of n contiguous
// elements, stored in fp32 (4 bytes each: the default of Megatron-LM,
// DeepSpeed and torch) or bf16 (2 bytes each: Megatron-LM's precision-aware
// optimizer, --use-precision-aware-optimizer --exp-avg-dtype bf16
// --exp-avg-sq-dtype bf16; a plan's adam_moment_bytes 2).
//
// Apply runs AdamWApply (adamw.h) on elements [at, at + n): bf16 moments are
// widened into stack scratch block by block, updated in fp32 and rounded
// back to nearest even, as Transformer Engine's FusedAdam stores them. The
// arithmetic is elementwise, so any sharding of the elements updates each
// the same way. ReadM / ReadV / Write copy all n elements as fp32 (the
// checkpoint format; bf16 -> fp32 -> bf16 is exact, so a resume is too).
// Storage comes from the runtime allocator (it counts in peak bytes). Not
// thread-safe. Out-of-range access aborts.
#pragma once

#include <cstdint>

#include "runtime/optim/adamw.h"
#include "runtime/tensor/bf16.h"

namespace dt::rt {

class AdamMoments {
 public:
  AdamMoments(int64_t n, bool bf16);
  int64_t size() const { return n_; }
  bool bf16() const { return bf16_; }

  // p and g are the n parameters and gradients of elements [at, at + n).
  void Apply(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale, bool decay, int64_t at, int64_t n,
             float* p, const float* g);
  // The bf16 mixed-precision update of elements [at, at + n): Apply on the
  // fp32 master weights from gradients that are bf16 (g16, widened block by
  // block into stack scratch) or fp32 (g32, read in place; exactly one of the
  // two non-null), then the master rounded into the bf16 model copy
  // (values16). All pointers address the n elements.
  void ApplyToMaster(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale, bool decay, int64_t at,
                     int64_t n, float* master, const float* g32, const bf16_t* g16, bf16_t* values16);
  void ReadM(float* out) const;
  void ReadV(float* out) const;
  void Write(const float* m, const float* v);

 private:
  int64_t n_;
  bool bf16_;
  FloatVec m_, v_;        // fp32
  Bf16Buffer m16_, v16_;  // bf16
};

}  // namespace dt::rt
