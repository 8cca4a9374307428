#include "planner/memory/param_count.h"

#include <algorithm>

#include "base/check.h"

namespace dt {

namespace {
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

int64_t AttentionParamsPerRank(const ModelSpec& m, const PlanSpec& p) {
  const int64_t h = m.hidden, d = m.head_dim(), t = p.tp;
  const int64_t a = m.heads / t;
  if (m.mla()) {
    const int64_t q = m.q_lora_rank > 0
                          ? h * m.q_lora_rank + m.q_lora_rank + static_cast<int64_t>(m.q_lora_rank) * a * d
                          : h * a * d;
    const int64_t kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                       static_cast<int64_t>(m.kv_lora_rank) * a * (m.qk_nope_head_dim + m.v_head_dim);
    return q + kv + a * m.v_head_dim * h;
  }
  const int64_t kv = m.kv_heads >= t ? m.kv_heads / t : 1;  // replicated when tp > kv heads
  return h * (a + 2 * kv) * d + a * d * h;  // QKV (column) + proj (row)
}

int DenseLayersInChunk(const ModelSpec& m, const PlanSpec& p, int chunk) {
  if (!m.has_dense_layers()) return 0;
  return m.DenseLayers(p.ChunkFirstLayer(chunk), p.layers_per_chunk[chunk]);
}

int DenseLayersOnStage(const ModelSpec& m, const PlanSpec& p, int pipeline_rank) {
  int n = 0;
  for (int c = pipeline_rank; c < p.num_chunks(); c += p.pp) n += DenseLayersInChunk(m, p, c);
  return n;
}

int64_t LayerParamsPerRank(const ModelSpec& m, const PlanSpec& p) {
  const int64_t h = m.hidden, d = m.head_dim(), t = p.tp;
  const int64_t a = m.heads / t;
  const int64_t kv = m.kv_heads >= t ? m.kv_heads / t : 1;  // replicated when tp > kv heads
  const int64_t f = CeilDiv(m.ffn_hidden, t);
  const int64_t n_qkv = (a + 2 * kv) * d;
  int64_t params = AttentionParamsPerRank(m, p);
  const int64_t mats = m.gated_mlp() ? 3 : 2;
  if (m.moe()) {
    params += static_cast<int64_t>(m.num_experts) * h;                  // router: replicated
    params += ExpertLayerParamsPerRank(m, p);                            // E/ep experts, split over etp
    params += mats * h * CeilDiv(m.shared_ffn_hidden, t);                // shared experts, split over tp
    if (m.shared_expert_gate) params += h;                               // shared gate: replicated
  } else {
    params += mats * h * f;                        // fc1 (+ gate) column, fc2 row
  }
  if (m.linear_bias()) {
    params += n_qkv + h;                           // QKV (split), proj (replicated)
    if (!m.moe()) {
      params += (m.gated_mlp() ? 2 : 1) * f + h;   // fc1 (split), fc2 (replicated)
    } else {                                       // the experts' own are in ExpertLayerParamsPerRank
      params += m.num_experts;                     // router bias (GPT-OSS): replicated
      if (m.shared_ffn_hidden > 0) params += 2 * CeilDiv(m.shared_ffn_hidden, t) + h;
    }
  } else if (m.qkv_bias) {
    params += n_qkv;                               // Q/K/V biases only (Qwen2)
  }
  if (m.attention_sinks) params += a;              // one learned sink logit per local head
  params += static_cast<int64_t>(m.norms_per_layer) * (m.layer_norm() ? 2 : 1) * h;  // norms: replicated
  if (m.qk_norm) params += 2 * d;  // q / k norms over head_dim: replicated
  return params;
}

int64_t LinearWeightParamsPerRank(const ModelSpec& m, const PlanSpec& p) {
  const int64_t h = m.hidden, t = p.tp;
  const int64_t mats = m.gated_mlp() ? 3 : 2;
  int64_t params = AttentionParamsPerRank(m, p);
  if (m.moe())
    params += ExpertLayerParamsPerRank(m, p) + mats * h * CeilDiv(m.shared_ffn_hidden, t);
  else
    params += mats * h * CeilDiv(m.ffn_hidden, t);
  return params;
}

int64_t MtpParamsPerRank(const ModelSpec& m, const PlanSpec& p) {
  if (m.mtp_layers <= 0) return 0;
  const int64_t h = m.hidden, norm = m.layer_norm() ? 2 * h : h;
  int64_t params = static_cast<int64_t>(m.mtp_layers) * (LayerParamsPerRank(m, p) + 2 * h * CeilDiv(h, p.tp) + 3 * norm);
  if (p.pp > 1 && !m.tied_embeddings) params += CeilDiv(m.vocab, p.tp) * h;
  return params;
}

int64_t ExpertLayerParamsPerRank(const ModelSpec& m, const PlanSpec& p) {
  if (!m.moe()) return 0;
  const int64_t mats = m.gated_mlp() ? 3 : 2;
  const int64_t f = CeilDiv(m.moe_ffn_hidden, p.expert_tp());
  // Biases (GPT-OSS): fc1's gate and up split over etp, fc2's replicated.
  const int64_t biases = m.linear_bias() ? 2 * f + m.hidden : 0;
  return static_cast<int64_t>(m.num_experts / p.ep) * (mats * m.hidden * f + biases);
}

int64_t StageExpertParamsPerRank(const ModelSpec& m, const PlanSpec& p, int pipeline_rank) {
  DT_CHECK(pipeline_rank >= 0 && pipeline_rank < p.pp) << "pipeline_rank=" << pipeline_rank;
  int moe_layers = p.StageLayers(pipeline_rank) - DenseLayersOnStage(m, p, pipeline_rank);
  if (pipeline_rank == p.pp - 1) moe_layers += m.mtp_layers;  // the MTP modules' layers
  return static_cast<int64_t>(moe_layers) * ExpertLayerParamsPerRank(m, p);
}

int64_t StageParamsPerRank(const ModelSpec& m, const PlanSpec& p, int pipeline_rank) {
  DT_CHECK(pipeline_rank >= 0 && pipeline_rank < p.pp) << "pipeline_rank=" << pipeline_rank;
  const int64_t h = m.hidden;
  const int64_t word = CeilDiv(m.vocab, p.tp) * h;
  const int dense = DenseLayersOnStage(m, p, pipeline_rank);
  int64_t params = static_cast<int64_t>(p.StageLayers(pipeline_rank) - dense) * LayerParamsPerRank(m, p);
  if (dense > 0) params += dense * LayerParamsPerRank(DenseLayerModel(m), p);
  if (pipeline_rank == 0) {
    params += word;
    if (m.learned_positions()) params += static_cast<int64_t>(m.position_rows()) * h;
  }
  if (pipeline_rank == p.pp - 1) {
    params += m.layer_norm() ? 2 * h : h;  // final norm
    if (!m.tied_embeddings || p.pp > 1) params += word;   // LM head, or the tied copy
    params += MtpParamsPerRank(m, p);
  }
  return params;
}

}  // namespace dt
