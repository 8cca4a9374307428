#include "planner/spec/plan_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <numeric>
#include <sstream>
#include <utility>

namespace dt {

const char* ToString(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::k1F1B: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
  }
  return "?";
}

const char* ToString(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

const char* ToString(Precision p) {
  switch (p) {
    case Precision::kProfile: return "profile";
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
  }
  return "?";
}

StatusOr<Precision> ParsePrecision(const std::string& s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "bf16") return Precision::kBf16;
  if (s == "fp8") return Precision::kFp8;
  return InvalidArgument("precision '" + s + "' is unknown; use fp32, bf16 or fp8 (or omit it for the profile's dtype)");
}

const char* ToString(MoeDispatcher d) {
  return d == MoeDispatcher::kDeduplicated ? "deduplicated" : "alltoall";
}

StatusOr<bool> ParseAttentionKernel(const std::string& s) {
  if (s == "default") return false;
  if (s == "cudnn") return true;
  return InvalidArgument("attention kernel '" + s + "' is unknown; use default (the profile's attention rate) or "
                         "cudnn (its cuDNN fused-attention curve)");
}

StatusOr<MoeDispatcher> ParseMoeDispatcher(const std::string& s) {
  if (s == "alltoall") return MoeDispatcher::kAllToAll;
  if (s == "deduplicated") return MoeDispatcher::kDeduplicated;
  return InvalidArgument("MoE dispatcher '" + s +
                         "' is unknown; use alltoall (every routed copy sent: Megatron-LM's alltoall "
                         "dispatcher) or deduplicated (DeepEP / HybridEP: once per destination rank and node)");
}

const char* ToString(Fp8Recipe r) { return r == Fp8Recipe::kTensorwise ? "tensorwise" : "delayed"; }

StatusOr<Fp8Recipe> ParseFp8Recipe(const std::string& s) {
  if (s == "delayed") return Fp8Recipe::kDelayed;
  if (s == "tensorwise") return Fp8Recipe::kTensorwise;
  if (s == "mxfp8")
    return InvalidArgument("FP8 recipe 'mxfp8' (MX block scaling) runs on Blackwell Tensor Cores only; no bundled "
                           "profile has them: use delayed or tensorwise on H100");
  if (s == "blockwise" || s == "custom")
    return InvalidArgument("FP8 recipe '" + s + "' is not modeled (its block scales change the GEMM kernels and "
                           "their speed); use delayed or tensorwise (per-tensor scaling)");
  return InvalidArgument("FP8 recipe '" + s + "' is unknown; use delayed (amax history) or tensorwise (current "
                         "scaling), Megatron-LM's --fp8-recipe names");
}

StatusOr<Schedule> ParseSchedule(const std::string& s) {
  if (s == "gpipe") return Schedule::kGpipe;
  if (s == "1f1b") return Schedule::k1F1B;
  if (s == "interleaved" || s == "interleaved-1f1b") return Schedule::kInterleaved;
  return InvalidArgument("schedule '" + s + "' is unknown; use gpipe, 1f1b or interleaved");
}

StatusOr<Recompute> ParseRecompute(const std::string& s) {
  if (s == "none") return Recompute::kNone;
  if (s == "selective") return Recompute::kSelective;
  if (s == "full") return Recompute::kFull;
  return InvalidArgument("recompute '" + s + "' is unknown; use none, selective or full");
}

namespace {
struct ModuleName {
  RecomputeModule bit;
  const char* name;
};
constexpr ModuleName kModuleNames[] = {
    {kRecomputeCoreAttn, "core_attn"}, {kRecomputeLayernorm, "layernorm"},
    {kRecomputeMoeAct, "moe_act"},     {kRecomputeMlp, "mlp"},
    {kRecomputeMoe, "moe"},            {kRecomputeSharedExperts, "shared_experts"},
    {kRecomputeMlaUpProj, "mla_up_proj"},
};
}  // namespace

std::vector<std::string> RecomputeModuleNames(uint32_t modules) {
  std::vector<std::string> names;
  for (const ModuleName& n : kModuleNames)
    if (modules & n.bit) names.push_back(n.name);
  return names;
}

std::string RecomputeModulesString(uint32_t modules, const char* separator) {
  std::string s;
  for (const std::string& n : RecomputeModuleNames(modules)) s += (s.empty() ? "" : separator) + n;
  return s;
}

StatusOr<uint32_t> RecomputeModulesFromJson(const json& v) {
  std::vector<std::string> names;
  bool strings = v.is_array();
  if (strings)
    for (const auto& n : v) {
      if (!n.is_string()) { strings = false; break; }
      names.push_back(n.get<std::string>());
    }
  if (!strings)
    return InvalidArgument("'recompute_modules' must be an array of Megatron-LM module names, e.g. "
                           "[\"layernorm\", \"moe_act\"]");
  auto bits = ParseRecomputeModules(names);
  if (!bits.ok()) return InvalidArgument("'recompute_modules': " + bits.status().message());
  return bits;
}

