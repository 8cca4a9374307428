// PlanSpec: one way to split a model over a cluster (DP x TP x PP x CP,
// and for mixture-of-experts models EP: experts sharded over ep consecutive
// DP replicas, see rank_grid.h),
// plus the microbatching, schedule, recompute, sequence-parallel and ZeRO
// choices. ClusterSpec: how many nodes and devices per node.
//
// Layer split: a pipeline of pp ranks, each holding vpp model chunks
// ("virtual stages"). Model chunk c (0 .. pp*vpp-1, in layer order) lives on
// pipeline rank c % pp as its local chunk c / pp (Megatron's interleaving).
// layers_per_chunk[c] is the layer count of model chunk c; the embedding is
// on chunk 0, the final norm + LM head + loss on the last chunk.
//
// Pure data; Validate() returns an InvalidArgument naming the field and fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "planner/spec/model_spec.h"

namespace dt {

enum class Schedule { kGpipe, k1F1B, kInterleaved };
enum class Recompute { kNone, kSelective, kFull };
// Training precision of a plan. kProfile: the hardware profile's dtype
// (bf16 mixed precision on the GPU profiles, fp32 on the CPU ones). kFp32 /
// kBf16: fp32, or bf16 mixed precision (bf16 weights, activations and
// gradients, fp32 master weights and Adam states; dtrun executes it on CPU,
// docs/runtime.md). kFp8: bf16 mixed precision with the transformer layers'
// linear GEMMs in FP8, Transformer Engine style (E4M3 forward, E5M2
// gradients, per-tensor delayed scaling, fp32 accumulation; attention core,
// norms, embedding and LM head stay bf16; docs/fp8.md).
enum class Precision { kProfile, kFp32, kBf16, kFp8 };
const char* ToString(Schedule s);
const char* ToString(Recompute r);
const char* ToString(Precision p);
StatusOr<Precision> ParsePrecision(const std::string& s);  // fp32 | bf16 | fp8

// MoE token dispatcher (never searched; a software choice like precision).
// kAllToAll: Megatron-LM's alltoall dispatcher and dtrun's AllToAllV: every
// routed copy of a token is sent, top_k per token. kDeduplicated: DeepEP or
// HybridEP (Megatron-LM's flex dispatcher): a token is sent once to each
// rank that holds one of its experts and, across nodes, once to each node,
// which forwards it over NVLink. Priced in planner/cost/comm_cost.h.
enum class MoeDispatcher { kAllToAll, kDeduplicated };
const char* ToString(MoeDispatcher d);
StatusOr<MoeDispatcher> ParseMoeDispatcher(const std::string& s);  // alltoall | deduplicated
// "default" -> false, "cudnn" -> true (PlanSpec::cudnn_attention).
StatusOr<bool> ParseAttentionKernel(const std::string& s);

// How an FP8 plan scales its tensors into FP8 (Transformer Engine recipes,
// Megatron-LM's --fp8-recipe; never searched, like precision). Both use one
// fp32 scale per tensor and cost the same FP8 GEMMs; they differ in the
// quantization passes (TE docs, features/low_precision_training):
// kDelayed: the scale comes from an amax history, so a cast reads its bf16
// input once (the amax is taken in the same pass). kTensorwise ("current
// scaling"): the amax of the tensor itself, so every quantization reads its
// input twice (an amax pass, then the cast), and an input that sequence
// parallelism gathers needs its amax all-reduced over the TP group first.
// Not modeled, refused by ParseFp8Recipe: mxfp8 (Blackwell block scaling),
// blockwise (1x128 / 128x128 block scales), custom.
enum class Fp8Recipe { kDelayed, kTensorwise };
const char* ToString(Fp8Recipe r);
StatusOr<Fp8Recipe> ParseFp8Recipe(const std::string& s);  // delayed | tensorwise
StatusOr<Schedule> ParseSchedule(const std::string& s);    // gpipe | 1f1b | interleaved
StatusOr<Recompute> ParseRecompute(const std::string& s);  // none | selective | full

// Megatron-LM's recompute_modules (--recompute-granularity selective
// --recompute-modules ...): which submodules of every layer selective
// recompute checkpoints. A bit set in PlanSpec::recompute_modules; only
// meaningful with Recompute::kSelective. What each drops and re-runs:
// docs/memory.md "Selective recompute of chosen modules".
//  kCoreAttn: the attention core (Megatron's default; Korthikanti et al.).
//  kLayernorm: the outputs of the norms that are modules of their own in
//    Megatron's Transformer Engine layer (MLA's input_layernorm, an MoE
//    layer's pre_mlp_layernorm; the other norms are fused into the next
//    linear layer and unaffected), discarded after use.
//  kMoeAct: the routed experts' activation output (the expert fc2 input).
//  kMlp: the dense MLP block (dense layers, incl. DeepSeek's leading ones).
//  kMoe: the whole MoE block, dispatch and combine included.
//  kSharedExperts: the shared experts of an MoE block.
//  kMlaUpProj: MLA's up projections and RoPE (the attention's Q, K, V).
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeLayernorm = 1u << 1,
  kRecomputeMoeAct = 1u << 2,
  kRecomputeMlp = 1u << 3,
  kRecomputeMoe = 1u << 4,
  kRecomputeSharedExperts = 1u << 5,
  kRecomputeMlaUpProj = 1u << 6,
};
constexpr uint32_t kDefaultRecomputeModules = kRecomputeCoreAttn;  // Megatron-LM's default
// Megatron's names, in the order above: "core_attn,layernorm,...".
std::string RecomputeModulesString(uint32_t modules, const char* separator = ",");
std::vector<std::string> RecomputeModuleNames(uint32_t modules);
// Megatron's module names (any order, duplicates allowed) -> bits;
// InvalidArgument naming an unknown or unmodeled module and the choices.
StatusOr<uint32_t> ParseRecomputeModules(const std::vector<std::string>& names);
// The same from a JSON field (plan files, validation cases): an array of
// names; errors name the field 'recompute_modules'.
StatusOr<uint32_t> RecomputeModulesFromJson(const json& v);
// "a,b,c" (the dtplan flag's spelling) -> bits.
StatusOr<uint32_t> ParseRecomputeModuleList(const std::string& comma_separated);

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 8;
  std::string device = "gpu";  // "gpu" or "cpu" (CPU ranks for the bundled runtime)
  int world() const { return nodes * gpus_per_node; }
};

