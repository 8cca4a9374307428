#include "runtime/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "runtime/backend/lane_reduce.h"
#include "runtime/backend/parallel_for.h"
#include "runtime/backend/vec_exp.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

float CrossEntropyForward(const float* logits, int64_t rows, int64_t vocab_start,
                          int64_t vocab_local, const int32_t* targets, Comm* tp, float* lse) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const bool reduce = tp != nullptr && tp->size() > 1;
  std::vector<float> row_max(rows), sum_exp(rows), target_logit(rows, 0.0f);
  ForRange(rows, rows * vocab_local > (1 << 14), [&](int64_t r) {
    const float* l = logits + r * vocab_local;
    row_max[r] = LaneMax(vocab_local, [l](int64_t c) { return l[c]; });
  });
  if (reduce) tp->AllReduce(row_max.data(), rows, ReduceOp::kMax);
  ForRange(rows, rows * vocab_local > (1 << 14), [&](int64_t r) {
    const float* l = logits + r * vocab_local;
    double s = 0;
    alignas(64) float e[kExpChunk];
    for (int64_t c0 = 0; c0 < vocab_local; c0 += kExpChunk) {
      const int64_t len = std::min(kExpChunk, vocab_local - c0);
      ExpAffine(l + c0, len, 1.0f, row_max[r], e);
      s += LaneSum(len, [&e](int64_t c) { return static_cast<double>(e[c]); });
    }
    sum_exp[r] = static_cast<float>(s);
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (local >= 0 && local < vocab_local) target_logit[r] = l[local];
  });
  if (reduce) {
    tp->AllReduce(sum_exp.data(), rows, ReduceOp::kSum);
    tp->AllReduce(target_logit.data(), rows, ReduceOp::kSum);
  }
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    DT_CHECK(targets[r] >= 0) << "negative target " << targets[r] << " at row " << r;
    lse[r] = std::log(sum_exp[r]) + row_max[r];
    total += lse[r] - target_logit[r];
  }
  return rows > 0 ? static_cast<float>(total / rows) : 0.0f;
}

void CrossEntropyBackward(const float* logits, int64_t rows, int64_t vocab_start,
                          int64_t vocab_local, const int32_t* targets, const float* lse,
                          float dloss, float* dlogits) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const float g = rows > 0 ? dloss / static_cast<float>(rows) : 0.0f;
  ForRange(rows, rows * vocab_local > (1 << 14), [&](int64_t r) {
    const float* l = logits + r * vocab_local;
    float* d = dlogits + r * vocab_local;
    alignas(64) float e[kExpChunk];
    for (int64_t c0 = 0; c0 < vocab_local; c0 += kExpChunk) {
      const int64_t len = std::min(kExpChunk, vocab_local - c0);
      ExpAffine(l + c0, len, 1.0f, lse[r], e);
      for (int64_t c = 0; c < len; ++c) d[c0 + c] = g * e[c];
    }
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (local >= 0 && local < vocab_local) d[local] -= g;
  });
}

}  // namespace dt::rt
