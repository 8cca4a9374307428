// ModelChunk: model chunk `chunk` of a PlanSpec on one TP rank: layers
// [ChunkFirstLayer(chunk), +layers_per_chunk[chunk]), plus the token (and,
// for GPT, learned position) embedding on chunk 0, plus the final norm, LM
// head and vocab-parallel cross-entropy on the last chunk. Two families:
// GPT-2 (GptLayer: LayerNorm, GeLU MLP, causal MHA, tied head) and Llama
// (LlamaLayer: RMSNorm, SwiGLU, RoPE, GQA; final RMSNorm
// "final_norm.weight"; untied "lm_head.weight" unless tie_word_embeddings).
// Dropout (EnableDropout; GPT only): Megatron's sites (embedding output,
// attention probabilities, attention and MLP outputs before the residual
// adds) with masks keyed by the global sample index of each batch row
// (Forward's `samples`), global layer, position, head and column
// (runtime/ops/dropout.h): deterministic, and equal for every plan.
//
// Parallelism: Megatron tensor parallelism over comms.tp (column-parallel
// QKV/fc1, row-parallel proj/fc2, vocab-parallel embedding/head/loss) and,
// if plan.sequence_parallel, sequence parallelism (LayerNorms on sequence
// shards, all-gather / reduce-scatter around the parallel linears; the
// shard-partial grads of LayerNorms and row-parallel biases are all-reduced
// over TP inside each Backward), and context parallelism over comms.cp
// (plan.cp > 1): this rank holds the positions cp_layout.h assigns to its CP
// rank (chunks r and 2cp-1-r of 2cp), embeds them at their global
// positions and runs ring attention (ring_attention.h); the SP shard is a
// shard of the CP-local sequence. pp/tied comms are not used here: the
// interpreter moves activations, reduces grads over DP x CP (and `tied`
// params — the embedding on first and last chunk when pp > 1 — over the
// tied group).
//
// ZeRO-2/3 (plan.zero_stage >= 2 and comms.dp of size > 1; comms.dp must be
// the group the optimizer shards over, Groups::dp_cp when cp > 1): the
// chunk's ParamStore is split into units (embedding.word,
// embedding.position, layers.N, final_ln, lm_head) and handed to a
// ShardedParams (sharded_params.h) over comms.dp. Around every use of a
// unit — the embedding, each layer's forward, each layer's backward
// (recompute included), the head — the chunk gathers its values (ZeRO-3)
// and, in backward, gives it a full gradient buffer that is reduce-scattered
// over comms.dp right after that unit's backward. Gathers are blocking (no
// prefetch). Layers keep reading W(i) / G(i) unchanged.
//
// Mixture of experts (model.moe(), Llama family only): every layer's MLP is
// a MoeMlp (moe_mlp.h) over comms.ep (plan.ep ranks, experts split evenly),
// each expert's FFN split over TP. Expert Params are flagged
// (Param::expert) so the optimizer reduces them over the expert-DP group.
//
// Data layout: tokens/targets are [micro_batch * seq] batch-major over the
// FULL sequence (tokens[b * seq + t]); each CP rank picks its positions.
// Activations exchanged between chunks are sequence-major
// [seq_local, micro_batch, hidden] (row = t * batch + b; seq_local =
// seq / cp / tp under SP, else seq / cp): a buffer of that many floats.
//
// Loss convention: Forward on the last chunk returns the mean token loss
// of the microbatch over the full sequence (a {1} tensor, also in *loss;
// under CP the mean of the CP ranks' local means, equal token counts, by a
// scalar all-reduce over comms.cp). Backward differentiates the LOCAL mean,
// so summing gradients over DP x CP and dividing by dp * cp gives the
// gradient of the step loss (mean over microbatches and DP ranks): the
// interpreter passes loss_scale = 1 / num_microbatches to Backward and the
// optimizer averages over Groups::dp_cp.
//
// bf16 mixed precision (plan.precision == Precision::kBf16): the store's
// values and grads are bf16 (bf16_params.h; under ZeRO-2/3 the sharding's,
// sharded_params.h; fp32 main gradients with grad_bytes 4), fp32 working copies
// exist only around a unit's use (the same BeginUse/EndUse hooks as ZeRO-3),
// and every layer's stash is narrowed to bf16 after its forward and widened
// before its backward (stash_precision.h); the LM head keeps its input and
// norm output in bf16, its logits in fp32. Activations exchanged between
// chunks stay fp32.
//
// Initialisation is a pure function of (seed, global name, global index)
// (runtime/model/init.h): identical values for any plan. N(0, 0.02);
// attn.proj and mlp.fc2 weights N(0, 0.02 / sqrt(2 * num_layers));
// LayerNorm weight 1, biases 0.
//
// Ownership: the chunk owns its ParamStore and per-microbatch stashes; it
// refers to the Backend and Comms (not owned; must outlive it). Not
// thread-safe. Misuse (unknown microbatch, wrong sizes) aborts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"
#include "runtime/backend/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/model/gpt_layer.h"
#include "runtime/model/transformer_layer.h"
#include "runtime/model/layer_context.h"
#include "runtime/model/param_store.h"
#include "runtime/model/bf16_params.h"
#include "runtime/model/sharded_params.h"
#include "runtime/ops/dropout.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

