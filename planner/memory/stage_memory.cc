#include "planner/memory/stage_memory.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/param_count.h"

namespace dt {

namespace {

// Per-rank token counts of one microbatch (see layer_ops.cc).
struct Tokens {
  double T, T_r;
};
Tokens MakeTokens(const PlanSpec& p) {
  Tokens t;
  t.T = static_cast<double>(p.micro_batch) * (p.seq_length / p.cp);
  t.T_r = (p.sequence_parallel && p.tp > 1) ? t.T / p.tp : t.T;
  return t;
}

}  // namespace

StageMemory EstimateStageMemory(const ModelSpec& m, const PlanSpec& p, const MemoryParams& mp,
                                int pipeline_rank, int in_flight_microbatches) {
  DT_CHECK(pipeline_rank >= 0 && pipeline_rank < p.pp) << "pipeline_rank=" << pipeline_rank;
  DT_CHECK_GE(in_flight_microbatches, 0);
  const bool first = pipeline_rank == 0, last = pipeline_rank == p.pp - 1;
  const double e = mp.activation_bytes;
  const Tokens tok = MakeTokens(p);
  const double h = m.hidden;
  const double v_local = std::ceil(static_cast<double>(m.vocab) / p.tp);

  StageMemory s;
  // Model states. ZeRO shards over every replica of this shard: DP x CP
  // (Megatron's distributed optimizer uses the DP x CP group).
  const double params = static_cast<double>(StageParamsPerRank(m, p, pipeline_rank));
  const double shard = static_cast<double>(p.dp) * p.cp;
  s.weights = params * mp.weight_bytes / (p.zero_stage >= 3 ? shard : 1.0);
  s.gradients = params * mp.grad_bytes / (p.zero_stage >= 2 ? shard : 1.0);
  s.optimizer = params * mp.optimizer_bytes / (p.zero_stage >= 1 ? shard : 1.0);

  // Activations. in_flight counts chunk-microbatches; a chunk holds
  // StageLayers/vpp layers on average.
  const double layers_per_chunk = static_cast<double>(p.StageLayers(pipeline_rank)) / p.vpp;
  const double in_flight = in_flight_microbatches;
  s.activations = ActivationBytesPerLayer(m, p, mp.activation_bytes) * layers_per_chunk * in_flight;
  // Recompute working set: the backward of one layer rebuilds its stored
  // tensors (full: the whole layer; selective: the attention scores).
  if (p.recompute == Recompute::kFull)
    s.activations += ActivationBytesPerLayerFor(m, p, mp.activation_bytes, Recompute::kNone);
  else if (p.recompute == Recompute::kSelective)
    s.activations += AttentionScoreBytesPerLayer(m, p, mp.activation_bytes);
  // The first and last model chunks are one of the rank's vpp chunks: their
  // in-flight count is approximated by ceil(in_flight / vpp).
  const double end_in_flight = std::ceil(static_cast<double>(in_flight) / p.vpp);
  if (first && m.family == ModelFamily::kGpt)
    if (p.dropout) s.activations += tok.T_r * h * end_in_flight;  // embedding dropout mask (1 byte)
  if (last) {
    // Final-norm input and LM-head input (16-bit), fp32 logits kept for the
    // cross-entropy backward (Korthikanti et al. 2022, Sec. 4.3: 4sbv/t).
    s.activations += (2 * e * tok.T_r * h + 4.0 * tok.T * v_local) * end_in_flight;
  }
  // Pipeline p2p buffers: one activation received, one gradient received.
  if (p.pp > 1) s.activations += 2 * e * tok.T_r * h;

  // Temporaries: the DP gradient bucket being reduced, the largest backward
  // transient, and the ZeRO-3 gather buffer of one layer.
  if (shard > 1) s.temporary += std::min(static_cast<double>(p.dp_bucket_bytes), params * mp.grad_bytes);
  const double a_local = m.heads / p.tp;
  const double scores = static_cast<double>(p.micro_batch) * a_local * (p.seq_length / p.cp) * p.seq_length;
  const double f_local = std::ceil(static_cast<double>(m.ffn_hidden) / p.tp);
  double transient = std::max(2 * e * scores,                 // dP and dS of the unfused core
                              (m.gated_mlp() ? 3 : 2) * e * tok.T * f_local);  // MLP input grads
  if (last) transient = std::max(transient, 4.0 * tok.T * v_local);  // fp32 logits grad
  s.temporary += transient;
  if (p.zero_stage >= 3 && shard > 1)
    s.temporary += static_cast<double>(LayerParamsPerRank(m, p)) * mp.weight_bytes;

  s.reserved = mp.reserved_bytes;
  const double allocated = s.weights + s.gradients + s.optimizer + s.activations + s.temporary;
  s.total = allocated * (1.0 + mp.fragmentation) + s.reserved;
  return s;
}

}  // namespace dt
