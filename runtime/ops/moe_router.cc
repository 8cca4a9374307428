#include "runtime/ops/moe_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

void RouteTopK(const float* logits, int64_t rows, int64_t num_experts, int64_t k, int32_t* experts,
               float* weights) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(k >= 1 && k <= num_experts) << "top-k " << k << " of " << num_experts << " experts";
  std::vector<int32_t> order(num_experts);
  for (int64_t t = 0; t < rows; ++t) {
    const float* l = logits + t * num_experts;
    std::iota(order.begin(), order.end(), 0);
    // Larger logit first; equal logits: lower index first (deterministic).
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    int32_t* e = experts + t * k;
    float* w = weights + t * k;
    const float top = l[order[0]];
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      e[j] = order[j];
      w[j] = std::exp(l[order[j]] - top);
      sum += w[j];
    }
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
  }
}

void RouteTopKBackward(const int32_t* experts, const float* weights, const float* dweights, int64_t rows,
                       int64_t num_experts, int64_t k, float* dlogits) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  std::fill(dlogits, dlogits + rows * num_experts, 0.0f);
  for (int64_t t = 0; t < rows; ++t) {
    const int32_t* e = experts + t * k;
    const float* w = weights + t * k;
    const float* dw = dweights + t * k;
    float dot = 0.0f;
    for (int64_t j = 0; j < k; ++j) dot += w[j] * dw[j];
    for (int64_t j = 0; j < k; ++j) dlogits[t * num_experts + e[j]] = w[j] * (dw[j] - dot);
  }
}

int64_t ExpertCapacity(int64_t copies, int64_t num_experts, double factor) {
  DT_CHECK(num_experts > 0 && factor > 0) << "expert capacity of " << num_experts << " experts, factor " << factor;
  const double c = std::ceil(static_cast<double>(copies) / static_cast<double>(num_experts) * factor);
  return std::max<int64_t>(1, static_cast<int64_t>(c));
}

void KeepWithinCapacity(const int32_t* experts, const float* weights, int64_t copies, int64_t num_experts,
                        int64_t capacity, uint8_t* kept) {
  // Copies by expert, largest weight first, the earlier copy among equal
  // weights (a stable sort of copy order); each expert keeps its first
  // `capacity`.
  std::vector<int64_t> order(static_cast<size_t>(copies));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = 0; i < copies; ++i)
    DT_CHECK(experts[i] >= 0 && experts[i] < num_experts) << "expert " << experts[i];
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return experts[a] != experts[b] ? experts[a] < experts[b] : weights[a] > weights[b];
  });
  int64_t rank = 0;
  for (int64_t j = 0; j < copies; ++j) {
    rank = j > 0 && experts[order[j]] == experts[order[j - 1]] ? rank + 1 : 0;
    kept[order[j]] = rank < capacity ? 1 : 0;
  }
}

}  // namespace dt::rt
