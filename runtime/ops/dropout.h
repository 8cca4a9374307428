// Dropout whose masks depend on WHAT an element is, never on where it is
// computed: every keep/drop decision is a counter-based hash of (training
// seed, site, global layer, global sample index, global position or head,
// column). So a plan with any TP / SP / CP / PP / DP split draws the same
// mask for the same element as one rank does (parity holds with dropout
// on), the recompute passes (selective, full) redraw exactly the masks of
// the forward, and nothing is stored to resume a run (no RNG state).
//
// Keep probability 1 - rate; kept values are scaled by 1 / (1 - rate)
// (inverted dropout, as PyTorch and Megatron). The hash is two rounds of a
// 32-bit integer finaliser per element over a 64-bit row key (splitmix64
// chain): not a cryptographic or Philox stream, but uniform to well under
// 1% per mask (tests/runtime/dropout_test.cc measures it).
//
// Masks are 1 byte per element (1 keep, 0 drop), stored in a DropoutMask
// whose memory comes from the runtime allocator, so measured peak memory
// counts them as the planner's memory model does (1 byte per element).
// Host-memory ops (HostAccess first). Pointers are owned by the caller.
// Not thread-safe. Misuse (rate outside [0, 1), sizes) aborts.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

// Where a mask is drawn; part of every element's key.
enum class DropoutSite : uint64_t {
  kEmbedding = 1,      // embedding output (first chunk)
  kAttentionProbs = 2, // softmax probabilities of one head
  kAttentionOut = 3,   // attention block output before the residual add
  kMlpOut = 4,         // MLP block output before the residual add
};

// One element's decision source: rate and training seed.
struct DropoutRng {
  float rate = 0.0f;  // 0: dropout off
  uint64_t seed = 0;
  bool on() const { return rate > 0.0f; }
  float scale() const { return 1.0f / (1.0f - rate); }
  // Threshold on the 32-bit hash: keep when hash >= threshold.
  uint32_t threshold() const;
  // The key of one row of decisions (a token's hidden vector, or one query
  // row of one head's probabilities); columns are hashed under it.
  uint64_t RowKey(DropoutSite site, int64_t layer, int64_t sample, int64_t a, int64_t b = 0) const;
};

// Writes mask[c] = keep(row_key, col0 + c) for c in [0, n).
void DrawMaskRow(const DropoutRng& rng, uint64_t row_key, int64_t col0, int64_t n, uint8_t* mask);

// A byte mask from the runtime allocator (1 byte per element, rounded up to 4).
class DropoutMask {
 public:
  DropoutMask() = default;
  explicit DropoutMask(int64_t n) : n_(n), storage_(Tensor::Uninitialized({(n + 3) / 4})) {}
  uint8_t* data() { return reinterpret_cast<uint8_t*>(storage_.data()); }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(storage_.data()); }
  int64_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  int64_t n_ = 0;
  Tensor storage_;
};

// y = x * mask * scale (y may alias x); dx = dy * mask * scale likewise.
void ApplyMask(const float* x, const uint8_t* mask, float scale, int64_t n, float* y);

// Masks of a sequence-major [rows, cols] activation whose row r is token
// (position positions[r / batch], sample samples[r % batch]) of local
// batch row r % batch, starting at local row row0: the residual stream
// (cols = hidden, every column global). `positions` holds the global
// position of each local sequence index of the block [row0 / batch, ...).
void DrawTokenMask(const DropoutRng& rng, DropoutSite site, int64_t layer, const std::vector<int64_t>& samples,
                   const std::vector<int64_t>& positions, int64_t rows, int64_t cols, uint8_t* mask);

}  // namespace dt::rt
