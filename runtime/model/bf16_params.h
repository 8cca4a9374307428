// Bf16Params: bf16 mixed-precision storage of one model chunk's parameters
// (the CPU runtime's `precision: bf16` plans).
//
// Between uses the chunk keeps only bf16 tensors: the model copy of the
// values (2 bytes per parameter) and the gradients (2 bytes, accumulated
// over microbatches in bf16) — or, with fp32_grads (a plan's grad_bytes 4,
// Megatron-LM's default main_grad), the store's flat fp32 gradients
// (4 bytes), which every backward accumulates into directly. The fp32 master weights and Adam moments live
// in the optimizer (runtime/optim/adamw.h), for this rank's ZeRO-1 shard
// when sharded. Kernels compute in fp32: around each use of a unit (a layer,
// an embedding or head tensor; the same hooks ZeRO-3 uses,
// runtime/model/model_chunk.h) the chunk
//   Gather(u)     widens u's bf16 values into an fp32 working copy and binds it,
//   Release(u)    unbinds and frees it,
//   BeginGrads(u) binds a zeroed fp32 gradient buffer for u's backward,
//   EndGrads(u)   adds it into the bf16 gradients (round to nearest even),
//                 unbinds and frees it.
//   (fp32_grads: both do nothing; u stays bound to its flat fp32 gradients.)
// So at most the unit in use has fp32 values (4 bytes per parameter) and an
// fp32 gradient buffer (4 more; none with fp32_grads) next to the bf16
// state; the planner's memory model counts them as temporaries
// (docs/memory.md, "bf16 on CPU").
//
// Construction takes a finalised store whose fp32 values hold the initial
// parameters: it narrows them into the bf16 copy, drops the store's flat
// fp32 gradients (keeps them with fp32_grads) and registers itself as
// store->bf16(). The flat fp32
// values stay until the optimizer has copied its master range out of them
// and calls store->DropValues(). The store must outlive this object. Not
// thread-safe. Misuse (a unit gathered twice) aborts.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/model/param_store.h"
#include "runtime/tensor/bf16.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

class Bf16Params {
 public:
  explicit Bf16Params(ParamStore* store, bool fp32_grads = false);
  ~Bf16Params();
  Bf16Params(const Bf16Params&) = delete;
  Bf16Params& operator=(const Bf16Params&) = delete;

  void Gather(int u);
  void Release(int u);
  void BeginGrads(int u);
  void EndGrads(int u);

  int64_t numel() const { return values_.size(); }
  bf16_t* values() { return values_.data(); }
  // The gradients' element type: fp32 (the store's flat grads()) or bf16 (grads() here).
  bool fp32_grads() const { return fp32_grads_; }
  // bf16 gradients; aborts with fp32_grads (read ParamStore::grads()).
  bf16_t* grads();
  const bf16_t* grads() const;
  void ZeroGrads() { grads_.Zero(); }

 private:
  ParamStore* store_;
  bool fp32_grads_;
  Bf16Buffer values_, grads_;
  std::map<int, Tensor> unit_values_;
  std::map<int, std::vector<float, TrackingAllocator<float>>> unit_grads_;
};

}  // namespace dt::rt
