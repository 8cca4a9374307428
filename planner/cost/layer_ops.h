// LayerOps: the exact sequence of kernels and collectives one transformer
// layer (and the embedding / LM-head ends of the model) runs on one rank for
// one microbatch, under a given plan. The single description of "what a
// layer does" that the FLOP count, the compute-time model and the lowering
// onto the simulator all read, and that the runtime's layers follow.
//
// Shapes are per rank: TP splits heads and FFN columns, CP splits the
// sequence, SP changes which collectives run (all-gather / reduce-scatter
// instead of all-reduce). Pure functions of (model, plan); no I/O, no
// failure modes (inputs are assumed Validate()d).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/cost/attention_kernels.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

enum class OpKind {
  kGemm,         // C[m,n] (+)= A[m,k] * B[k,n], `batch` independent times
  kAttention,    // attention core: softmax(QK^T)V, causal; flops/bytes given
  kMemoryBound,  // elementwise / norm / softmax / dropout / optimizer: `bytes` moved
  kCollective,   // a collective on a process group
};

// kAllToAll: MoE token dispatch / combine. Profiles hold no table of their
// own for it (HardwareProfile::network has the first four); comm_cost.h
// derives its price from the all-gather tables.
enum class CollKind { kAllReduce, kReduceScatter, kAllGather, kSendRecv, kAllToAll };
// kEp: the expert-parallel group (ep DP replicas, planner/spec/rank_grid.h).
// kEtp: the expert-TP group of an MoE layer (PlanSpec::expert_tp ranks
// inside the TP group; the TP group itself when etp == tp).
enum class GroupKind { kTp, kCp, kDp, kPp, kEp, kEtp };
const char* ToString(CollKind k);
const char* ToString(GroupKind g);

struct Op {
  OpKind kind = OpKind::kMemoryBound;
  const char* name = "";
  // kGemm: shape; kAttention: m = query rows, n = key columns (per head),
  // k = head_dim, batch = micro_batch * local heads.
  int64_t m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;   // floating-point operations (2*m*n*k*batch for GEMMs)
  double bytes = 0;   // bytes read + written (memory-bound ops; 0 for GEMMs)
  // kCollective: operation, group, and message size in bytes as
  // nccl-tests counts it (the full buffer for all-reduce; the full output
  // for all-gather; the full input for reduce-scatter).
  CollKind coll = CollKind::kAllReduce;
  GroupKind group = GroupKind::kTp;
  int group_size = 1;
  // Time multiplier for work that scales with the tokens routed to this
  // rank's experts: the busiest rank's share over the balanced share (the
  // MoE load-imbalance allowance, planner/cost/moe_ops.h). OpTime multiplies
  // by it; FLOP counts (flops, SumFlops) are the balanced ones.
  double imbalance = 1.0;
  // kGemm: inputs in FP8 (Transformer Engine style; compute_cost.h prices it
  // with the profile's FP8 curve). FLOP counts are unchanged.
  bool fp8 = false;
  // kAttention: priced with the profile's cuDNN attention curve
  // (PlanSpec::cudnn_attention).
  bool cudnn_attention = false;
  // kAttention: a fused causal core under context parallelism runs as a
  // ring over this many ranks: one causal block of its m local queries and
  // keys, and cp_ring - 1 non-causal blocks of half that area (Transformer
  // Engine's load-balanced split); compute_cost.cc prices the blocks with the
  // profile's causal and non-causal curves. 1: one kernel over all n keys.
  int cp_ring = 1;
  // kMemoryBound: a Transformer Engine FP8 scaling kernel (amax, cast,
  // weight cast), launched inside the GEMM module's own call: its device time
  // is priced, no framework host time of its own (planner/lower/plan_costs.cc).
  bool fp8_scaling = false;
  // kAllToAll of an MoE dispatch or combine under a deduplicating dispatcher
  // (PlanSpec::moe_dispatcher): `bytes` hold the dedup_top_k routed copies of
  // each token, over dedup_experts experts spread evenly on the group; the
  // wire carries one copy per destination rank, and across nodes one per
  // destination node (OpCollectiveTime, comm_cost.h). 0: every copy is sent.
  int dedup_top_k = 0;
  int64_t dedup_experts = 0;
  // Megatron-LM's --moe-shared-expert-overlap (PlanSpec::
  // moe_shared_expert_overlap): an MoE block's ops fall into two overlap
  // windows per direction, each the routed path's ops on the compute stream
  // (side_stream false) and the shared experts' ops on a stream of their own
  // (side_stream true), priced together (plan_costs.cc, Price). Consecutive
  // ops with the same nonzero window form one window; 0: no window.
  int overlap_window = 0;
  bool side_stream = false;
  // The eager MoE block's host time (HardwareProfile compute.moe_host):
  // which of its three parts this op belongs to and its share of that
  // part's host time (the shares of a part's ops sum to 1 in the block's
  // full op list), charged to the host's launch clock before the op
  // (plan_costs.cc, Price). kNone: the op has only the profile's per-op
  // host_overhead_s.
  enum class MoeHostPart : uint8_t { kNone, kRouter, kDispatch, kBackward };
  MoeHostPart moe_host = MoeHostPart::kNone;
  double moe_host_share = 0;
  // The host waits for the device to finish this op (and every op before
  // it) before it launches the next: the dropless MoE dispatcher's copy of
  // the token counts to the host (a device-to-host synchronisation).
  bool host_sync = false;
};

struct LayerOps {
  std::vector<Op> forward;    // one layer, forward
  std::vector<Op> backward;   // one layer, backward (excluding recompute)
  std::vector<Op> recompute;  // what backward re-runs first under the plan's recompute mode
};