struct PlanSpec {
  int dp = 1, tp = 1, pp = 1, cp = 1;
  // Expert parallelism (MoE only): splits the experts of every layer ep
  // ways; not a factor of world(). With expert tensor parallelism equal to
  // tp (Megatron's default), an EP group is ep DP replicas (same tp, cp, pp
  // coordinates, dp coordinates d with the same d / ep; rank_grid.h).
  int ep = 1;
  // Expert tensor parallelism (MoE only; Megatron-LM's
  // --expert-tensor-parallel-size): each expert's FFN is split etp ways.
  // 0 means tp (the default). etp < tp "folds" the expert layer onto the
  // TP x CP x DP ranks of a pipeline stage independently of the dense layers
  // (Megatron's MoE parallel folding, expert grid "etp-ep-edp"): an EP group
  // is then ep ranks at stride etp, and ep * etp divides tp * cp * dp.
  int etp = 0;
  int vpp = 1;                 // model chunks per pipeline rank (interleaved only)
  int micro_batch = 1;         // sequences per microbatch
  int num_microbatches = 1;    // per DP replica per step
  int seq_length = 0;          // tokens per sequence
  Schedule schedule = Schedule::k1F1B;
  Recompute recompute = Recompute::kNone;
  // Selective recompute only: the RecomputeModule bits checkpointed
  // (Megatron-LM's --recompute-modules; never searched, a user choice like
  // the dispatcher). The default, the attention core, is selective recompute
  // as it was before modules existed; other values need recompute kSelective.
  uint32_t recompute_modules = kDefaultRecomputeModules;
  // Full recompute only: 0 = every layer; N > 0 = only the first N layers of
  // every model chunk (Megatron-LM's --recompute-method block
  // --recompute-num-layers N), the others keep their activations. Never
  // searched, a user choice like the modules.
  int recompute_num_layers = 0;
  bool sequence_parallel = false;
  // Fused (FlashAttention-style) attention core: no s x s score matrix is
  // stored or streamed. false = the unfused softmax(QK^T)V of Megatron-LM
  // before 2022 (and of the bundled CPU runtime).
  bool flash_attention = true;
  // The LM loss is one fused kernel pass over the logits (Megatron-LM's
  // --cross-entropy-loss-fusion, on by default in NeMo 2 and
  // Megatron-Bridge; and dtrun's loss). false = Megatron-LM's default
  // vocab-parallel cross-entropy as PyTorch ops: the logits cast to fp32,
  // then max, subtract, exp, sum and divide, each a pass over
  // tokens x vocab / tp (Megatron before 2024, Megatron-DeepSpeed, NeMo 1).
  // Never searched; dtrun executes only the fused form.
  bool cross_entropy_fusion = true;
  // GPT dropout (attention, residual, embedding): its 1-byte masks and the
  // dropped-out attention probabilities are stored for backward (the CPU
  // runtime does so too, runtime/ops/dropout.h); Llama never uses it.
  bool dropout = true;
  int zero_stage = 0;          // 0..3; 1 = distributed optimizer
  Precision precision = Precision::kProfile;  // a software choice, never searched
  // MoE: the router spreads tokens evenly over the experts (Megatron-LM's
  // --moe-router-force-load-balancing, a benchmarking setting): expert work
  // is priced at the balanced share instead of the load-imbalance allowance
  // of planner/cost/moe_ops.h. Never searched; false for real training.
  bool force_balanced_routing = false;
  // MoE: Megatron-LM's --moe-expert-capacity-factor (0: none, dropless, the
  // default): each expert takes at most moe_capacity_factor x its balanced
  // share of the routed token copies (T*k/E from each source rank); copies
  // beyond it are dropped. With moe_pad_to_capacity
  // (--moe-pad-expert-input-to-capacity) every expert's input is padded up
  // to that bound, so each rank computes and exchanges exactly capacity x
  // the balanced rows. Priced by ExpertLoadImbalance (planner/cost/
  // moe_ops.h). Never searched; the all-to-all dispatcher only.
  double moe_capacity_factor = 0;
  bool moe_pad_to_capacity = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;  // MoE only; see the enum
  // FP8 plans with the distributed optimizer (zero_stage 1) only:
  // Megatron-LM's --fp8-param-gather (Transformer Engine's fp8_model_init).
  // The linear weights live in FP8 (1 byte, plus TE's cached FP8 transpose
  // on Hopper) instead of bf16 plus the FP8 copy and transpose; the
  // optimizer keeps its fp32 master shard and quantizes it after the step;
  // the ZeRO-1 parameter all-gather moves those weights in FP8. Costed in
  // stage_memory.cc, plan_costs.cc and layer_ops.cc (docs/fp8.md).
  bool fp8_param_gather = false;
  // FP8 plans only (precision fp8): the scaling recipe (see the enum).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  // MoE with ep > 1: Megatron-LM's --overlap-moe-expert-parallel-comm
  // ("combined 1F1B"): in the 1F1B steady state a forward and an independent
  // backward run layer by layer together, each one's EP dispatch / combine
  // all-to-alls hidden behind the other's attention / expert compute; one
  // more warmup forward makes the pair independent (schedule
  // build_schedule.h). Needs pp 1 or the interleaved schedule and no full
  // recompute (Megatron-LM's rules). Never searched, like the dispatcher.
  bool moe_a2a_overlap = false;
  // MoE: Megatron-LM's --moe-shared-expert-overlap. The shared experts run
  // on a stream of their own beside the routed path: their input gather,
  // fc1 and activation beside the dispatch and the routed experts, their
  // fc2 and reduce-scatter beside the combine all-to-all, and the same two
  // parts of their backward beside the combine's and the dispatch's
  // (planner/cost/moe_ops.cc orders the ops in overlap windows,
  // planner/lower/plan_costs.cc prices them). No effect on a model without
  // shared experts (as in Megatron-LM); not with moe_a2a_overlap (Megatron-LM
  // refuses the pair). Never searched; dtrun does not execute it.
  bool moe_shared_expert_overlap = false;
  // With moe_a2a_overlap: Megatron-LM's --delay-wgrad-compute. In a paired
  // layer the backward's expert weight gradients run after its data
  // gradients, beside the two dispatch all-to-alls, so the backward's
  // dispatch starts before them (planner/lower/plan_costs.cc,
  // EpOverlapOfLayer). Needs moe_a2a_overlap (Megatron-LM's rule). Never
  // searched; dtrun does not execute it (nor the overlap it belongs to).
  bool delay_wgrad_compute = false;
  // MoE: Megatron-LM's --overlap-dispatch-backward-with-experts-wgrad
  // (Megatron-Core 2026, Transformer Engine >= 2.3): the routed experts'
  // weight gradients run on a stream of their own after their data
  // gradients, beside the expert-TP reduce-scatter and the dispatch's
  // backward all-to-all (planner/cost/moe_ops.cc, an overlap window). Not
  // with moe_a2a_overlap (Megatron-LM's rule; delay_wgrad_compute is that
  // overlap's counterpart). Never searched; dtrun does not execute it.
  bool overlap_dispatch_backward_wgrad = false;
  // Megatron-LM's --tp-comm-overlap (Transformer Engine userbuffers): the
  // sequence-parallel all-gathers and reduce-scatters of the linear layers
  // run in chunks under the GEMM next to them, with TE's default methods
  // (ring exchange, pipelined reduce-scatter on 16 SMs, bulk overlap in the
  // backward; planner/lower/tp_overlap.h prices them). Needs tp > 1 and
  // sequence_parallel. Never searched; dtrun does not execute it.
  bool tp_comm_overlap = false;
  // The MoE router and the dispatcher's preprocessing run as CUDA graphs
  // (Megatron-LM's --cuda-graph-impl transformer_engine with
  // --cuda-graph-scope moe_router moe_preprocess): the host replays them
  // instead of launching their kernels one by one, so the eager MoE block's
  // host time before its synchronisation (HardwareProfile
  // compute.moe_host.router_s) is not spent. Needs an MoE model. Never
  // searched; dtrun does not execute it.
  bool moe_router_cuda_graph = false;
  // The attention kernel's speed is priced with the profile's cuDNN fused-
  // attention curve (compute.attention_efficiency_by_keys_cudnn) instead of
  // its default attention rate: Transformer Engine runs cuDNN's kernel on
  // Hopper, and how fast that kernel is depends on the cuDNN release
  // (docs/validation.md "Long context"). Needs the fused core
  // (flash_attention). JSON "attention_kernel": "cudnn" (absent: default).
  // Never searched, a statement about the user's software; dtrun does not
  // execute it (its own attention kernels).
  bool cudnn_attention = false;
  // The data-parallel gradient reduction starts during each chunk's last
  // backward, in buckets (Megatron-LM --overlap-grad-reduce, PyTorch DDP and
  // FSDP, DeepSpeed overlap_comm): true, the default. false: it starts after
  // the stage's whole backward, as Megatron-LM runs without the flag (its
  // default) - the schedule (build_schedule.h) puts every kGradSync after
  // the last backward, so dtrun and the simulator both run it that way.
  bool overlap_grad_reduce = true;
  // Pipeline sends of interleaved plans overlap the next chunk's compute:
  // true, the default (Megatron-LM's default since 2024, its
  // --no-overlap-p2p-communication turning it off; NeMo's launcher configs
  // and Megatron-Bridge set overlap_p2p_comm for interleaved plans). false:
  // every send blocks its stage's compute stream until it is done, as in
  // Megatron-LM with that flag or before the option existed (2021:
  // p2p_communication waited on every request). Framework schedules without
  // interleaving always block (Megatron-LM turns the overlap off for them;
  // DeepSpeed's pipeline engine), whatever this says; dtrun never blocks
  // (MPI_Isend). Only GPU plans read it (planner/lower/plan_costs.cc
  // BlockingSends). Never searched.
  bool overlap_p2p_comm = true;
  // Bytes per stored and reduced gradient element; 0: the profile's dtype
  // (2 for bf16, 4 for fp32). 4 on a bf16 profile: fp32 main gradients, as
  // Megatron-LM keeps them by default (planner/frameworks, docs/frameworks.md).
  int grad_bytes = 0;
  // Bytes per Adam moment (m and v) element; 0: 4 (fp32, the default of
  // Megatron-LM, DeepSpeed and torch). 2: bf16 moments, Megatron-LM's
  // --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype
  // bf16 (Transformer Engine's FusedAdam; the master weights stay fp32).
  // A software choice, never searched; memory and the optimizer step's
  // bytes (planner/lower/memory_params_for.h, plan_costs.cc).
  int adam_moment_bytes = 0;
  int64_t dp_bucket_bytes = 40LL << 20;  // DP gradient bucket (Megatron default 40M elems ~)
  std::vector<int> layers_per_chunk;  // size pp*vpp; see header comment
  std::string order = "tp-cp-dp-pp";  // rank grid, innermost first