StatusOr<uint32_t> ParseRecomputeModules(const std::vector<std::string>& names) {
  uint32_t bits = 0;
  for (const std::string& name : names) {
    bool found = false;
    for (const ModuleName& n : kModuleNames) {
      if (name == n.name) {
        bits |= n.bit;
        found = true;
      }
    }
    if (found) continue;
    // Megatron-LM's other choices recompute parts of layers dtplan does not
    // model (Gated DeltaNet / DeltaProduct attention, hyper-connections).
    if (name == "gdn_norm_out" || name == "gdp_in_proj" || name == "gdp_qkv" || name == "mhc")
      return InvalidArgument("recompute module '" + name + "' recomputes part of " +
                             (name == "mhc" ? std::string("hyper-connections") : std::string("Gated Delta attention")) +
                             ", which dtplan does not model; remove it from recompute_modules");
    return InvalidArgument("recompute module '" + name + "' is unknown; use core_attn, layernorm, moe_act, mlp, moe, "
                           "shared_experts or mla_up_proj (Megatron-LM's --recompute-modules names)");
  }
  return bits;
}

StatusOr<uint32_t> ParseRecomputeModuleList(const std::string& comma_separated) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= comma_separated.size()) {
    const size_t comma = std::min(comma_separated.find(',', start), comma_separated.size());
    std::string name = comma_separated.substr(start, comma - start);
    if (name.empty())
      return InvalidArgument("recompute modules '" + comma_separated +
                             "' has an empty name; separate Megatron-LM module names by single commas, e.g. "
                             "layernorm,moe_act");
    names.push_back(name);
    start = comma + 1;
  }
  return ParseRecomputeModules(names);
}

int PlanSpec::StageLayers(int stage) const {
  int n = 0;
  for (int c = stage; c < static_cast<int>(layers_per_chunk.size()); c += pp) n += layers_per_chunk[c];
  return n;
}

int PlanSpec::ChunkFirstLayer(int chunk) const {
  int n = 0;
  for (int c = 0; c < chunk; ++c) n += layers_per_chunk[c];
  return n;
}

int PlanSpec::RecomputedLayers(int chunk) const {
  if (recompute != Recompute::kFull) return 0;
  const int layers = layers_per_chunk.at(chunk);
  return recompute_num_layers > 0 ? std::min(recompute_num_layers, layers) : layers;
}

std::vector<int> EvenSplit(int layers, int chunks) {
  std::vector<int> v(chunks, layers / chunks);
  for (int i = 0; i < layers % chunks; ++i) v[i] += 1;
  return v;
}

std::vector<int> AccountedSplit(const ModelSpec& m, int chunks) {
  if (chunks < 2) return {};
  const int head = 1 + m.mtp_layers;
  std::vector<int> v = EvenSplit(m.num_layers + 1 + head, chunks);
  v.front() -= 1;
  v.back() -= head;
  if (v.front() < 0 || v.back() < 0) return {};
  if (v == EvenSplit(m.num_layers, chunks)) return {};
  return v;
}

bool UnevenSplit(const PlanSpec& p) {
  int layers = 0;
  for (int l : p.layers_per_chunk) layers += l;
  return !p.layers_per_chunk.empty() &&
         p.layers_per_chunk != EvenSplit(layers, static_cast<int>(p.layers_per_chunk.size()));
}

Status CheckMoeCapacity(const PlanSpec& p, const ModelSpec& m) {
  if (!std::isfinite(p.moe_capacity_factor) || p.moe_capacity_factor < 0)
    return InvalidArgument("moe_capacity_factor must be a finite number >= 0 (0: dropless, no capacity), is " +
                           std::to_string(p.moe_capacity_factor));
  if (p.moe_capacity_factor > 0 && !m.moe())
    return InvalidArgument("moe_capacity_factor bounds the tokens each expert takes: it needs a mixture-of-experts "
                           "model; omit it");
  if (p.moe_capacity_factor > 0 && p.moe_dispatcher != MoeDispatcher::kAllToAll)
    return InvalidArgument("moe_capacity_factor is modeled with the all-to-all dispatcher (Megatron-LM's "
                           "token-dropping path); with the deduplicated dispatcher it is not; use moe_dispatcher "
                           "alltoall or omit the capacity");
  if (p.moe_pad_to_capacity && p.moe_capacity_factor <= 0)
    return InvalidArgument("moe_pad_to_capacity pads each expert's input to its capacity: it needs "
                           "moe_capacity_factor > 0 (as Megatron-LM's --moe-pad-expert-input-to-capacity does); set "
                           "one or omit the padding");
  return Status::Ok();
}

