// Causal multi-head self-attention core: for each sequence b and head h,
// O = softmax(Q K^T / sqrt(d) + causal mask) V.
//
// Layouts (sequence-major, as Megatron, so a sequence shard is contiguous):
//   qkv  [seq, batch, heads, 3, head_dim]  (the QKV projection's output;
//        per head the q, k, v blocks are adjacent so a TP shard of the QKV
//        weight rows is a set of whole heads)
//   out  [seq, batch, heads, head_dim]
//   probs [batch, heads, seq, seq]  softmax probabilities (stashed for
//        backward, or recomputed under selective recompute)
// `heads` is the local head count (heads / tp). Backward overwrites dqkv;
// `scratch` needs seq*seq floats. Pointers in backend memory, owned by the
// caller. Not thread-safe. Misuse aborts.
//
// Attention dropout (AttentionDropout with an active rng): after the
// softmax, mask = keep(layer, sample, global head, query position, key
// position) (runtime/ops/dropout.h) and dropped = probs * mask / (1 - rate);
// out = dropped V. The caller gives mask and dropped buffers of ProbsNumel
// each and keeps them with probs for backward (what Megatron stores: the
// softmax output, the 1-byte mask and the dropout output), or redraws them
// with AttentionDropProbs when it recomputes the probabilities. Backward:
// dV = dropped^T dO, dP = (dO V^T) * mask / (1 - rate), then the softmax
// backward with probs.
#pragma once

#include <cstdint>

#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/ops/dropout.h"

namespace dt::rt {

// Which masks one layer's attention draws: null rng or rate 0 = none.
struct AttentionDropout {
  const DropoutRng* rng = nullptr;
  int64_t layer = 0;                            // global layer index
  const std::vector<int64_t>* samples = nullptr;  // global sample index per batch row
  int64_t head0 = 0;                            // global index of local head 0 (tp_rank * heads)
  bool on() const { return rng != nullptr && rng->on(); }
};

struct AttentionDims {
  int64_t seq = 0, batch = 0, heads = 0, head_dim = 0;
  int64_t ProbsNumel() const { return batch * heads * seq * seq; }
  int64_t QkvNumel() const { return seq * batch * heads * 3 * head_dim; }
  int64_t OutNumel() const { return seq * batch * heads * head_dim; }
};

// Computes probs (overwritten) and out; with dropout on, also mask and
// dropped (ProbsNumel each, overwritten).
void AttentionForward(Backend& be, const AttentionDims& d, const float* qkv, float* probs,
                      float* out, const AttentionDropout& drop = {}, uint8_t* mask = nullptr,
                      float* dropped = nullptr);
// Draws the masks of probs (query positions 0..seq, cp == 1) and writes
// dropped = probs * mask / (1 - rate).
void AttentionDropProbs(Backend& be, const AttentionDims& d, const AttentionDropout& drop, const float* probs,
                        uint8_t* mask, float* dropped);
// Recomputes only the probabilities (selective recompute).
void AttentionProbs(Backend& be, const AttentionDims& d, const float* qkv, float* probs);
// dropped/mask: the forward's (null without dropout).
void AttentionBackward(Backend& be, const AttentionDims& d, const float* qkv, const float* probs,
                       const float* dout, float* dqkv, float* scratch, const AttentionDropout& drop = {},
                       const uint8_t* mask = nullptr, const float* dropped = nullptr);

}  // namespace dt::rt