struct ParallelComms {
  Comm* tp = nullptr;    // null: tp must be 1
  Comm* dp = nullptr;    // the gradient-averaging / ZeRO group: Groups::dp, or dp_cp when cp > 1
  Comm* pp = nullptr;
  Comm* tied = nullptr;  // first + last pipeline stage, or nullptr
  Comm* cp = nullptr;    // null: cp must be 1
  Comm* ep = nullptr;    // MoE expert-parallel group (Groups::ep); null: plan.ep must be 1
};

class ModelChunk {
 public:
  ModelChunk(const ModelSpec& model, const PlanSpec& plan, int chunk, int tp_rank,
             const ParallelComms& comms, Backend& backend, uint64_t seed);

  // Forward of microbatch mb. The first chunk reads tokens; others read
  // `input` (seq_local * batch * hidden floats). The last chunk reads
  // targets, returns the mean loss as a {1} tensor and sets *loss (if
  // non-null); other chunks return the output activation.
  // samples: the global sample index of each of the micro_batch rows (the
  // dropout masks' keys); needed when dropout is enabled, else ignored.
  Tensor Forward(int mb, const Tensor* input, const int32_t* tokens, const int32_t* targets,
                 float* loss, const int64_t* samples = nullptr);
  // Backward of mb. grad_output: grad of this chunk's output (ignored on the
  // last chunk, whose loss grad is loss_scale). Accumulates parameter grads
  // into params(); returns the grad of the input (empty on the first chunk).
  // Frees mb's stash.
  Tensor Backward(int mb, const Tensor* grad_output, float loss_scale);

  // Trains with dropout at `rate` (in [0, 1); 0: off), masks keyed by
  // `seed`. Only for a plan with dropout of a model that uses it (GPT);
  // anything else aborts.
  void EnableDropout(float rate, uint64_t seed);
  bool dropout_on() const { return ctx_.dropout.on(); }

  ParamStore& params() { return store_; }
  ShardedParams* sharding() { return zero_.get(); }
  bool is_first() const { return is_first_; }
  bool is_last() const { return is_last_; }
  int64_t activation_numel() const { return ctx_.local_rows * ctx_.hidden; }
  int num_stashed() const { return static_cast<int>(stash_.size()); }

 private:
  struct HeadStash {
    Tensor x, mean, rstd, lnf, logits, lse;
    std::vector<int32_t> targets;  // sequence-major
  };
  struct Stash {
    std::vector<int32_t> tokens;  // sequence-major (first chunk)
    std::vector<int64_t> samples; // global sample index per batch row (dropout)
    DropoutMask embed_mask;       // embedding dropout (first chunk)
    std::vector<LayerStash> layers;
    HeadStash head;
  };
  Tensor EmbedForward(const int32_t* tokens, Stash* s);
  void EmbedBackward(const Tensor& dx, Stash* s);
  float HeadForward(Tensor x, const int32_t* targets, HeadStash* s);
  Tensor HeadBackward(HeadStash* s, float loss_scale);
  // Sequence-major ids of this rank's local positions.
  std::vector<int32_t> SeqMajor(const int32_t* batch_major) const;
  void InitParams(uint64_t seed);
  // ZeRO-2/3 unit hooks (no-ops when the store is not sharded).
  void BeginUse(const std::vector<int>& units, bool backward);
  void EndUse(const std::vector<int>& units, bool backward);

  ModelSpec model_;
  PlanSpec plan_;
  int chunk_;
  bool is_first_, is_last_;
  ParallelComms comms_;
  ParamStore store_;
  LayerContext ctx_;
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  int64_t vocab_start_ = 0, vocab_local_ = 0;
  int word_ = -1, pos_ = -1, lnf_w_ = -1, lnf_b_ = -1, head_w_ = -1;
  std::vector<int> embed_units_, layer_units_, head_units_;  // ParamStore units by use
  std::map<int, Stash> stash_;
  std::unique_ptr<ShardedParams> zero_;  // after store_: destroyed first
  std::unique_ptr<Bf16Params> bf16_;     // likewise
};

}  // namespace dt::rt