Status CheckRecomputeModules(const PlanSpec& p, const ModelSpec& m) {
  if (p.recompute_modules == kDefaultRecomputeModules) return Status::Ok();
  auto bad = [](const std::string& s) { return InvalidArgument(s); };
  const std::string list = "recompute_modules [" + RecomputeModulesString(p.recompute_modules, ", ") + "]";
  if (p.recompute != Recompute::kSelective)
    return bad(list + " with recompute \"" + ToString(p.recompute) +
               "\": modules are chosen for selective recompute only (Megatron-LM's --recompute-modules with "
               "--recompute-granularity selective); set recompute \"selective\" or omit recompute_modules");
  if (p.recompute_modules == 0)
    return bad("recompute_modules is empty: selective recompute of no module recomputes nothing; use recompute "
               "\"none\", or list modules (default [core_attn])");
  auto lacks = [&](const char* module, const std::string& what, const std::string& fix) {
    return bad("recompute_modules has '" + std::string(module) + "' but the model has no " + what + "; " + fix);
  };
  if (!m.moe() && (p.recompute_modules & kRecomputeMoeAct))
    return lacks("moe_act", "experts", "remove it (the dense MLP's recompute is 'mlp')");
  if (!m.moe() && (p.recompute_modules & kRecomputeMoe))
    return lacks("moe", "experts", "remove it (the dense MLP's recompute is 'mlp')");
  if ((!m.moe() || m.shared_ffn_hidden <= 0) && (p.recompute_modules & kRecomputeSharedExperts))
    return lacks("shared_experts", "shared experts", "remove it");
  if (!m.mla() && (p.recompute_modules & kRecomputeMlaUpProj))
    return lacks("mla_up_proj", "multi-head latent attention (kv_lora_rank)", "remove it");
  // Megatron-LM's Transformer Engine layer fuses attention's input norm into
  // the QKV linear layer and a dense layer's MLP norm into fc1
  // (LayerNormLinear, which keeps the normalized input); its layernorm
  // recompute skips those (IdentityOp) norms, so it frees nothing here.
  if (!m.moe() && !m.mla() && (p.recompute_modules & kRecomputeLayernorm))
    return lacks("layernorm", "norm of its own to recompute (Megatron-LM's Transformer Engine layer fuses both "
                 "norms into the QKV and fc1 linear layers, which keep the normalized input: layernorm recompute "
                 "frees nothing; it acts on MLA's input norm and an MoE layer's pre-MLP norm)", "remove it");
  if (m.moe() && !m.has_dense_layers() && (p.recompute_modules & kRecomputeMlp))
    return lacks("mlp", "dense MLP (every layer's MLP is a mixture of experts)",
                 "use 'moe' (the whole MoE block) or 'moe_act' instead");
  // Megatron-LM (TransformerConfig.__post_init__): moe_act and layernorm
  // recompute do not work with FP8 delayed scaling (tensorwise is fine).
  if (p.precision == Precision::kFp8 && p.fp8_recipe == Fp8Recipe::kDelayed &&
      (p.recompute_modules & (kRecomputeMoeAct | kRecomputeLayernorm)))
    return bad(list + " with precision fp8: Megatron-LM refuses moe_act and layernorm recompute with FP8 "
               "delayed scaling; remove them, use fp8_recipe tensorwise (current scaling) or precision bf16");
  if (p.moe_a2a_overlap && (p.recompute_modules & kRecomputeMoe))
    return bad("recompute_modules has 'moe' with moe_a2a_overlap: Megatron-LM refuses the pair "
               "(--overlap-moe-expert-parallel-comm); remove 'moe' or moe_a2a_overlap");
  return Status::Ok();
}

