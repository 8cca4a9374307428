#include "runtime/ops/cross_entropy.h"
#include "runtime/tensor/allocator.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"

namespace dt::rt {

float CrossEntropyForward(const float* logits, int64_t rows, int64_t vocab_start,
                          int64_t vocab_local, const int32_t* targets, Comm* tp, float* lse) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const bool reduce = tp != nullptr && tp->size() > 1;
  std::vector<float> row_max(rows), sum_exp(rows), target_logit(rows, 0.0f);
#pragma omp parallel for if (rows * vocab_local > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * vocab_local;
    row_max[r] = *std::max_element(l, l + vocab_local);
  }
  if (reduce) tp->AllReduce(row_max.data(), rows, ReduceOp::kMax);
#pragma omp parallel for if (rows * vocab_local > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * vocab_local;
    double s = 0;
    for (int64_t c = 0; c < vocab_local; ++c) s += std::exp(l[c] - row_max[r]);
    sum_exp[r] = static_cast<float>(s);
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (local >= 0 && local < vocab_local) target_logit[r] = l[local];
  }
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
#pragma omp parallel for if (rows * vocab_local > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * vocab_local;
    float* d = dlogits + r * vocab_local;
    for (int64_t c = 0; c < vocab_local; ++c) d[c] = g * std::exp(l[c] - lse[r]);
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (local >= 0 && local < vocab_local) d[local] -= g;
  }
}

}  // namespace dt::rt