  int world() const { return dp * tp * pp * cp; }
  // Expert tensor parallelism in effect: etp, or tp when etp is 0.
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // True when the expert layer is laid out on its own grid (etp < tp).
  bool expert_folded() const { return expert_tp() != tp; }
  // Replicas of one expert shard: the expert-data-parallel group,
  // tp*dp*cp / (ep*etp) (dp*cp/ep when etp == tp).
  int expert_dp() const { return tp * dp * cp / (ep * expert_tp()); }
  int num_chunks() const { return pp * vpp; }
  // True when selective recompute checkpoints module `mod` in this plan.
  bool Recomputes(RecomputeModule mod) const {
    return recompute == Recompute::kSelective && (recompute_modules & mod) != 0;
  }
  // Layers of model chunk `chunk` (layers_per_chunk[chunk]) whose forward is
  // recomputed: all of them under full recompute (or only the first
  // recompute_num_layers), none otherwise.
  int RecomputedLayers(int chunk) const;
  int64_t global_batch() const { return static_cast<int64_t>(dp) * micro_batch * num_microbatches; }
  int64_t tokens_per_step() const { return global_batch() * seq_length; }
  // Layers held by pipeline rank `stage` (sum over its vpp chunks).
  int StageLayers(int stage) const;
  // First layer index of model chunk c.
  int ChunkFirstLayer(int chunk) const;
};