Status Validate(const PlanSpec& p, const ModelSpec& m, const std::string& where) {
  auto bad = [&](const std::string& s) { return InvalidArgument(where + ": " + s); };
  auto num = [](int64_t v) { return std::to_string(v); };
  if (p.dp < 1 || p.tp < 1 || p.pp < 1 || p.cp < 1) return bad("dp, tp, pp and cp must be >= 1");
  if (p.vpp < 1) return bad("'vpp' must be >= 1");
  if (p.ep < 1) return bad("'ep' must be >= 1");
  if (!m.moe() && p.ep != 1)
    return bad("ep=" + num(p.ep) + " but the model has no experts; use ep 1 (or omit it)");
  if (!m.moe() && p.etp != 0)
    return bad("etp=" + num(p.etp) + " but the model has no experts; omit etp");
  if (!m.moe() && p.moe_dispatcher != MoeDispatcher::kAllToAll)
    return bad("moe_dispatcher 'deduplicated' but the model has no experts; omit it");
  if (p.fp8_param_gather && (p.precision != Precision::kFp8 || p.zero_stage != 1))
    return bad("fp8_param_gather needs precision fp8 and zero_stage 1 (Megatron-LM's --fp8-param-gather with the "
               "distributed optimizer); set both or omit fp8_param_gather");
  if (p.recompute_num_layers < 0)
    return bad("recompute_num_layers " + num(p.recompute_num_layers) + " must be >= 0 (0: every layer)");
  if (p.recompute_num_layers > 0 && p.recompute != Recompute::kFull)
    return bad("recompute_num_layers " + num(p.recompute_num_layers) + " with recompute \"" + ToString(p.recompute) +
               "\": it chooses how many layers of each chunk full recompute covers; set recompute \"full\" or omit it");
  if (p.fp8_recipe != Fp8Recipe::kDelayed && p.precision != Precision::kFp8)
    return bad(std::string("fp8_recipe '") + ToString(p.fp8_recipe) + "' needs precision fp8; set it or omit fp8_recipe");
  if (m.mtp_layers > 0 && p.zero_stage > 1)
    return bad("zero_stage " + num(p.zero_stage) + " with multi-token prediction layers is not modeled (ZeRO-2/3 "
               "units of the MTP modules); use zero_stage 0 or 1");
  if (m.moe()) {
    if (m.num_experts % p.ep != 0)
      return bad("ep=" + num(p.ep) + " does not divide the model's " + num(m.num_experts) +
                 " experts; choose ep among the divisors of " + num(m.num_experts));
    if (p.etp < 0 || (p.etp > 0 && p.tp % p.etp != 0))
      return bad("etp=" + num(p.etp) + " must divide tp=" + num(p.tp) +
                 " (expert tensor parallelism within the TP group); use etp 1, a divisor of tp, or omit it (= tp)");
    if (!p.expert_folded() && p.dp % p.ep != 0)
      return bad("ep=" + num(p.ep) + " does not divide dp=" + num(p.dp) +
                 " (experts are sharded over DP replicas); choose ep dividing dp, or set etp < tp to fold "
                 "EP over tp*cp*dp");
    if (p.expert_folded()) {
      const int64_t room = static_cast<int64_t>(p.tp) / p.expert_tp() * p.cp * p.dp;
      if (room % p.ep != 0)
        return bad("ep=" + num(p.ep) + " does not divide tp*cp*dp/etp=" + num(room) +
                   " (the expert grid etp x ep x expert-dp must tile the stage's tp*cp*dp ranks); choose ep dividing it");
    }
    if (p.tp > 1 && !p.sequence_parallel)
      return bad("a mixture-of-experts model with tp > 1 needs sequence_parallel (as Megatron-LM requires); "
                 "set \"sequence_parallel\": true or tp 1");
    if (p.zero_stage > 1)
      return bad("zero_stage " + num(p.zero_stage) + " with experts is not modeled (ZeRO-2/3 of expert "
                 "parameters); use zero_stage 0 or 1 (Megatron's distributed optimizer)");
  }
  if (p.cudnn_attention && !p.flash_attention)
    return bad("attention_kernel 'cudnn' prices cuDNN's fused attention, but the plan runs the unfused core "
               "(flash_attention false); set \"flash_attention\": true or omit attention_kernel");
  if (p.tp_comm_overlap && (p.tp < 2 || !p.sequence_parallel))
    return bad("tp_comm_overlap overlaps the sequence-parallel all-gathers and reduce-scatters with the GEMMs: it "
               "needs tp > 1 and \"sequence_parallel\": true (as Megatron-LM's --tp-comm-overlap does); omit it");
  if (Status s = CheckMoeCapacity(p, m); !s.ok()) return bad(s.message());
  if (p.moe_router_cuda_graph && !m.moe())
    return bad("moe_router_cuda_graph captures the MoE router and dispatcher preprocessing in CUDA graphs: it "
               "needs a mixture-of-experts model; omit it");
  if (p.moe_a2a_overlap) {
    if (!m.moe() || p.ep < 2)
      return bad("moe_a2a_overlap hides the expert-parallel all-to-alls: it needs a mixture-of-experts model "
                 "and ep > 1; omit it");
    if (p.recompute == Recompute::kFull)
      return bad("moe_a2a_overlap with full recompute: Megatron-LM refuses the pair; use recompute none or "
                 "selective, or omit moe_a2a_overlap");
    if (p.pp > 1 && p.schedule != Schedule::kInterleaved)
      return bad("moe_a2a_overlap with pp > 1 needs the interleaved schedule (Megatron-LM's combined 1F1B runs "
                 "with pp 1 or virtual pipeline stages)");
  }
  if (p.delay_wgrad_compute && !p.moe_a2a_overlap)
    return bad("delay_wgrad_compute moves the expert weight gradients beside the all-to-alls of combined 1F1B: it "
               "needs moe_a2a_overlap (as Megatron-LM's --delay-wgrad-compute needs "
               "--overlap-moe-expert-parallel-comm); set both or omit it");
  // The MoE block's side-stream overlaps: MoE only, and never beside
  // combined 1F1B (Megatron-LM asserts against either pair).
  const std::pair<bool, const char*> side_overlaps[] = {
      {p.overlap_dispatch_backward_wgrad,
       "overlap_dispatch_backward_with_experts_wgrad (the experts' weight gradients beside the dispatch's "
       "backward all-to-all; with moe_a2a_overlap, delay_wgrad_compute does this)"},
      {p.moe_shared_expert_overlap,
       "moe_shared_expert_overlap (the shared experts beside the dispatch and combine; 'disable "
       "moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm')"}};
  for (const auto& [set, what] : side_overlaps) {
    if (!set) continue;
    if (!m.moe()) return bad(std::string(what) + ": the model has no experts; omit it");
    if (p.moe_a2a_overlap)
      return bad(std::string(what) + " with moe_a2a_overlap: Megatron-LM refuses the pair; keep one");
  }
  if (Status s = CheckRecomputeModules(p, m); !s.ok()) return bad(s.message());
  if (p.micro_batch < 1) return bad("'micro_batch' must be >= 1");
  if (p.num_microbatches < 1) return bad("'num_microbatches' must be >= 1");
  if (p.seq_length < 1) return bad("'seq_length' must be >= 1");
  if (Status s = CheckSequenceFits(m, p.seq_length); !s.ok()) return bad("seq_length " + s.message());
  if (m.WindowApplies(p.seq_length) && p.cp > 1)
    return bad("cp=" + num(p.cp) + (m.window_chunked ? " with chunked attention (chunk " : " with sliding-window attention (window ") + num(m.sliding_window) +
               " < seq_length " + num(p.seq_length) + ") is not modeled (context parallelism is priced as a ring "
               "over the whole causal prefix); use cp 1");
  if (p.zero_stage < 0 || p.zero_stage > 3) return bad("'zero_stage' must be 0, 1, 2 or 3");
  if (m.heads % p.tp != 0)
    return bad("tp=" + num(p.tp) + " does not divide the model's " + num(m.heads) +
               " attention heads; choose tp among the divisors of " + num(m.heads));
  if (m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0)
    return bad("tp=" + num(p.tp) + " is incompatible with " + num(m.kv_heads) +
               " KV heads; choose tp dividing or divisible by " + num(m.kv_heads));
  if (p.seq_length % p.cp != 0 || (p.cp > 1 && (p.seq_length / p.cp) % 2 != 0))
    return bad("cp=" + num(p.cp) + " must divide seq_length/2 (" + num(p.seq_length) + ")");
  if (p.sequence_parallel && p.tp == 1) return bad("sequence_parallel needs tp > 1");
  if (p.sequence_parallel && (p.seq_length / p.cp) % p.tp != 0)
    return bad("sequence_parallel needs seq_length/cp divisible by tp");
  if (p.schedule != Schedule::kInterleaved && p.vpp != 1)
    return bad("vpp=" + num(p.vpp) + " needs schedule \"interleaved\"");
  if (p.schedule == Schedule::kInterleaved) {
    if (p.pp < 2) return bad("the interleaved schedule needs pp >= 2");
    if (p.num_microbatches % p.pp != 0)
      return bad("the interleaved schedule needs num_microbatches (" + num(p.num_microbatches) +
                 ") divisible by pp (" + num(p.pp) + ")");
  }
  if (static_cast<int>(p.layers_per_chunk.size()) != p.pp * p.vpp)
    return bad("'layers_per_chunk' must have pp*vpp = " + num(p.pp * p.vpp) + " entries, has " +
               num(p.layers_per_chunk.size()));
  int sum = 0;
  for (size_t c = 0; c < p.layers_per_chunk.size(); ++c) {
    const int l = p.layers_per_chunk[c];
    // Megatron-LM's layouts may give the multi-token-prediction modules
    // and the loss a last chunk of their own ("...|mL"): it holds work.
    // With the embedding and the loss counted as layers (Megatron-LM's
    // --account-for-embedding-in-pipeline-split / -loss-in-), the first
    // chunk may hold the embedding alone and the last the head alone.
    const bool end_chunk = l == 0 && p.layers_per_chunk.size() > 1 &&
                           (c == 0 || c + 1 == p.layers_per_chunk.size());
    if (l < 1 && !end_chunk)
      return bad("only the first chunk (embedding) and the last (head, loss, MTP modules) may hold no layer; lower pp or vpp");
    sum += l;
  }
  if (sum != m.num_layers)
    return bad("'layers_per_chunk' sums to " + num(sum) + " but the model has " +
               num(m.num_layers) + " layers");
  // The rank-grid order must name each dimension once.
  for (const char* d : {"tp", "cp", "dp", "pp"})
    if (p.order.find(d) == std::string::npos)
      return bad("'order' = \"" + p.order + "\" must contain tp, cp, dp and pp");
  // Folded experts tile a stage's tp*cp*dp ranks, which must be consecutive:
  // tp innermost and pp outermost (group_topology.cc).
  if (m.moe() && p.expert_folded() && (p.order.rfind("tp", 0) != 0 || p.order.size() < 2 ||
                                       p.order.compare(p.order.size() - 2, 2, "pp") != 0))
    return bad("etp=" + num(p.expert_tp()) + " < tp needs a rank order with tp innermost and pp outermost (got \"" +
               p.order + "\"); use the default \"tp-cp-dp-pp\"");
  return Status::Ok();
}

