#include "runtime/model/stash_precision.h"

#include "runtime/model/gpt_layer.h"
#include "runtime/model/moe_mlp.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

namespace {
template <typename F>
void ForEachNarrowed(LayerStash* s, F f) {
  for (Tensor* t : {&s->x, &s->ln1, &s->qkv, &s->probs, &s->dropped, &s->attn, &s->x2, &s->ln2, &s->fc1, &s->act, &s->up,
                     &s->shared_out})
    f(t);
  // An MoE block's expert-major input, its inner tensors and the expert
  // outputs it reads back (the router's weights stay fp32, as the memory
  // model counts them).
  if (s->moe)
    for (Tensor* t : {&s->moe->x, &s->moe->gate, &s->moe->up, &s->moe->act, &s->moe->back}) f(t);
}
}  // namespace

void NarrowTensor(const LayerContext& ctx, Tensor* t) {
  if (!ctx.bf16 || t->empty() || t->is_bf16()) return;
  *t = t->NarrowedToBf16();
}

void WidenTensor(Tensor* t) {
  if (t->empty() || !t->is_bf16()) return;
  *t = t->WidenedToFp32();
}

void NarrowStash(const LayerContext& ctx, LayerStash* s) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (!ctx.bf16) return;
  ForEachNarrowed(s, [&](Tensor* t) { NarrowTensor(ctx, t); });
}

void WidenStash(LayerStash* s) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  ForEachNarrowed(s, [](Tensor* t) { WidenTensor(t); });
}

}  // namespace dt::rt
