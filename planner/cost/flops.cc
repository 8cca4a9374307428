#include "planner/cost/flops.h"

#include <algorithm>

#include "planner/cost/layer_ops.h"

namespace dt {

namespace {
// Model FLOPs are counted at 16-bit; the element size does not change flops.
constexpr int kBytes = 2;

// FLOPs of an op list with the attention cores scaled by `attention`.
double Flops(const std::vector<Op>& ops, double attention) {
  double f = 0;
  for (const Op& op : ops) f += op.kind == OpKind::kAttention ? attention * op.flops : op.flops;
  return f;
}

}  // namespace

double StepFlops(const ModelSpec& m, const PlanSpec& p, bool with_recompute, bool causal_attention) {
  const double attention = causal_attention ? 0.5 : 1.0;
  auto layer_flops = [&](const ModelSpec& model, bool windowed = false) {
    const LayerOps layer = TransformerLayerOps(model, p, kBytes, windowed);
    double f = Flops(layer.forward, attention) + Flops(layer.backward, attention);
    if (with_recompute) f += Flops(layer.recompute, attention);
    return f;
  };
  const double per_layer = layer_flops(m);
  // Sliding-window layers: the attention core over the keys it visits.
  const double windowed_delta = m.WindowApplies(p.seq_length) ? layer_flops(m, true) - per_layer : 0.0;
  // MoE models with dense leading layers (DeepSeek): those layers' own count.
  const double per_dense_layer = m.has_dense_layers() ? layer_flops(DenseLayerModel(m)) : 0.0;
  const LayerOps emb = EmbeddingOps(m, p, kBytes);
  const LayerOps head = HeadOps(m, p, kBytes);
  const LayerOps mtp = MtpOps(m, p, kBytes);  // multi-token prediction: empty without it
  const double mtp_flops = Flops(mtp.forward, attention) + Flops(mtp.backward, attention) +
                           (with_recompute ? Flops(mtp.recompute, attention) : 0.0);

  // One microbatch through one model replica, as seen by one rank of each
  // (tp, cp) group: sum over pipeline ranks of their layers.
  double per_rank_microbatch = 0;
  for (int stage = 0; stage < p.pp; ++stage) {
    int dense = 0;
    for (int c = stage; c < p.num_chunks(); c += p.pp) dense += m.DenseLayers(p.ChunkFirstLayer(c), p.layers_per_chunk[c]);
    per_rank_microbatch += (p.StageLayers(stage) - dense) * per_layer + dense * per_dense_layer;
    for (int c = stage; c < p.num_chunks(); c += p.pp)
      per_rank_microbatch += m.WindowedLayers(p.ChunkFirstLayer(c), p.layers_per_chunk[c]) * windowed_delta;
    if (stage == 0) per_rank_microbatch += SumFlops(emb.forward) + SumFlops(emb.backward);
    if (stage == p.pp - 1) per_rank_microbatch += SumFlops(head.forward) + SumFlops(head.backward) + mtp_flops;
  }
  const double ranks_per_stage = static_cast<double>(p.dp) * p.tp * p.cp;
  return per_rank_microbatch * p.num_microbatches * ranks_per_stage;
}

double NarayananEq3Flops(const ModelSpec& m, int64_t batch, int seq, bool full_recompute) {
  const double B = static_cast<double>(batch), s = seq, l = m.num_layers, h = m.hidden,
               V = m.vocab;
  if (full_recompute) return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

}  // namespace dt
