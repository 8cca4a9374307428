#include "planner/frameworks/megatron_args.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "planner/frameworks/framework.h"

namespace dt {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }
std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

bool AllEqual(const std::vector<int>& v) {
  return std::all_of(v.begin(), v.end(), [&](int x) { return x == v.front(); });
}

// "E" + t per layer (+ "L") per model chunk, chunks in Megatron's virtual
// stage order (which is ours: chunk c on pipeline rank c % pp).
std::string LayoutString(const ModelSpec& m, const PlanSpec& p) {
  std::string s;
  const int n = p.num_chunks();
  for (int c = 0; c < n; ++c) {
    if (c > 0) s += '|';
    if (c == 0) s += 'E';
    s += std::string(p.layers_per_chunk[c], 't');
    if (c == n - 1) s += std::string(m.mtp_layers, 'm') + 'L';  // MTP modules before the loss
  }
  return s;
}

}  // namespace

int64_t MegatronPaddedVocab(int64_t vocab, int64_t divisible_by, int tp) {
  const int64_t multiple = std::max<int64_t>(1, divisible_by * tp);
  return (vocab + multiple - 1) / multiple * multiple;
}

StatusOr<std::vector<CliFlag>> MegatronArgs(const ModelSpec& m, const PlanSpec& p, bool bf16,
                                            std::vector<std::string>* notes) {
  DT_RETURN_IF_ERROR(CheckExpressible(Framework::kMegatron, m, p));
  std::vector<CliFlag> f;
  auto add = [&](const std::string& name, const std::string& value = "") { f.push_back({name, value}); };
  // Model shape.
  add("--num-layers", Str(m.num_layers));
  add("--hidden-size", Str(m.hidden));
  add("--num-attention-heads", Str(m.heads));
  if (m.kv_heads != m.heads) {
    add("--group-query-attention");
    add("--num-query-groups", Str(m.kv_heads));
  }
  if (m.mla()) {
    add("--multi-latent-attention");
    if (m.q_lora_rank > 0) add("--q-lora-rank", Str(m.q_lora_rank));
    add("--kv-lora-rank", Str(m.kv_lora_rank));
    add("--qk-head-dim", Str(m.qk_nope_head_dim));
    add("--qk-pos-emb-head-dim", Str(m.qk_rope_head_dim));
    add("--v-head-dim", Str(m.v_head_dim));
  } else if (m.head_dim_set > 0) {
    add("--kv-channels", Str(m.head_dim_set));
  }
  add("--ffn-hidden-size", Str(m.ffn_hidden));
  add("--seq-length", Str(p.seq_length));
  add("--max-position-embeddings", Str(std::max(m.max_position, p.seq_length)));
  // Megatron pads --vocab-size to a multiple of 128 x tp by default; padding
  // by tp alone (which vocab-parallel embeddings need) keeps it as priced.
  add("--vocab-size", Str(m.vocab));
  if (MegatronPaddedVocab(m.vocab, 128, p.tp) != m.vocab) add("--make-vocab-size-divisible-by", "1");
  if (notes && m.vocab % p.tp != 0)
    notes->push_back("Megatron-LM pads the vocabulary to " + Str(MegatronPaddedVocab(m.vocab, 1, p.tp)) +
                     " (a multiple of tp); dtplan priced " + Str(m.vocab));
  add("--normalization", m.layer_norm() ? "LayerNorm" : "RMSNorm");
  if (m.gated_mlp()) add("--swiglu");
  add("--position-embedding-type", m.learned_positions() ? "learned_absolute" : "rope");
  if (!m.learned_positions()) add("--rotary-base", Num(m.rope_theta));
  if (m.rope_scaled) add("--use-rope-scaling");
  if (!m.learned_positions() && m.rotary_fraction != 1.0) add("--rotary-percent", Num(m.rotary_fraction));
  add("--norm-epsilon", Num(m.rms_norm_eps));
  if (!m.linear_bias()) add("--disable-bias-linear");
  if (m.qkv_bias) add("--add-qkv-bias");
  if (m.qk_norm) add("--qk-layernorm");
  if (m.moe()) {  // names checked against tests/planner/framework_names/megatron_core_v0.14.0_flags.txt
    add("--num-experts", Str(m.num_experts));
    add("--moe-router-topk", Str(m.moe_top_k));
    add("--moe-ffn-hidden-size", Str(m.moe_ffn_hidden));
    if (m.shared_ffn_hidden > 0) add("--moe-shared-expert-intermediate-size", Str(m.shared_ffn_hidden));
    if (m.moe_layer_step > 1) {  // dense layers between MoE layers (Llama 4 Maverick): the per-layer list
      std::string list;
      for (int i = 0; i < m.num_layers; ++i) list += std::string(i ? "," : "[") + (m.DenseLayer(i) ? "0" : "1");
      add("--moe-layer-freq", list + "]");
    } else if (m.first_dense_layers > 0) {  // dense leading layers (DeepSeek), Megatron's pattern spelling
      add("--moe-layer-freq", "([0]*" + Str(m.first_dense_layers) + "+[1]*" + Str(m.moe_layers()) + ")");
    }
    if (p.moe_dispatcher == MoeDispatcher::kDeduplicated) {  // DeepEP, as priced (comm_cost.h)
      add("--moe-token-dispatcher-type", "flex");
      add("--moe-enable-deepep");
    } else {
      add("--moe-token-dispatcher-type", "alltoall");  // the dispatcher priced (moe_ops.h)
    }
    add("--moe-grouped-gemm");  // Transformer Engine's grouped linear: one GEMM per expert, as priced
    if (p.moe_a2a_overlap) add("--overlap-moe-expert-parallel-comm");  // combined 1F1B, as priced
    if (p.moe_shared_expert_overlap) add("--moe-shared-expert-overlap");   // as priced
    if (p.delay_wgrad_compute) add("--delay-wgrad-compute");              // as priced
    if (p.overlap_dispatch_backward_wgrad) add("--overlap-dispatch-backward-with-experts-wgrad");  // as priced
    if (p.moe_capacity_factor > 0) {  // token dropping, as priced (ExpertLoadImbalance, moe_ops.h)
      std::ostringstream cf;
      cf << p.moe_capacity_factor;
      add("--moe-expert-capacity-factor", cf.str());
      if (p.moe_pad_to_capacity) add("--moe-pad-expert-input-to-capacity");
    }
  }
  if (m.mtp_layers > 0) add("--mtp-num-layers", Str(m.mtp_layers));  // on the last stage, as priced
  if (!m.tied_embeddings) add("--untie-embeddings-and-output-weights");
  if (!(m.uses_dropout() && p.dropout)) {  // Megatron's defaults are 0.1
    add("--attention-dropout", "0.0");
    add("--hidden-dropout", "0.0");
  }
  // auto (Megatron's default): Transformer Engine picks FlashAttention or
  // cuDNN fused attention, both priced as fused attention (no s x s scores);
  // a plan priced with the cuDNN curve (--attention-kernel cudnn) names that
  // kernel: fused, Transformer Engine's FusedAttention.
  add("--attention-backend", !p.flash_attention ? "unfused" : p.cudnn_attention ? "fused" : "auto");
  // Parallelism.
  add("--tensor-model-parallel-size", Str(p.tp));
  add("--pipeline-model-parallel-size", Str(p.pp));
  add("--context-parallel-size", Str(p.cp));
  if (m.moe()) {
    add("--expert-model-parallel-size", Str(p.ep));
    add("--expert-tensor-parallel-size", Str(p.expert_tp()));
  }
  if (p.pp > 1 && !AllEqual(p.layers_per_chunk)) {
    add("--pipeline-model-parallel-layout", LayoutString(m, p));
  } else if (p.vpp > 1) {
    add("--num-layers-per-virtual-pipeline-stage", Str(p.layers_per_chunk[0]));
  }
  if (p.sequence_parallel) add("--sequence-parallel");
  if (p.tp_comm_overlap) add("--tp-comm-overlap");  // TE userbuffers with its default methods, as priced
  if (p.moe_router_cuda_graph) {  // the router's host time not priced (compute.moe_host)
    add("--cuda-graph-impl", "transformer_engine");
    f.push_back({"--cuda-graph-scope", "moe_router moe_preprocess", /*words=*/true});
  }
  if (p.cross_entropy_fusion) add("--cross-entropy-loss-fusion");  // the fused loss priced (Megatron's default: off)
  add("--micro-batch-size", Str(p.micro_batch));
  add("--global-batch-size", Str(p.global_batch()));
  switch (p.recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective:
      add("--recompute-granularity", "selective");
      if (p.recompute_modules != kDefaultRecomputeModules) {  // absent: Megatron's default, core_attn
        f.push_back({"--recompute-modules", RecomputeModulesString(p.recompute_modules, " "), /*words=*/true});
        // Megatron-LM refuses moe_act without the grouped GEMM (added above for MoE models).
      }
      break;
    case Recompute::kFull:
      add("--recompute-granularity", "full");
      if (p.recompute_num_layers > 0) {  // the first N layers of each chunk
        add("--recompute-method", "block");
        add("--recompute-num-layers", std::to_string(p.recompute_num_layers));
      } else {
        add("--recompute-method", "uniform");
        add("--recompute-num-layers", "1");
      }
      break;
  }
  switch (p.zero_stage) {
    case 0: break;
    case 1: add("--use-distributed-optimizer"); break;
    default:
      add("--use-megatron-fsdp");
      add("--data-parallel-sharding-strategy", p.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
      add("--ckpt-format", "fsdp_dtensor");  // required by Megatron-FSDP
      break;
  }
  if (p.dp * p.cp > 1 && p.overlap_grad_reduce) add("--overlap-grad-reduce");  // the bucketed overlap dtplan prices
  // Interleaved sends overlap compute by default in Megatron-LM (since 2024);
  // a plan priced with blocking sends says so (PlanSpec::overlap_p2p_comm).
  if (p.schedule == Schedule::kInterleaved && !p.overlap_p2p_comm) add("--no-overlap-p2p-communication");
  if (p.adam_moment_bytes == 2) {  // bf16 Adam moments (TE FusedAdam; needs the distributed optimizer)
    add("--use-precision-aware-optimizer");
    add("--exp-avg-dtype", "bf16");
    add("--exp-avg-sq-dtype", "bf16");
  }
  if (bf16) add("--bf16");
  if (p.precision == Precision::kFp8) {  // Transformer Engine FP8 GEMMs, per-tensor scaling (docs/fp8.md)
    add("--fp8-format", "hybrid");
    add("--fp8-recipe", ToString(p.fp8_recipe));
    if (p.fp8_param_gather) add("--fp8-param-gather");  // FP8 weights, all-gathered in FP8
  }
  return f;
}

std::string FormatFlags(const std::vector<CliFlag>& flags) {
  std::string s;
  for (size_t i = 0; i < flags.size(); ++i) {
    s += "    " + flags[i].name;
    if (!flags[i].value.empty()) {
      const bool quote = !flags[i].words && flags[i].value.find_first_of("|*() ") != std::string::npos;
      s += " " + (quote ? "\"" + flags[i].value + "\"" : flags[i].value);
    }
    s += i + 1 < flags.size() ? " \\\n" : "\n";
  }
  return s;
}

StatusOr<std::vector<std::string>> SplitCommandLine(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      if (i + 1 < text.size() && text[i + 1] == '\n') { ++i; continue; }  // continuation
      if (i + 1 < text.size()) { cur += text[++i]; in_word = true; }
      continue;
    }
    if (c == '\'' || c == '"') {
      const size_t end = text.find(c, i + 1);
      if (end == std::string::npos)
        return InvalidArgument(std::string("unterminated ") + c + " quote in the command line");
      cur += text.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
      continue;
    }
    if (c == '#' && !in_word) {  // comment to end of line
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(cur), cur.clear(), in_word = false;
      continue;
    }
    cur += c;
    in_word = true;
  }
  if (in_word) words.push_back(cur);
  return words;
}

}  // namespace dt