// Balanced split of L layers into n chunks; the first L % n chunks get one
// more layer (so the last chunk, which also holds the LM head, is lighter).
std::vector<int> EvenSplit(int layers, int chunks);

// The split that counts the embedding as one layer of the first chunk and
// the LM head + loss, and each multi-token-prediction module, as one layer
// of the last (Megatron-LM's --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split; Megatron-Bridge's DeepSeek-V3
// layout "Et|(tt|)*30mL" is this split of 61 + 1 + 2 units over 32
// chunks): EvenSplit of the units, less those from the two end chunks. Empty
// when it equals EvenSplit or leaves the first chunk (or, without MTP, the
// last) with no decoder layer. The search tries it beside the even split.
std::vector<int> AccountedSplit(const ModelSpec& m, int chunks);
// True when layers_per_chunk is not the EvenSplit of its layers; Describe
// then shows the split, runs compacted ("layers=1,2*30,0").
bool UnevenSplit(const PlanSpec& p);

// Checks internal consistency and against the model (heads % tp, layer sum).
Status Validate(const PlanSpec& p, const ModelSpec& m, const std::string& where);

// The recompute_modules part of Validate (no `where` prefix): Ok for the
// default; else needs recompute selective and modules the model has.
Status CheckRecomputeModules(const PlanSpec& p, const ModelSpec& m);

