#include "planner/memory/param_count.h"

#include "base/check.h"

namespace dt {

namespace {
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

int64_t LayerParamsPerRank(const ModelSpec& m, const PlanSpec& p) {
  const int64_t h = m.hidden, d = m.head_dim(), t = p.tp;
  const int64_t a = m.heads / t;
  const int64_t kv = m.kv_heads >= t ? m.kv_heads / t : 1;  // replicated when tp > kv heads
  const int64_t f = CeilDiv(m.ffn_hidden, t);
  const int64_t n_qkv = (a + 2 * kv) * d;
  int64_t params = h * n_qkv + a * d * h;          // QKV (column) + proj (row)
  params += (m.gated_mlp() ? 3 : 2) * h * f;       // fc1 (+ gate) column, fc2 row
  if (m.family == ModelFamily::kGpt) {
    params += n_qkv + f;   // column-parallel biases: split
    params += h + h;       // proj and fc2 biases: replicated
    params += 2 * 2 * h;   // two LayerNorms (weight + bias): replicated
  } else {
    params += 2 * h;       // two RMSNorms: replicated
  }
  return params;
}

int64_t StageParamsPerRank(const ModelSpec& m, const PlanSpec& p, int pipeline_rank) {
  DT_CHECK(pipeline_rank >= 0 && pipeline_rank < p.pp) << "pipeline_rank=" << pipeline_rank;
  const int64_t h = m.hidden;
  const int64_t word = CeilDiv(m.vocab, p.tp) * h;
  int64_t params = static_cast<int64_t>(p.StageLayers(pipeline_rank)) * LayerParamsPerRank(m, p);
  if (pipeline_rank == 0) {
    params += word;
    if (m.learned_positions())
      params += static_cast<int64_t>(m.max_position > 0 ? m.max_position : m.seq_length) * h;
  }
  if (pipeline_rank == p.pp - 1) {
    params += m.family == ModelFamily::kGpt ? 2 * h : h;  // final norm
    if (!m.tied_embeddings || p.pp > 1) params += word;   // LM head, or the tied copy
  }
  return params;
}

}  // namespace dt