json ToJson(const PlanSpec& p) {
  json j{{"dp", p.dp},
              {"tp", p.tp},
              {"pp", p.pp},
              {"cp", p.cp},
              {"vpp", p.vpp},
              {"micro_batch", p.micro_batch},
              {"num_microbatches", p.num_microbatches},
              {"global_batch", p.global_batch()},
              {"seq_length", p.seq_length},
              {"schedule", ToString(p.schedule)},
              {"recompute", ToString(p.recompute)},
              {"sequence_parallel", p.sequence_parallel},
              {"flash_attention", p.flash_attention},
              {"dropout", p.dropout},
              {"zero_stage", p.zero_stage},
              {"grad_bytes", p.grad_bytes},
              {"dp_bucket_bytes", p.dp_bucket_bytes},
              {"layers_per_chunk", p.layers_per_chunk},
              {"order", p.order}};
  if (p.ep != 1) j["ep"] = p.ep;  // written only for expert-parallel plans (absent: 1)
  if (p.etp > 0) j["etp"] = p.etp;  // written only when set (absent: tp)
  if (p.precision != Precision::kProfile) j["precision"] = ToString(p.precision);  // absent: the profile's dtype
  if (p.force_balanced_routing) j["force_balanced_routing"] = true;                 // absent: false
  if (p.moe_capacity_factor > 0) j["moe_capacity_factor"] = p.moe_capacity_factor;  // absent: 0 (dropless)
  if (p.moe_pad_to_capacity) j["moe_pad_to_capacity"] = true;                       // absent: false
  if (p.moe_dispatcher != MoeDispatcher::kAllToAll) j["moe_dispatcher"] = ToString(p.moe_dispatcher);  // absent: alltoall
  if (p.fp8_param_gather) j["fp8_param_gather"] = true;                             // absent: false
  if (p.fp8_recipe != Fp8Recipe::kDelayed) j["fp8_recipe"] = ToString(p.fp8_recipe);  // absent: delayed
  if (p.adam_moment_bytes != 0) j["adam_moment_bytes"] = p.adam_moment_bytes;        // absent: 0 (fp32 moments)
  if (p.moe_a2a_overlap) j["moe_a2a_overlap"] = true;                               // absent: false
  if (p.moe_shared_expert_overlap) j["moe_shared_expert_overlap"] = true;           // absent: false
  if (p.delay_wgrad_compute) j["delay_wgrad_compute"] = true;                       // absent: false
  if (p.overlap_dispatch_backward_wgrad) j["overlap_dispatch_backward_with_experts_wgrad"] = true;  // absent: false
  if (p.tp_comm_overlap) j["tp_comm_overlap"] = true;                               // absent: false
  if (p.moe_router_cuda_graph) j["moe_router_cuda_graph"] = true;                   // absent: false
  if (!p.cross_entropy_fusion) j["cross_entropy_loss_fusion"] = false;               // absent: true
  if (p.cudnn_attention) j["attention_kernel"] = "cudnn";                           // absent: the profile's default
  if (!p.overlap_grad_reduce) j["overlap_grad_reduce"] = false;                     // absent: true
  if (!p.overlap_p2p_comm) j["overlap_p2p_comm"] = false;                           // absent: true
  if (p.recompute_modules != kDefaultRecomputeModules)                              // absent: [core_attn]
    j["recompute_modules"] = RecomputeModuleNames(p.recompute_modules);
  if (p.recompute_num_layers > 0) j["recompute_num_layers"] = p.recompute_num_layers;  // absent: every layer
  return j;
}