// The expert-capacity part of Validate (no `where` prefix): Ok without a
// capacity; else a finite factor >= 0 on an MoE model with the all-to-all
// dispatcher, and padding only with a factor.
Status CheckMoeCapacity(const PlanSpec& p, const ModelSpec& m);

json ToJson(const PlanSpec& p);
StatusOr<PlanSpec> PlanFromJson(const json& j, const ModelSpec& m, const std::string& where);
json ToJson(const ClusterSpec& c);
StatusOr<ClusterSpec> ClusterFromJson(const json& j, const std::string& where);

// The top-level fields of a plan file: model, cluster, plan, and the
// informational prediction, profile and dtrun_executes dtplan writes. Any
// other field (a typo such as "clustr") is an error naming it.
Status CheckPlanFileFields(const json& j, const std::string& where);

// A plan file: {"model": ..., "cluster": ..., "plan": ..., "prediction": ...}.
struct PlanFile {
  ModelSpec model;
  ClusterSpec cluster;
  PlanSpec plan;
  json prediction;  // free-form; may be null
};
// A plan file's content, no file access; `path` names the source in errors.
// LoadPlanFile is this on the file's content.
StatusOr<PlanFile> PlanFileFromJsonText(const std::string& text, const std::string& path);
StatusOr<PlanFile> LoadPlanFile(const std::string& path);
json ToJson(const PlanFile& f);

// One-line human summary: "dp=2 tp=4 pp=8 vpp=1 mbs=1 m=64 1f1b rc=full sp zero1"
// (plus " bf16" / " fp32" when the plan sets its precision).
std::string Describe(const PlanSpec& p);

}  // namespace dt
