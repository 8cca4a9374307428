#include "planner/memory/stage_memory.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/check.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/moe_ops.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/param_count.h"
#include "planner/memory/zero_units.h"
#include "planner/schedule/in_flight.h"

namespace dt {

namespace {

// Per-rank token counts of one microbatch (see layer_ops.cc).
struct Tokens {
  double T, T_r;
};
// Elements of A and B of the largest GEMM call among `ops` (a batched
// GEMM is `batch` calls, each with its own operands).
double LargestGemmOperands(const LayerOps& ops) {
  double largest = 0;
  for (const std::vector<Op>* v : {&ops.forward, &ops.backward})
    for (const Op& op : *v)
      if (op.kind == OpKind::kGemm)
        largest = std::max(largest, static_cast<double>(op.m) * op.k + static_cast<double>(op.k) * op.n);
  return largest;
}

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
  // The backward working set's element size (fp32 on the CPU runtime's bf16
  // path, which computes in fp32 from bf16 storage; else e).
  const double w = mp.working_bytes > 0 ? mp.working_bytes : e;
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
  // FP8 plans: Transformer Engine keeps an FP8 copy of every linear weight
  // and its FP8 transpose, cached from the first microbatch of a step to the
  // last (1 + 1 byte per weight; docs/fp8.md), next to the bf16 weights.
  // (Added after the ZeRO sharding below: the copies are never sharded.)
  // With --fp8-param-gather the FP8 weight is the parameter itself: 1 byte
  // plus the cached transpose instead of weight_bytes plus both copies.
  const int mtp_layers = last ? m.mtp_layers : 0;  // multi-token prediction modules (last rank)
  // MoE models with dense leading layers (DeepSeek's first_k_dense_replace):
  // those of this stage have a dense MLP, so their sizes are the dense
  // model's (DenseLayerModel), the others' the MoE layer's.
  const double stage_layers = p.StageLayers(pipeline_rank);
  const int dense_layers = DenseLayersOnStage(m, p, pipeline_rank);
  // (Built only when needed: EstimateStageMemory runs for every searched plan.)
  const std::optional<ModelSpec> dense_model =
      dense_layers > 0 ? std::optional<ModelSpec>(DenseLayerModel(m)) : std::nullopt;
  auto over_layers = [&](const auto& per_layer) {
    const double moe = (stage_layers - dense_layers) * per_layer(m);
    return dense_model ? dense_layers * per_layer(*dense_model) + moe : moe;
  };
  // The larger of the two layer kinds present on the stage (an MTP module
  // holds a layer of the model's kind; a stage without dense layers is
  // priced as before, one layer of the model's kind).
  const bool model_kind_layers = dense_layers == 0 || stage_layers > dense_layers || mtp_layers > 0;
  auto larger_kind = [&](const auto& per_layer) {
    const double moe_layer = model_kind_layers ? per_layer(m) : 0.0;
    return dense_model ? std::max(moe_layer, per_layer(*dense_model)) : moe_layer;
  };
  const double linear_weights =
      over_layers([&](const ModelSpec& k) { return static_cast<double>(LinearWeightParamsPerRank(k, p)); }) +
      mtp_layers * static_cast<double>(LinearWeightParamsPerRank(m, p));
  double fp8_copies = p.precision == Precision::kFp8 ? 2.0 * linear_weights : 0.0;
  if (p.fp8_param_gather) fp8_copies = (1.0 + 1.0 - mp.weight_bytes) * linear_weights;
  // MoE: routed-expert parameters are replicated over dp*cp/ep ranks only,
  // so the distributed optimizer shards their states over that group
  // (ZeRO-2/3 with experts is refused by Validate).
  const double expert_params = static_cast<double>(StageExpertParamsPerRank(m, p, pipeline_rank));
  const double expert_shard = static_cast<double>(p.expert_dp());
  if (expert_params > 0 && p.zero_stage >= 1)
    s.optimizer = (params - expert_params) * mp.optimizer_bytes / shard +
                  expert_params * mp.optimizer_bytes / expert_shard;
  // ZeRO-2/3 (runtime/model/sharded_params.h) shard unit by unit: each rank
  // keeps ceil(n / shard) of every unit of n parameters (zero_units.h).
  // Between uses it holds the gradient shard and (ZeRO-3) the value shard;
  // around a unit's backward, the unit's full gradient (and, ZeRO-3, its
  // gathered values) exist as temporaries (below).
  const bool unit_sharded = p.zero_stage >= 2 && shard > 1;
  double zero_layer_bytes = 0, zero_head_bytes = 0;
  if (unit_sharded) {
    const int sh = static_cast<int>(shard);
    double kept = 0;
    for (int local = 0; local < p.vpp; ++local) {
      const ChunkUnits cu = ZeroChunkUnits(m, p, local * p.pp + pipeline_rank);
      for (int64_t n : cu.units) kept += static_cast<double>(UnitShard(n, sh));
      // CPU bf16 (unit_working_bytes > 0, runtime/model/sharded_params.h):
      // the unit's full gradient is an fp32 buffer (narrowed in place for
      // bf16 gradients), and ZeRO-3's gathered bf16 values are freed once
      // widened into the fp32 working copy (counted below).
      const double full_bytes = mp.unit_working_bytes > 0 ? 4.0
                                                          : mp.grad_bytes + (p.zero_stage >= 3 ? mp.weight_bytes : 0);
      if (!cu.units.empty())
        zero_layer_bytes = static_cast<double>(UnitPadded(cu.layer, sh)) * full_bytes;
      if (cu.head_use > 0) {
        const int64_t norm = m.family == ModelFamily::kGpt ? 2 * m.hidden : m.hidden;
        zero_head_bytes = static_cast<double>(UnitPadded(norm, sh) + UnitPadded(cu.head_use - norm, sh)) * full_bytes;
      }
    }
    if (p.zero_stage >= 3) s.weights = kept * mp.weight_bytes;
    s.gradients = kept * mp.grad_bytes;
    s.optimizer = kept * mp.optimizer_bytes;
  }
  s.weights += fp8_copies;

