#include "planner/frameworks/framework.h"

namespace dt {

const char* ToString(Framework f) {
  switch (f) {
    case Framework::kAny: return "any";
    case Framework::kMegatron: return "megatron";
    case Framework::kTorchtitan: return "torchtitan";
    case Framework::kDeepSpeed: return "deepspeed";
  }
  return "?";
}

const char* DisplayName(Framework f) {
  switch (f) {
    case Framework::kAny: return "any framework";
    case Framework::kMegatron: return "Megatron-LM";
    case Framework::kTorchtitan: return "torchtitan";
    case Framework::kDeepSpeed: return "DeepSpeed";
  }
  return "?";
}

StatusOr<Framework> ParseFramework(const std::string& name) {
  for (Framework f : {Framework::kAny, Framework::kMegatron, Framework::kTorchtitan, Framework::kDeepSpeed})
    if (name == ToString(f)) return f;
  if (name.empty()) return Framework::kAny;
  return InvalidArgument("framework '" + name + "' is unknown; use megatron, torchtitan or deepspeed");
}

namespace {

// Layout details of ModelSpec that no framework flag of ours maps. A window
// or chunk no shorter than the plan's sequence masks nothing (every token
// sees every earlier one, as in full causal attention), so it needs no flag.
void LayoutReasons(const ModelSpec& m, const PlanSpec& p, std::vector<std::string>* out) {
  if (m.norms_per_layer != 2)
    out->push_back("no layer with " + std::to_string(m.norms_per_layer) + " norms (" +
                   (m.source_type.empty() ? m.name : m.source_type) + " layout)");
  if (m.position_offset != 0) out->push_back("no extra learned position rows (OPT's offset)");
  if (m.WindowApplies(p.seq_length))
    out->push_back(std::string(m.window_chunked ? "no chunked attention" : "no sliding-window attention") +
                   " in the exported flags (the window, " + std::to_string(m.sliding_window) +
                   " tokens, is shorter than the sequence, " + std::to_string(p.seq_length) + ")");
  if (m.attention_sinks) out->push_back("no attention sinks (learnable softmax offsets) in the exported flags");
  if (m.source_type == "phimoe")
    out->push_back("no Phi-3.5-MoE layout (LayerNorms with biases on q, k, v, o and the LM head but not on the "
                   "experts) in the exported flags");
}

// ModelSpec::FamilyLayout, with a window counted only where it masks
// something at the plan's sequence (LayoutReasons).
bool FamilyLayoutAt(const ModelSpec& m, int seq) {
  if (m.sliding_window <= 0) return m.FamilyLayout();
  if (m.WindowApplies(seq)) return false;
  ModelSpec unwindowed = m;
  unwindowed.sliding_window = 0;
  return unwindowed.FamilyLayout();
}

// Megatron-LM core_v0.14.0 (megatron/training/arguments.py,
// megatron/core/pipeline_parallel/schedules.py).
void MegatronReasons(const ModelSpec& m, const PlanSpec& p, std::vector<std::string>* out) {
  if (p.pp > 1 && p.schedule == Schedule::kGpipe)
    out->push_back("no GPipe schedule (it runs 1F1B, or interleaved 1F1B with virtual stages)");
  LayoutReasons(m, p, out);
  if (m.shared_expert_gate)
    out->push_back("no sigmoid gate on the shared expert (Qwen2-MoE) among its v0.14 flags");
  if (m.moe() && !m.gated_mlp()) out->push_back("no mixture of experts without --swiglu in dtplan's export");
  if (p.adam_moment_bytes == 2 && p.zero_stage != 1)
    out->push_back("no bf16 Adam moments without the distributed optimizer (--use-precision-aware-optimizer needs it)");
}

// torchtitan v0.2.2 (torchtitan/config/job_config.py,
// torchtitan/models/llama3/infra/parallelize.py, distributed/parallel_dims.py).
void TorchtitanReasons(const ModelSpec& m, const PlanSpec& p, std::vector<std::string>* out) {
  if (!p.overlap_grad_reduce && p.dp * p.cp > 1)
    out->push_back("no gradient reduction after the whole backward (FSDP2 and DDP always overlap it)");
  if (p.precision == Precision::kFp8) out->push_back("no FP8 in dtplan's torchtitan export (float8 not mapped)");
  if (m.mtp_layers > 0) out->push_back("no multi-token prediction modules in dtplan's torchtitan export");
  if (p.adam_moment_bytes == 2) out->push_back("no bf16 Adam moments in dtplan's torchtitan export (not mapped)");
  if (m.moe())
    out->push_back("no mixture of experts in dtplan's torchtitan export (its llama3 model is dense)");
  else if (m.family != ModelFamily::kLlama)
    out->push_back("no GPT-2/GPT-3 model (its dense decoder is llama3: RMSNorm, SwiGLU, rotary)");
  else if (!FamilyLayoutAt(m, p.seq_length) || m.qkv_bias)
    out->push_back("no layout beyond Llama 3 (" + (m.source_type.empty() ? m.name : m.source_type) + ")");
  if (p.tp > 1 && !p.sequence_parallel)
    out->push_back("no tensor parallelism without sequence parallelism (its TP always shards norms along the sequence)");
  if (p.zero_stage == 1) out->push_back("no ZeRO-1 (FSDP2 shards parameters and gradients too)");
  if (p.zero_stage == 0 && p.cp > 1)
    out->push_back("no context parallelism without FSDP (cp > 1 always shards over dp x cp: ZeRO-3)");
  if (p.zero_stage == 0 && p.dp > 1 && (p.tp > 1 || p.pp > 1))
    out->push_back("no replicated data parallelism (DDP) combined with TP or PP (its DDP is 1-D only)");
  if (!p.flash_attention) out->push_back("no unfused attention (it runs SDPA or FlexAttention)");
}

// DeepSpeed commit 38327e0 (deepspeed/runtime/pipe/engine.py, pipe/schedule.py,
// runtime/engine.py, runtime/tensor_parallel/config.py).
void DeepSpeedReasons(const ModelSpec& m, const PlanSpec& p, std::vector<std::string>* out) {
  if (p.precision == Precision::kFp8) out->push_back("no FP8 in dtplan's DeepSpeed export (not mapped)");
  if (m.mtp_layers > 0) out->push_back("no multi-token prediction modules in dtplan's DeepSpeed export");
  if (p.adam_moment_bytes == 2) out->push_back("no bf16 Adam moments in dtplan's DeepSpeed export (not mapped)");
  if (m.moe()) out->push_back("no mixture of experts in dtplan's DeepSpeed export (not mapped)");
  if (p.sequence_parallel) out->push_back("no Megatron-style sequence parallelism (AutoTP shards weights only)");
  if (p.cp > 1) out->push_back("no ring context parallelism (DeepSpeed-Ulysses shards heads instead)");
  if (p.pp > 1 && p.schedule != Schedule::k1F1B)
    out->push_back(std::string("no ") + (p.schedule == Schedule::kGpipe ? "GPipe" : "interleaved") +
                   " schedule (its pipeline engine runs one 1F1B TrainSchedule)");
  if (p.pp > 1 && p.zero_stage >= 2) out->push_back("no ZeRO-2/3 with pipeline parallelism");
  if (p.overlap_grad_reduce && p.dp > 1 && !DeepSpeedOverlapsGradReduce(p.zero_stage, p.pp))
    out->push_back(std::string("no gradient reduction overlapped with the backward ") +
                   (p.pp > 1 ? "in its pipeline engine (it reduces after the last microbatch)"
                             : "without ZeRO (its data-parallel all-reduce runs after the backward)") +
                   "; --framework deepspeed prices it after the backward");
  if (p.tp > 1 && p.zero_stage == 3) out->push_back("no ZeRO-3 with AutoTP tensor parallelism");
}

}  // namespace

bool DeepSpeedOverlapsGradReduce(int zero_stage, int pp) { return zero_stage >= 1 && pp == 1; }

std::vector<std::string> Inexpressible(Framework f, const ModelSpec& m, const PlanSpec& p) {
  std::vector<std::string> out;
  switch (f) {
    case Framework::kAny: break;
    case Framework::kMegatron: MegatronReasons(m, p, &out); break;
    case Framework::kTorchtitan: TorchtitanReasons(m, p, &out); break;
    case Framework::kDeepSpeed: DeepSpeedReasons(m, p, &out); break;
  }
  return out;
}

int FrameworkGradBytes(Framework f, bool bf16) {
  if (!bf16) return 0;
  return f == Framework::kMegatron || f == Framework::kTorchtitan ? 4 : 0;
}

Status CheckExpressible(Framework f, const ModelSpec& m, const PlanSpec& p) {
  const std::vector<std::string> why = Inexpressible(f, m, p);
  if (why.empty()) return Status::Ok();
  // A reason that holds for the plainest plan too is the model's: no
  // replanning helps.
  PlanSpec plain;
  plain.seq_length = p.seq_length;
  plain.layers_per_chunk = {m.num_layers};
  const std::vector<std::string> model_why = Inexpressible(f, m, plain);
  if (!model_why.empty() && model_why[0] == why[0])
    return InvalidArgument(std::string(DisplayName(f)) + " cannot run this model: " + why[0] +
                           "; use another framework");
  return InvalidArgument(std::string(DisplayName(f)) + " cannot express this plan: " + why[0] +
                         "; replan with --framework " + ToString(f));
}

}  // namespace dt