namespace {
// An integer field that must fit an int: range-checked in int64 before the
// cast (a value such as 4294967304 would otherwise run as 8). Validate()
// checks what each field means; this only keeps the conversion defined.
int IntField(FieldReader& r, const char* key, int64_t dflt) {
  const int64_t v = r.IntOr(key, dflt);
  r.Range(key, v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  return r.ok() ? static_cast<int>(v) : 0;
}
}  // namespace

StatusOr<PlanSpec> PlanFromJson(const json& j, const ModelSpec& m, const std::string& where) {
  FieldReader r(j, where);
  if (!r.ok()) return r.status();
  PlanSpec p;
  p.dp = IntField(r, "dp", 1);
  p.tp = IntField(r, "tp", 1);
  p.pp = IntField(r, "pp", 1);
  p.cp = IntField(r, "cp", 1);
  p.ep = IntField(r, "ep", 1);  // older plan files have none: 1
  p.etp = IntField(r, "etp", 0);  // absent: tp
  p.vpp = IntField(r, "vpp", 1);
  p.micro_batch = IntField(r, "micro_batch", 1);
  p.seq_length = IntField(r, "seq_length", m.seq_length);
  if (r.Has("num_microbatches")) {
    p.num_microbatches = IntField(r, "num_microbatches", 0);
    // dtplan writes both; a global_batch beside num_microbatches must agree.
    if (r.Has("global_batch")) {
      const int64_t gb = r.Int("global_batch");
      if (r.ok() && gb != static_cast<int64_t>(p.num_microbatches) * p.dp * p.micro_batch)
        r.Fail("'global_batch' " + std::to_string(gb) + " != num_microbatches x dp x micro_batch (" +
               std::to_string(static_cast<int64_t>(p.num_microbatches) * p.dp * p.micro_batch) +
               "); give one of the two, or make them agree");
    }
  } else {
    int64_t gb = r.Int("global_batch");
    int64_t per = static_cast<int64_t>(p.dp) * p.micro_batch;
    if (r.ok() && (per <= 0 || gb % per != 0))
      r.Fail("'global_batch' must be divisible by dp*micro_batch");
    p.num_microbatches = per > 0 ? static_cast<int>(gb / std::max<int64_t>(per, 1)) : 1;
  }
  auto sched = ParseSchedule(r.StrOr("schedule", "1f1b"));
  if (!sched.ok()) r.Fail(sched.status().message());
  else p.schedule = *sched;
  auto rc = ParseRecompute(r.StrOr("recompute", "none"));
  if (!rc.ok()) r.Fail(rc.status().message());
  else p.recompute = *rc;
  if (r.Has("recompute_modules")) {
    auto bits = RecomputeModulesFromJson(j.at("recompute_modules"));
    if (!bits.ok()) r.Fail(bits.status().message());
    else p.recompute_modules = *bits;
  }
  p.sequence_parallel = r.BoolOr("sequence_parallel", false);
  p.flash_attention = r.BoolOr("flash_attention", true);
  p.dropout = r.BoolOr("dropout", true);
  p.zero_stage = IntField(r, "zero_stage", 0);
  if (r.Has("precision")) {
    auto prec = ParsePrecision(r.Str("precision"));
    if (!prec.ok()) r.Fail(prec.status().message());
    else p.precision = *prec;
  }
  p.force_balanced_routing = r.BoolOr("force_balanced_routing", false);
  p.moe_capacity_factor = r.NumOr("moe_capacity_factor", 0);
  p.moe_pad_to_capacity = r.BoolOr("moe_pad_to_capacity", false);
  p.fp8_param_gather = r.BoolOr("fp8_param_gather", false);
  p.moe_a2a_overlap = r.BoolOr("moe_a2a_overlap", false);
  p.moe_shared_expert_overlap = r.BoolOr("moe_shared_expert_overlap", false);
  p.delay_wgrad_compute = r.BoolOr("delay_wgrad_compute", false);
  p.overlap_dispatch_backward_wgrad = r.BoolOr("overlap_dispatch_backward_with_experts_wgrad", false);
  p.tp_comm_overlap = r.BoolOr("tp_comm_overlap", false);
  p.moe_router_cuda_graph = r.BoolOr("moe_router_cuda_graph", false);
  p.cross_entropy_fusion = r.BoolOr("cross_entropy_loss_fusion", true);
  p.overlap_grad_reduce = r.BoolOr("overlap_grad_reduce", true);
  p.overlap_p2p_comm = r.BoolOr("overlap_p2p_comm", true);
  if (r.Has("attention_kernel")) {
    auto ak = ParseAttentionKernel(r.Str("attention_kernel"));
    if (!ak.ok()) r.Fail("'attention_kernel': " + ak.status().message());
    else p.cudnn_attention = *ak;
  }
  if (r.Has("moe_dispatcher")) {
    auto d = ParseMoeDispatcher(r.Str("moe_dispatcher"));
    if (!d.ok()) r.Fail(d.status().message());
    else p.moe_dispatcher = *d;
  }
  if (r.Has("fp8_recipe")) {
    auto fr = ParseFp8Recipe(r.Str("fp8_recipe"));
    if (!fr.ok()) r.Fail(fr.status().message());
    else p.fp8_recipe = *fr;
  }
  p.recompute_num_layers = IntField(r, "recompute_num_layers", 0);
  p.grad_bytes = IntField(r, "grad_bytes", 0);
  if (r.ok() && p.grad_bytes != 0 && p.grad_bytes != 2 && p.grad_bytes != 4)
    r.Fail("'grad_bytes' must be 0 (the profile's), 2 or 4");
  p.adam_moment_bytes = IntField(r, "adam_moment_bytes", 0);
  if (r.ok() && p.adam_moment_bytes != 0 && p.adam_moment_bytes != 2 && p.adam_moment_bytes != 4)
    r.Fail("'adam_moment_bytes' must be 0 (fp32, the default), 2 (bf16) or 4 (fp32)");
  p.dp_bucket_bytes = r.IntOr("dp_bucket_bytes", p.dp_bucket_bytes);
  p.order = r.StrOr("order", p.order);
  if (r.Has("layers_per_chunk")) {
    const json& l = j.at("layers_per_chunk");
    if (!l.is_array()) {
      r.Fail("'layers_per_chunk' must be an array of integers");
    } else {
      for (const auto& v : l) {
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > 1000000) ||
            (!v.is_number_unsigned() && (v.get<int64_t>() < -1000000 || v.get<int64_t>() > 1000000))) {
          r.Fail("'layers_per_chunk' must be an array of integers (each 0 .. the model's layers)");
          break;
        }
        p.layers_per_chunk.push_back(static_cast<int>(v.get<int64_t>()));
      }
    }
  } else if (p.pp >= 1 && p.vpp >= 1 && m.num_layers >= p.pp * p.vpp) {
    p.layers_per_chunk = EvenSplit(m.num_layers, p.pp * p.vpp);
  }
  r.RejectUnknown();
  if (!r.ok()) return r.status();
  DT_RETURN_IF_ERROR(Validate(p, m, where));
  return p;
}

