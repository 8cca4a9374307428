// MoE router math (Mixtral-style top-k gating), per token, on host memory:
//
//   Forward: for each of `rows` tokens with router logits l[0..E), pick the
//   k experts with the largest logits (ties: the lower expert index wins, so
//   routing is a deterministic function of the logits) in descending order,
//   and weight them by the softmax over the k chosen logits. That equals
//   Mixtral's softmax over all E followed by renormalising the top-k
//   probabilities to sum to 1 (the common factor cancels); computing it over
//   the k logits avoids the division.
//   Backward: given dL/dw for the k weights of each token, the logit grads
//   dl[e_j] = w_j * (dw_j - sum_i w_i dw_i); unchosen experts get 0 (the
//   top-k selection itself is piecewise constant).
//
// Layouts: logits / dlogits [rows, E]; experts (int32) and weights [rows, k]
// in rank order (slot 0 = largest logit). No load-balancing loss is formed
// (see docs/runtime.md). Pure functions; misuse (k outside 1..E) aborts.
#pragma once

#include <cstdint>

namespace dt::rt {

void RouteTopK(const float* logits, int64_t rows, int64_t num_experts, int64_t k, int32_t* experts,
               float* weights);

// Overwrites dlogits.
void RouteTopKBackward(const int32_t* experts, const float* weights, const float* dweights, int64_t rows,
                       int64_t num_experts, int64_t k, float* dlogits);

// Expert capacity (Megatron-LM's --moe-expert-capacity-factor with its
// default "probs" drop policy): each expert takes at most
// ExpertCapacity(copies, E, factor) = ceil(copies / E * factor) of the
// `copies` = rows * k routed token copies, at least 1.
int64_t ExpertCapacity(int64_t copies, int64_t num_experts, double factor);
// Marks kept[i] = 1 for the copies each expert keeps: the `capacity` with the
// largest weights among the copies routed to it (ties: the earlier copy);
// 0 for the copies it drops. experts / weights as RouteTopK writes them.
void KeepWithinCapacity(const int32_t* experts, const float* weights, int64_t copies, int64_t num_experts,
                        int64_t capacity, uint8_t* kept);

}  // namespace dt::rt
