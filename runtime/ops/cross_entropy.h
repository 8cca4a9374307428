// Softmax cross-entropy over a vocabulary split across TP ranks (Megatron's
// vocab-parallel cross-entropy). Host-memory op.
//
// logits [rows, vocab_local] hold columns [vocab_start, vocab_start +
// vocab_local) of the full logits. Forward all-reduces over `tp` (nullptr =
// the whole vocabulary is here): the row max (kMax), the sum of exp(logit -
// max) and the target's logit (0 on ranks not holding it), then
// loss_r = log(sum) + max - target_logit. Returns the mean loss over rows
// and writes lse[rows] = log(sum) + max for backward.
// Backward writes dlogits = dloss / rows * (softmax - onehot(target)) for
// this rank's columns, with dloss the grad of the mean loss. No comm.
// Targets out of [0, full vocab) abort. Not thread-safe.
#pragma once

#include <cstdint>

#include "runtime/comm/comm.h"

namespace dt::rt {

float CrossEntropyForward(const float* logits, int64_t rows, int64_t vocab_start,
                          int64_t vocab_local, const int32_t* targets, Comm* tp, float* lse);
void CrossEntropyBackward(const float* logits, int64_t rows, int64_t vocab_start,
                          int64_t vocab_local, const int32_t* targets, const float* lse,
                          float dloss, float* dlogits);

}  // namespace dt::rt
