// Model FLOPs of one training step: from the per-rank op lists (LayerOps)
// and from the closed form of Narayanan et al. SC21, Eq. 3, so the two can
// be checked against each other and MFU can be reported either way.
//
// FLOPs count GEMM and attention-core multiply-adds (2 per MAC) only;
// memory-bound ops (norms, softmax, dropout, ...) count 0, as in Eq. 3.
// Pure functions of their inputs (assumed Validate()d); no failure modes.
// Formulas and the derivation of the no-recompute form: docs/flops.md.
#pragma once

#include <cstdint>

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// Total FLOPs of one step summed over all GPUs: per-rank LayerOps of every
// layer (StageLayers of each pipeline rank), the embedding and the LM head
// (and the multi-token-prediction modules, MtpOps),
// times num_microbatches, times the dp*tp*cp ranks sharing a pipeline rank.
// with_recompute adds the recompute ops of the plan's recompute mode
// ("hardware FLOPs"); without it the result is "model FLOPs".
// causal_attention counts the attention core at half its square (the
// masked upper triangle is not computed), as Megatron-LM's logged
// TFLOP/s do (training.py num_floating_point_operations, causal factor;
// docs/validation.md checks it on a published row).
double StepFlops(const ModelSpec& m, const PlanSpec& p, bool with_recompute, bool causal_attention = false);

// Narayanan et al. SC21 Eq. 3 with B = batch sequences of length seq,
// l = m.num_layers, h = m.hidden, V = m.vocab:
//   full_recompute:  96 B s l h^2 (1 + s/(6h) + V/(16 l h))
//   otherwise:       72 B s l h^2 (1 + s/(6h) + V/(12 l h))
// (the second is our derivation: 3 instead of 4 passes over the layers; the
// LM head is never recomputed). Assumes an FFN of 4h and MHA.
double NarayananEq3Flops(const ModelSpec& m, int64_t batch, int seq, bool full_recompute);

}  // namespace dt