  // Activations. in_flight counts chunk-microbatches; a chunk holds
  // StageLayers/vpp layers on average. What stays stored between a
  // microbatch's forward and backward:
  //
  // Combined 1F1B (PlanSpec::moe_a2a_overlap) runs each steady-state
  // forward paired with a backward of an earlier microbatch layer by layer:
  // the forward's layer i beside the backward's layer L-1-i (Megatron-LM,
  // megatron/core/models/common/model_chunk_schedule_plan.py: get_layer(i)
  // with pop_layer(), the backward freeing a layer's activations as the
  // forward stores one). The action list counts the pair's forward as one
  // more chunk-microbatch in flight; stored at once are one chunk-microbatch
  // less than that, plus the one layer being built (added below).
  // (No pairing when every forward of the step is a warmup forward: the
  // count is then capped at num_microbatches * vpp, all of them stored.)
  const bool paired = p.moe_a2a_overlap && in_flight_microbatches >= 2 &&
                      in_flight_microbatches < p.num_microbatches * p.vpp;
  const double in_flight = in_flight_microbatches - (paired ? 1 : 0);
  // Full recompute of only the first recompute_num_layers layers of each
  // chunk: the rank's recomputed share keeps just the layer inputs. A chunk
  // that recomputes all its layers rebuilds one on top of what is stored
  // (rebuilds_on_top, used for the backward working set below).
  double recomputed = 0, layers = 0;
  bool rebuilds_on_top = false, equal_chunks = true;
  for (int local = 0; local < p.vpp; ++local) {
    const int chunk = local * p.pp + pipeline_rank;
    const int n = p.RecomputedLayers(chunk);
    recomputed += n;
    layers += p.layers_per_chunk[chunk];
    rebuilds_on_top |= n > 0 && n == p.layers_per_chunk[chunk];
    equal_chunks &= p.layers_per_chunk[chunk] == p.layers_per_chunk[pipeline_rank];
  }
  const double share = layers > 0 ? recomputed / layers : 1.0;
  // Unequal chunks (an uneven or accounted split under the interleaved
  // schedule): the rank's peak holds more pairs of its heavier chunks than
  // the average chunk says. The schedule's peak of stored layers over
  // in_flight x the average chunk scales the count (1 for equal chunks).
  double uneven = 1.0;
  if (!equal_chunks && layers > 0) {
    const int schedule_in_flight = InFlightMicrobatches(p, pipeline_rank);
    if (schedule_in_flight > 0)
      uneven = PeakInFlightLayers(p, pipeline_rank) / (schedule_in_flight * layers / p.vpp);
  }
  s.activations = over_layers([&](const ModelSpec& k) {
                    return StoredBytesPerLayer(k, p, mp.activation_bytes, share, mp.attention_kernels);
                  }) / p.vpp * in_flight * uneven;
  if (paired)
    s.activations += larger_kind([&](const ModelSpec& k) {
      return StoredBytesPerLayer(k, p, mp.activation_bytes, share, mp.attention_kernels);
    });
  // The first and last model chunks are one of the rank's vpp chunks: their
  // in-flight count is approximated by ceil(in_flight / vpp).
  const double end_in_flight = std::ceil(static_cast<double>(in_flight) / p.vpp);
  if (first && m.uses_dropout())
    if (p.dropout) s.activations += tok.T_r * h * end_in_flight;  // embedding dropout mask (1 byte)
  // Last chunk: final-norm input and LM-head input, and the fp32 logits kept
  // for the cross-entropy backward (Korthikanti et al. 2022, Sec. 4.3: 4sbv/t).
  const double head_stash = last ? 2 * e * tok.T_r * h + 4.0 * tok.T * v_local : 0.0;
  // On the last pipeline rank, 1F1B and interleaved run each last-chunk
  // forward right before its backward: one head stash at a time (GPipe
  // keeps all of them; so does combined 1F1B, whose pair runs the
  // backward's loss and head first and the forward's last).
  const double head_in_flight = p.pp > 1 && p.schedule != Schedule::kGpipe ? 1.0 : end_in_flight;
  s.activations += head_stash * head_in_flight;
  // Multi-token prediction (last chunk, after the head, on the same
  // schedule): per module one layer's stored activations, the eh_proj input
  // (2h, at the SP shard) and the two norms' inputs, and its own head stash.
  if (mtp_layers > 0)
    s.activations += mtp_layers * head_in_flight *
                     (ActivationBytesPerLayer(m, p, mp.activation_bytes, mp.attention_kernels) + 4 * e * tok.T_r * h +
                      head_stash);
  // Pipeline p2p: a received activation is the stored layer input; a
  // received gradient is the incoming gradient of the backward working set
  // below; sent buffers are freed once their send completes. Under dtrun a
  // forward send completes only when the next rank posts its receive, so up
  // to every microbatch in flight may still hold its sent output (a bound:
  // how many do depends on the two ranks' speeds; GPipe's first rank held
  // about 11 of 16 in a gpt-tiny pp 2 run, docs/memory.md).
  if (mp.sends_held_until_received && p.pp > 1 && (!last || p.vpp > 1))
    s.temporary += in_flight * ActivationMessageBytes(m, p, mp.activation_bytes);

