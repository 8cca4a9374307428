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
  // (tp, cp) group: the pipeline ranks hold every layer once between them,
  // the embedding (first) and the head (last).
  const int dense = m.DenseLayers(0, m.num_layers);
  const double per_rank_microbatch = (m.num_layers - dense) * per_layer + dense * per_dense_layer +
                                     m.WindowedLayers(0, m.num_layers) * windowed_delta + SumFlops(emb.forward) +
                                     SumFlops(emb.backward) + SumFlops(head.forward) + SumFlops(head.backward) +
                                     mtp_flops;
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
