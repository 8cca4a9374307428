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
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

struct AttentionDims {
  int64_t seq = 0, batch = 0, heads = 0, head_dim = 0;
  int64_t ProbsNumel() const { return batch * heads * seq * seq; }
  int64_t QkvNumel() const { return seq * batch * heads * 3 * head_dim; }
  int64_t OutNumel() const { return seq * batch * heads * head_dim; }
};

// Computes probs (overwritten) and out.
void AttentionForward(Backend& be, const AttentionDims& d, const float* qkv, float* probs,
                      float* out);
// Recomputes only the probabilities (selective recompute).
void AttentionProbs(Backend& be, const AttentionDims& d, const float* qkv, float* probs);
void AttentionBackward(Backend& be, const AttentionDims& d, const float* qkv, const float* probs,
                       const float* dout, float* dqkv, float* scratch);

}  // namespace dt::rt
