// Embedding ops: vocabulary-parallel token embedding and learned position
// embedding. Host-memory ops (they index by token id).
//
// Token embedding: this rank holds rows [vocab_start, vocab_start +
// vocab_local) of the full [vocab, hidden] table. Forward writes, for each
// row r, out[r] = W[tokens[r] - vocab_start] when the token is in range and
// 0 otherwise; summing over the TP group (VocabParallelEmbeddingForward,
// or a reduce-scatter done by the caller under sequence parallelism) gives
// the full lookup. Backward accumulates dout rows into the rows of dW this
// rank holds. Position embedding: rows are sequence-major
// (row = t * batch + b), out[row] += P[t]; backward dP[t] += sum_b dout[row].
// Out-of-vocabulary token ids (< 0 or >= full vocab) are an invariant break
// (the data loader validates tokens) and abort. Not thread-safe.
#pragma once

#include <cstdint>

#include "runtime/comm/comm.h"

namespace dt::rt {

void EmbeddingForward(const float* w, int64_t vocab_start, int64_t vocab_local, int64_t hidden,
                      const int32_t* tokens, int64_t rows, float* out);
void EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows,
                       int64_t vocab_start, int64_t vocab_local, int64_t hidden, float* dw);
// EmbeddingForward + all-reduce over `tp` (nullptr: single rank).
void VocabParallelEmbeddingForward(const float* w, int64_t vocab_start, int64_t vocab_local,
                                   int64_t hidden, const int32_t* tokens, int64_t rows,
                                   float* out, Comm* tp);

void PositionEmbeddingForward(const float* p, int64_t seq, int64_t batch, int64_t hidden,
                              float* out);
void PositionEmbeddingBackward(const float* dout, int64_t seq, int64_t batch, int64_t hidden,
                               float* dp);

}  // namespace dt::rt