  // Temporaries: the DP gradient buffers, the peak working set of one
  // backward, and the ZeRO-2/3 unit buffers of one layer. ZeRO-0 all-reduces
  // the contiguous gradient buffer in place (Megatron's grad buffer, the
  // runtime's GradSync); sharded stages reduce-scatter a bucket of it into
  // a buffer for this rank's shard. With experts (ep > 1), the dense and the
  // expert gradients are reduce-scattered over their own groups (DP x CP and
  // expert-DP), each with its own buffers, and a group of one reduces
  // nothing (runtime/optim/zero_shard.h).
  if (p.zero_stage == 1) {
    auto reduce_scatter_buffers = [&](double n, double group) {
      if (group <= 1 || n <= 0) return 0.0;
      return std::min(static_cast<double>(p.dp_bucket_bytes), n * mp.grad_bytes) + n * mp.grad_bytes / group;
    };
    if (expert_params > 0 && p.ep > 1)
      s.temporary += reduce_scatter_buffers(params - expert_params, shard) +
                     reduce_scatter_buffers(expert_params, expert_shard);
    else
      s.temporary += reduce_scatter_buffers(params, shard);
  }
  const double a_local = m.heads / p.tp;
  const double scores = static_cast<double>(p.micro_batch) * a_local * (p.seq_length / p.cp) * p.seq_length;
  const double f_local = std::ceil(static_cast<double>(m.ffn_hidden) / p.tp);
  // A layer's backward: the incoming gradient and the residual-branch
  // gradient (sequence shards), the gathered input gradient of the block and
  // the MLP input gradients; the unfused core needs dP and dS.
  // Under SP the block's output gradient and its input (for the weight
  // gradient) are all-gathered to the full sequence as well.
  const bool sp = p.sequence_parallel && p.tp > 1;
  // Ring attention (cp > 1) never holds the scores of all heads: its backward
  // works one head and one K/V block at a time (P if recomputed, dP/dS:
  // 2 (s/cp)^2) next to the ring buffers (K/V in hand and arriving, the dK/dV
  // contribution, the arriving and the departing accumulator: 5 blocks of
  // 2 T kv_l d) and D = rowsum(dO O) (fp32 per query row and head).
  const double s_local = static_cast<double>(p.seq_length / p.cp);
  // Unfused ring attention carries K/V expanded to the query heads (GQA).
  const double kv_local = p.flash_attention ? (m.kv_heads >= p.tp ? m.kv_heads / p.tp : 1) : a_local;
  // A fused (flash) core without CP never materialises the scores either:
  // its backward holds the fp32 dQ accumulator (FlashAttention-2's
  // dq_accum; cuDNN's backward workspace likewise), the dQ, dK, dV it
  // writes and the fp32 D = rowsum(dO O) per query row and head.
  const double attn_bwd =
      p.cp > 1 ? 2 * w * s_local * s_local + 5 * 2 * w * tok.T * kv_local * m.head_dim() +
                     4.0 * p.micro_batch * a_local * s_local
      : p.flash_attention
          ? 4.0 * tok.T * a_local * m.head_dim() + w * tok.T * (a_local + 2 * kv_local) * m.head_dim() +
                4.0 * p.micro_batch * a_local * s_local
          : UsesMegatronTorchSoftmax(m, p, mp.activation_bytes, mp.attention_kernels)
              ? std::max(2 * w, 8.0) * scores  // Megatron's PyTorch softmax backward: fp32 gradients
              : 2 * w * scores;
  // SwiGLU's backward holds the activation gradient next to the gate and
  // up gradients it produces (3 T f); GeLU's works in place (T f).
  double mlp_bwd = (m.gated_mlp() ? 3 : 1) * w * tok.T * f_local;
  if (m.moe() && model_kind_layers) {
    // MoE: the experts' backward over the busiest rank's routed rows (the
    // three gradients of the gated MLP and the gathered input and output
    // gradients), or the shared experts', whichever is larger.
    const double rows = ExpertLoadImbalance(p) * ExpertRowsPerRank(m, p);
    const double fe = std::ceil(static_cast<double>(m.moe_ffn_hidden) / p.expert_tp());
    const double fs = std::ceil(static_cast<double>(m.shared_ffn_hidden) / p.tp);
    const double moe_bwd = std::max((m.gated_mlp() ? 3 : 1) * w * rows * fe + 2 * w * rows * h,
                                    (m.gated_mlp() ? 3 : 1) * w * tok.T * fs);
    // (A stage that also holds dense leading layers: the larger of the two.)
    mlp_bwd = dense_layers > 0 ? std::max(mlp_bwd, moe_bwd) : moe_bwd;
  }
  double layer_bwd = std::max(attn_bwd, 2 * w * tok.T_r * h + (sp ? 3 : 1) * w * tok.T * h + mlp_bwd);
  // Recompute rebuilds the layer's stored tensors before its backward
  // (full: the whole layer beyond its stored input; selective: the scores
  // of an unfused core, except under CP, where each block's are rebuilt
  // inside the ring above -- a fused core rebuilds them tile by tile inside
  // its backward kernel, never whole -- plus what the plan's other
  // recompute modules dropped, all counted alive together).
  // With only the first N layers of each chunk recomputed (and N short of
  // the chunk), the backward reaches them after the chunk's other layers
  // have freed this microbatch's stored activations, at least one layer's
  // worth: the rebuilt layer fits in that space.
  if (p.recompute == Recompute::kFull && rebuilds_on_top) {
    layer_bwd += larger_kind([&](const ModelSpec& k) {
      return ActivationBytesPerLayerFor(k, p, static_cast<int>(w), Recompute::kNone, mp.attention_kernels) -
             ActivationBytesPerLayerFor(k, p, static_cast<int>(w), Recompute::kFull, mp.attention_kernels);
    });
  } else if (p.recompute == Recompute::kSelective) {
    if (p.Recomputes(kRecomputeCoreAttn) && p.cp == 1 && !p.flash_attention)
      layer_bwd += AttentionScoreBytesPerLayer(m, p, static_cast<int>(w), mp.attention_kernels);
    layer_bwd += larger_kind(
        [&](const ModelSpec& k) {
          return RecomputedModuleBytesPerLayer(k, p, static_cast<int>(w), mp.attention_kernels);
        });
  }
  // CPU bf16: the layer's stored tensors are widened to fp32 for its
  // backward (runtime/model/stash_precision.h).
  if (w != e)
    layer_bwd += larger_kind([&](const ModelSpec& k) {
      return ActivationBytesPerLayer(k, p, static_cast<int>(w), mp.attention_kernels) -
             ActivationBytesPerLayer(k, p, mp.activation_bytes, mp.attention_kernels);
    });
  // The head's backward (last chunk) holds the fp32 logits and their
  // gradient plus the hidden-size input gradient; it frees its stash before
  // the layers' backward starts.
  // (CPU bf16: with its stored input and norm output widened to fp32.)
  const double head_bwd = last ? 4.0 * tok.T * v_local + w * tok.T * h + 2 * (w - e) * tok.T_r * h : 0.0;
  // ZeRO-2/3: the unit in backward also holds its full gradient buffer and,
  // ZeRO-3, its gathered values (the head's: final norm and LM head).
  // CPU bf16: the unit in use has fp32 values and, in backward, an fp32
  // gradient buffer (runtime/model/bf16_params.h).
  // (Under ZeRO-2/3 its gradient buffer is the unit buffer above: 4 B here.)
  double unit_layer_bytes = 0, unit_head_bytes = 0;
  if (mp.unit_working_bytes > 0) {
    const double unit_bytes = unit_sharded ? 4.0 : mp.unit_working_bytes;
    for (int local = 0; local < p.vpp; ++local) {
      const ChunkUnits cu = ZeroChunkUnits(m, p, local * p.pp + pipeline_rank);
      unit_layer_bytes = std::max(unit_layer_bytes, static_cast<double>(cu.layer) * unit_bytes);
      unit_head_bytes = std::max(unit_head_bytes, static_cast<double>(cu.head_use) * unit_bytes);
    }
  }
  // CPU bf16: the GEMM in flight holds bf16 copies of its operands. The
  // head's backward GEMMs run after the runtime has freed the fp32 logits
  // (runtime/model/model_chunk.cc HeadBackward), so their copies take that
  // space first.
  double copy_layer_bytes = 0, copy_head_bytes = 0;
  if (mp.gemm_operand_copy_bytes > 0) {
    copy_layer_bytes = mp.gemm_operand_copy_bytes * larger_kind([&](const ModelSpec& k) {
      return LargestGemmOperands(TransformerLayerOps(k, p, static_cast<int>(e)));
    });
    if (last)
      copy_head_bytes = std::max(0.0, mp.gemm_operand_copy_bytes * LargestGemmOperands(HeadOps(m, p, static_cast<int>(e))) -
                                          4.0 * tok.T * v_local);
  }
  s.temporary += std::max(layer_bwd - head_stash + zero_layer_bytes + unit_layer_bytes + copy_layer_bytes,
                          head_bwd + (last ? zero_head_bytes + unit_head_bytes + copy_head_bytes : 0.0));

  s.reserved = mp.reserved_bytes;
  // The allocator's slack comes from reusing freed blocks for tensors of
  // other sizes: only what is freed and allocated again every microbatch
  // (activations, temporaries) fragments. Weights, gradients, optimizer
  // states and FP8 weight caches are allocated once, before the first step,
  // and live to the end (Megatron's contiguous grad / param buffers).
  const double persistent = s.weights + s.gradients + s.optimizer;
  s.total = persistent + (s.activations + s.temporary) * (1.0 + mp.fragmentation) + s.reserved;
  return s;
}

}  // namespace dt