// Builders shared by the op lists (layer_ops.cc, moe_ops.cc).
Op MemoryOp(const char* name, double bytes, double imbalance = 1.0);
// dtrun's zeroing of a rank's gradient buffer once per step
// (ParamStore::ZeroGrads): a write over its bytes.
Op GradZeroingOp(double gradient_bytes);
// Bytes of one activation message between pipeline stages (per rank):
// b x s/cp x h; with tp > 1 each TP rank sends 1/tp of it (sequence
// parallel shards, or Megatron's scatter/gather optimisation).
double ActivationMessageBytes(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);
Op CollectiveOp(const char* name, CollKind c, GroupKind g, int size, double bytes);
// A memory-bound FP8 scaling kernel of Transformer Engine (Op::fp8_scaling).
Op Fp8ScalingOp(const char* name, double bytes, double imbalance = 1.0);
// FP8 plans (docs/fp8.md): bytes the once-per-step cast of one linear
// weight moves: read it (e bytes), write its FP8 copy and transpose (2);
// with --fp8-param-gather only the transpose (the weight is FP8 already,
// its scale set by the optimizer). Tensorwise (current) scaling reads the
// bf16 weight once more for its amax.
double Fp8WeightCastBytes(const PlanSpec& p, int bytes_per_element);
// Appends Transformer Engine's quantization of a GEMM operand of
// `elements` values (e bytes each) to FP8: the fused cast-transpose (read
// e, write the FP8 copy and its transpose: e + 2 bytes per element), after,
// under tensorwise scaling, an amax pass over the input (e bytes per
// element, TE docs: "two tensor reads per quantization") and, for an input
// that sequence parallelism gathers over `tp_gather` > 1 ranks, the
// all-reduce of that amax (one fp32) over the TP group. Nothing unless fp8.
void AppendFp8Quantize(const PlanSpec& p, bool fp8, double e, const char* name, double elements, double imbalance,
                       int tp_gather, std::vector<Op>* ops);

// Ops of one transformer layer for one microbatch (an MoE layer's MLP block
// is planner/cost/moe_ops.h's). `windowed`: a sliding-window layer of a
// model with one (ModelSpec::WindowedLayer); it changes only the fused
// attention core's work (WindowTileFraction), so a plan's chunk costs add
// the difference per windowed layer.
// `kernels`: whose kernels run the unfused attention core (attention_kernels.h);
// kMegatron prices Megatron's PyTorch softmax fallback (TorchSoftmax in
// layer_ops.cc) where UsesMegatronTorchSoftmax says it runs.
LayerOps TransformerLayerOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, bool windowed = false,
                             AttentionKernels kernels = AttentionKernels::kRuntime);
// Whether Megatron's fused causal softmax kernel (ScaledUpperTriangMasked-
// Softmax, megatron/core/fusions/fused_softmax.py is_kernel_available)
// takes scores of micro_batch x local_heads x sq x sk: 16 < sk <= 4096
// (2048 before 2023: no case of ours lies between), sq and sk multiples of
// 4, and micro_batch x local_heads a multiple of 4 and of the kernel's rows
// per thread block (4 for sk > 128). Half-precision inputs only.
bool MegatronFusedSoftmaxTakes(int64_t micro_batch, int64_t local_heads, int64_t sq, int64_t sk);
// Whether plan p's unfused attention core runs Megatron's PyTorch softmax
// fallback under `kernels`: GPU (kMegatron), unfused core, half-precision
// scores, no CP, and a shape MegatronFusedSoftmaxTakes refuses.
bool UsesMegatronTorchSoftmax(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                              AttentionKernels kernels);

// Sliding-window attention as fused kernels run it (FlashAttention-2/3,
// cuDNN): query tiles of kAttentionTile rows visit only the key tiles
// their window meets, where a causal kernel visits every tile up to the
// diagonal. The fraction of the causal kernel's tiles a window of `window`
// keys visits at `seq` tokens (1 when seq <= window). The tile is 128 rows
// and 128 keys (FlashAttention-2's forward blocks for head dims up to 128;
// an assumption for other kernels). Seq 4096, window 128: 63 of 528 tiles.
constexpr int64_t kAttentionTile = 128;
double WindowTileFraction(int64_t seq, int64_t window);
// The same for chunked attention (Llama 4): query tile i visits the key
// tiles from the start of its aligned chunk of `chunk` tokens up to the
// diagonal. Seq 16384, chunk 8192: 4160 of the causal kernel's 8256 tiles.
double ChunkTileFraction(int64_t seq, int64_t chunk);
// Ops of the embedding lookup (first chunk) and of final norm + LM head +
// cross-entropy (last chunk), vocabulary-parallel over TP.
LayerOps EmbeddingOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);
LayerOps HeadOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);
// Ops of the multi-token-prediction modules (ModelSpec::mtp_layers; empty
// without them), run by the last chunk after the main head, per module: the
// next tokens' embedding lookup (shared table), enorm + hnorm, eh_proj
// (column-parallel 2h -> h, its output gathered over TP), one transformer
// layer, final norm + the shared LM head + cross-entropy. `recompute` holds
// the modules' layer recompute under the plan's recompute mode.
LayerOps MtpOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);
// The same from the embedding, layer and head op lists the caller already
// built for (m, p, bytes_per_element) (ComputePlanCosts, on the search path).
LayerOps MtpOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, const LayerOps& embedding,
                const LayerOps& layer, const LayerOps& head);

double SumFlops(const std::vector<Op>& ops);

}  // namespace dt