json ToJson(const ClusterSpec& c) {
  return json{{"nodes", c.nodes}, {"gpus_per_node", c.gpus_per_node}, {"device", c.device}};
}

StatusOr<ClusterSpec> ClusterFromJson(const json& j, const std::string& where) {
  FieldReader r(j, where);
  ClusterSpec c;
  const int64_t nodes = r.IntOr("nodes", 1), gpus = r.IntOr("gpus_per_node", 8);
  c.device = r.StrOr("device", "gpu");
  r.Range("nodes", nodes, 1, 1 << 20);  // in int64, before the cast
  r.Range("gpus_per_node", gpus, 1, 1024);
  c.nodes = r.ok() ? static_cast<int>(nodes) : 1;
  c.gpus_per_node = r.ok() ? static_cast<int>(gpus) : 1;
  if (r.ok() && c.device != "gpu" && c.device != "cpu")
    r.Fail("field 'device' must be \"gpu\" or \"cpu\"");
  r.RejectUnknown();
  if (!r.ok()) return r.status();
  return c;
}

Status CheckPlanFileFields(const json& j, const std::string& where) {
  FieldReader r(j, where);
  r.RejectUnknown({"model", "cluster", "plan", "prediction", "profile", "dtrun_executes"});
  return r.status();
}

namespace {

StatusOr<PlanFile> PlanFileFromJson(const json& j, const std::string& path) {
  std::string where = "plan file '" + path + "'";
  if (!j.is_object() || !j.contains("model") || !j.contains("plan"))
    return InvalidArgument(where + ": expected an object with \"model\" and \"plan\" "
                                   "(write one with dtplan --out)");
  DT_RETURN_IF_ERROR(CheckPlanFileFields(j, where));
  PlanFile f;
  DT_ASSIGN_OR_RETURN(f.model, ModelFromJson(j["model"], where + " field 'model'"));
  if (j.contains("cluster")) {
    DT_ASSIGN_OR_RETURN(f.cluster, ClusterFromJson(j["cluster"], where + " field 'cluster'"));
  }
  DT_ASSIGN_OR_RETURN(f.plan, PlanFromJson(j["plan"], f.model, where + " field 'plan'"));
  f.prediction = j.value("prediction", json());
  return f;
}

}  // namespace

StatusOr<PlanFile> PlanFileFromJsonText(const std::string& text, const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ParseJsonText(text, path));
  return PlanFileFromJson(j, path);
}

StatusOr<PlanFile> LoadPlanFile(const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return PlanFileFromJson(j, path);
}

json ToJson(const PlanFile& f) {
  return json{{"model", ToJson(f.model)},
              {"cluster", ToJson(f.cluster)},
              {"plan", ToJson(f.plan)},
              {"prediction", f.prediction}};
}

std::string Describe(const PlanSpec& p) {
  std::ostringstream os;
  os << "dp=" << p.dp << " tp=" << p.tp << " pp=" << p.pp;
  if (p.cp > 1) os << " cp=" << p.cp;
  if (p.ep > 1) os << " ep=" << p.ep;
  if (p.expert_folded()) os << " etp=" << p.expert_tp();
  if (p.vpp > 1) os << " vpp=" << p.vpp;
  os << " mbs=" << p.micro_batch << " m=" << p.num_microbatches << " " << ToString(p.schedule)
     << " rc=" << ToString(p.recompute);
  if (p.recompute_modules != kDefaultRecomputeModules) os << "(" << RecomputeModulesString(p.recompute_modules) << ")";
  if (p.recompute_num_layers > 0) os << "(" << p.recompute_num_layers << " layers/chunk)";
  os << (p.sequence_parallel ? " sp" : "")
     << (p.flash_attention ? "" : " unfused") << " zero"
     << p.zero_stage;
  if (p.precision != Precision::kProfile) os << " " << ToString(p.precision);  // absent: the profile's dtype
  if (p.fp8_recipe != Fp8Recipe::kDelayed) os << "(" << ToString(p.fp8_recipe) << ")";  // fp8(tensorwise)
  if (p.fp8_param_gather) os << " fp8-params";
  if (p.adam_moment_bytes == 2) os << " bf16-moments";
  if (p.moe_capacity_factor > 0)
    os << " capacity=" << p.moe_capacity_factor << (p.moe_pad_to_capacity ? "(padded)" : "");
  if (p.moe_a2a_overlap) os << " a2a-overlap";
  if (p.delay_wgrad_compute) os << " delay-wgrad";
  if (p.overlap_dispatch_backward_wgrad) os << " wgrad-beside-dispatch";
  if (p.moe_shared_expert_overlap) os << " shared-overlap";
  if (p.tp_comm_overlap) os << " tp-overlap";
  if (p.moe_router_cuda_graph) os << " router-graph";
  if (!p.cross_entropy_fusion) os << " unfused-ce";
  if (p.cudnn_attention) os << " cudnn-attn";
  if (!p.overlap_grad_reduce) os << " grad-sync-after-backward";
  if (!p.overlap_p2p_comm && p.schedule == Schedule::kInterleaved) os << " p2p-blocking";
  if (UnevenSplit(p)) {
    os << " layers=";
    const std::vector<int>& l = p.layers_per_chunk;
    for (size_t a = 0; a < l.size();) {
      size_t b = a;
      while (b < l.size() && l[b] == l[a]) ++b;
      os << (a ? "," : "") << l[a];
      if (b - a > 1) os << "*" << (b - a);
      a = b;
    }
  }
  return os.str();
}

}  // namespace dt
