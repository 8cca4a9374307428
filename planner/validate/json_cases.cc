#include <cmath>
#include <cstdio>
#include <map>

#include "planner/frameworks/megatron_args.h"
#include "planner/validate/case.h"

namespace dt {
namespace {

StatusOr<std::string> ProfileForGpu(const std::string& gpu, const std::string& where) {
  static const std::map<std::string, std::string> known = {
      {"A100-SXM4-80GB", "A100-SXM4-80GB"}, {"A100", "A100-SXM4-80GB"},
      {"H100-SXM5-80GB", "H100-SXM5-80GB"}, {"H100", "H100-SXM5-80GB"}};
  auto it = known.find(gpu);
  if (it == known.end())
    return InvalidArgument(where + ": hardware.gpu '" + gpu +
                           "' has no bundled profile; use A100-SXM4-80GB or H100-SXM5-80GB");
  return it->second;
}

template <typename T>
void SetIf(FieldReader& r, const char* key, std::optional<T>* out) {
  if (!r.Has(key)) return;
  const int64_t v = r.Int(key);
  r.Range(key, v, 1, 1 << 20);  // before the cast: every such field is a count >= 1
  if (r.ok()) *out = static_cast<T>(v);
}

StatusOr<ValidationCase> OneCase(const json& c, const std::string& file, size_t index) {
  std::string where = "case file '" + file + "' case " + std::to_string(index);
  FieldReader top(c, where);
  ValidationCase v;
  v.id = top.StrOr("id", "case" + std::to_string(index));
  where = "case file '" + file + "' case '" + v.id + "'";
  if (!c.contains("hardware") || !c.contains("model") || !c.contains("plan") || !c.contains("measured"))
    return InvalidArgument(where + ": needs \"hardware\", \"model\", \"plan\" and \"measured\"");
  FieldReader hw(c["hardware"], where + " field 'hardware'");
  DT_ASSIGN_OR_RETURN(v.profile, ProfileForGpu(hw.Str("gpu"), where));
  const int64_t gpus_per_node = hw.IntOr("gpus_per_node", 8);
  hw.Range("gpus_per_node", gpus_per_node, 1, 1024);  // 0 divided the world below (found by fuzzing)
  if (!hw.ok()) return hw.status();
  v.cluster.gpus_per_node = static_cast<int>(gpus_per_node);
  DT_ASSIGN_OR_RETURN(v.model, ModelFromJson(c["model"], where + " field 'model'"));
  v.group = v.model.name == "model" ? v.id : v.model.name;
  v.group = ToString(v.model.family) + std::string("-h") + std::to_string(v.model.hidden) + "-l" +
            std::to_string(v.model.num_layers);

  FieldReader p(c["plan"], where + " field 'plan'");
  SearchConstraints& k = v.constraints;
  SetIf(p, "tp", &k.tp);
  SetIf(p, "pp", &k.pp);
  SetIf(p, "dp", &k.dp);
  SetIf(p, "cp", &k.cp);
  SetIf(p, "ep", &k.ep);
  SetIf(p, "etp", &k.etp);
  SetIf(p, "microbatch_size", &k.micro_batch);
  SetIf(p, "virtual_stages", &k.vpp);
  k.global_batch = p.Int("global_batch_size");
  // A HuggingFace config's sequence length is its context limit, not the run's.
  k.seq_length = p.Has("seq_length") ? static_cast<int>(p.Int("seq_length")) : v.model.seq_length;
  if (p.ok() && (k.seq_length < 1 || k.seq_length > (1 << 24)))
    p.Fail("'seq_length' must be 1 .. 16777216, is " + std::to_string(k.seq_length));
  if (p.Has("recompute")) {
    auto rc = ParseRecompute(p.Str("recompute"));
    if (!rc.ok()) p.Fail(rc.status().message());
    else k.recompute = *rc;
  }
  // Megatron-LM's --recompute-modules (with recompute "selective"); absent:
  // its default, [core_attn].
  if (p.Has("recompute_modules")) {
    if (auto bits = RecomputeModulesFromJson(c["plan"]["recompute_modules"]); !bits.ok()) {
      p.Fail(bits.status().message());
    } else if (!k.recompute || *k.recompute != Recompute::kSelective) {
      p.Fail("'recompute_modules' needs \"recompute\": \"selective\"");
    } else {
      k.recompute_modules = *bits;
    }
  }
  // Megatron-LM's --recompute-method block --recompute-num-layers N (with
  // recompute "full"); absent or null: every layer.
  if (p.Has("recompute_num_layers")) {
    const int64_t n = p.Int("recompute_num_layers");
    if (n < 1) p.Fail("'recompute_num_layers' must be >= 1");
    else if (!k.recompute || *k.recompute != Recompute::kFull) p.Fail("'recompute_num_layers' needs \"recompute\": \"full\"");
    else k.recompute_num_layers = static_cast<int>(n);
  }
  if (p.Has("schedule")) {
    auto s = ParseSchedule(p.Str("schedule"));
    if (!s.ok()) p.Fail(s.status().message());
    else k.schedule = *s;
  }
  // MoE token dispatcher: "alltoall" (absent) or "deduplicated" (DeepEP /
  // HybridEP, Megatron's flex dispatcher).
  if (p.Has("moe_dispatcher")) {
    auto d = ParseMoeDispatcher(p.Str("moe_dispatcher"));
    if (!d.ok()) p.Fail("'moe_dispatcher': " + d.status().message());
    else if (!v.model.moe()) p.Fail("'moe_dispatcher' is set but the model has no experts");
    else k.moe_dispatcher = *d;
  }
  // The layer split of the recipe: even (Megatron-LM's default) unless the
  // case counts the embedding and loss as layers (Megatron-LM's
  // --account-for-embedding-in-pipeline-split and --account-for-loss-in-
  // pipeline-split) or gives a layout.
  k.split = p.BoolOr("account_for_embedding_and_loss", false) ? SearchConstraints::Split::kAccounted
                                                              : SearchConstraints::Split::kEven;
  // Uneven stages: Megatron-LM's --pipeline-model-parallel-layout, as the
  // recipe wrote it (e.g. DeepSeek-V3's "Et|(tt|)*30mL").
  if (p.Has("pipeline_layout")) {
    int mtp = 0;
    auto layout = ParseMegatronLayout(p.Str("pipeline_layout"), &mtp);
    if (!layout.ok()) p.Fail("'pipeline_layout': " + layout.status().message());
    else if (mtp != v.model.mtp_layers)
      p.Fail("'pipeline_layout' places " + std::to_string(mtp) + " MTP layers ('m') but the model has " +
             std::to_string(v.model.mtp_layers));
    else v.layers_per_chunk = *layout;
  }
  // Combined 1F1B (MoE cases whose recipe overlaps the EP all-to-alls).
  k.moe_a2a_overlap = p.BoolOr("moe_a2a_overlap", false);
  // Megatron-LM's --moe-shared-expert-overlap (NeMo's moe_shared_expert_overlap).
  k.moe_shared_expert_overlap = p.BoolOr("moe_shared_expert_overlap", false);
  // Megatron-LM's --delay-wgrad-compute (with the all-to-all overlap).
  k.delay_wgrad_compute = p.BoolOr("delay_wgrad_compute", false);
  k.overlap_dispatch_backward_wgrad = p.BoolOr("overlap_dispatch_backward_with_experts_wgrad", false);
  // Megatron-LM's --moe-expert-capacity-factor / --moe-pad-expert-input-to-capacity.
  k.moe_capacity_factor = p.NumOr("moe_capacity_factor", 0);
  k.moe_pad_to_capacity = p.BoolOr("moe_pad_to_capacity", false);
  k.tp_comm_overlap = p.BoolOr("tp_comm_overlap", false);
  // Megatron-LM's --cuda-graph-scope moe_router moe_preprocess.
  k.moe_router_cuda_graph = p.BoolOr("moe_router_cuda_graph", false);
  // The attention kernel: the profile's default unless the case names one,
  // or its recipe selects one by environment: dgxc-benchmarking v25.02's
  // Llama 3.1 recipe exports NVTE_FLASH_ATTN=0 and NVTE_FUSED_ATTN=1
  // (llama3.1/configure.sh at NVIDIA/dgxc-benchmarking 8f5cbb3), which
  // leaves Transformer Engine only cuDNN's fused attention.
  const std::string source = top.StrOr("source", "");
  k.cudnn_attention = source.rfind("NVIDIA dgxc-benchmarking v25.02", 0) == 0;
  if (p.Has("attention_kernel")) {
    auto ak = ParseAttentionKernel(p.Str("attention_kernel"));
    if (!ak.ok()) p.Fail("'attention_kernel': " + ak.status().message());
    else k.cudnn_attention = *ak;
  }
  if (k.moe_a2a_overlap && !v.model.moe()) p.Fail("'moe_a2a_overlap' is set but the model has no experts");
  if (k.moe_shared_expert_overlap && !v.model.moe())
    p.Fail("'moe_shared_expert_overlap' is set but the model has no experts");
  // Gradient reduction overlapped with the backward (absent or null: yes).
  k.overlap_grad_reduce = p.BoolOr("overlap_grad_reduce", true);
  // --fp8-param-gather (FP8 cases): absent or null = off, Megatron-LM's default.
  k.fp8_param_gather = p.BoolOr("fp8_param_gather", false);
  // FP8 scaling recipe: "delayed" (absent or null) or "tensorwise" (current scaling).
  if (p.Has("fp8_recipe")) {
    auto r = ParseFp8Recipe(p.Str("fp8_recipe"));
    if (!r.ok()) p.Fail("'fp8_recipe': " + r.status().message());
    else k.fp8_recipe = *r;
  }
  // Adam moments: "fp32" (absent) or "bf16" (a precision-aware optimizer).
  if (p.Has("adam_moments")) {
    const std::string am = p.Str("adam_moments");
    if (am == "bf16") k.adam_moment_bytes = 2;
    else if (am != "fp32") p.Fail("'adam_moments' must be \"fp32\" or \"bf16\", is \"" + am + "\"");
  }
  // Fused attention unless the case says otherwise; the SC21 measurements
  // predate FlashAttention (2022), so their Megatron ran the unfused core.
  v.source = source.substr(0, source.find(','));  // "Narayanan et al. SC21, Table 1" -> its paper
  k.flash_attention = p.BoolOr("flash_attention", source.find("SC21") == std::string::npos);
  // The loss kernel: fused unless the case says otherwise, or its software
  // had no fused loss: Megatron-LM before 2024 (SC21) and NeMo 1.x (the NeMo
  // performance pages of 24.03 / 24.07; NeMo 2 sets
  // cross_entropy_loss_fusion true by default, nemo/collections/llm/gpt/
  // model/base.py at v2.0.0, and so does Megatron-Bridge's GPTProvider).
  const bool unfused_loss_era =
      source.find("SC21") != std::string::npos || source.rfind("NVIDIA/NeMo docs/source/performance", 0) == 0;
  k.cross_entropy_fusion = p.BoolOr("cross_entropy_loss_fusion", !unfused_loss_era);
  // Interleaved pipeline sends overlapped with compute (PlanSpec::
  // overlap_p2p_comm): yes unless the case says otherwise or its software
  // had no such option (Megatron-LM 2021, SC21: p2p_communication waited on
  // every send and then synchronized the device).
  k.overlap_p2p_comm = p.BoolOr("overlap_p2p_comm", source.find("SC21") == std::string::npos);
  if (p.Has("sequence_parallel")) k.sequence_parallel = p.BoolOr("sequence_parallel", false);
  int zero = static_cast<int>(p.IntOr("zero_stage", 0));
  if (p.BoolOr("distributed_optimizer", false)) zero = std::max(zero, 1);
  if (p.Has("zero_stage") || p.Has("distributed_optimizer")) k.zero_stage = zero;
  p.RejectUnknown();  // a misspelt setting would be priced at its default
  if (!p.ok()) return p.status();
  if (!k.dp || !k.tp || !k.pp)
    return InvalidArgument(where + ": plan needs tp, pp and dp to size the cluster");
  // In double: four factors up to 2^20 overflow int (and int64).
  const double world_gpus = static_cast<double>(*k.dp) * *k.tp * *k.pp * k.cp.value_or(1);
  if (world_gpus > (1 << 24))
    return InvalidArgument(where + ": the plan's tp x pp x dp x cp is " + std::to_string(world_gpus) +
                           " GPUs; at most 16777216");
  const int world = static_cast<int>(world_gpus);
  // num_gpus, when the case states it, must be the plan's world.
  if (top.Has("num_gpus")) {
    const int64_t n = top.Int("num_gpus");
    if (top.ok() && n != world)
      top.Fail("'num_gpus' " + std::to_string(n) + " != the plan's tp x pp x dp x cp = " + std::to_string(world));
    if (!top.ok()) return top.status();
  }
  if (world % v.cluster.gpus_per_node == 0) {
    v.cluster.nodes = world / v.cluster.gpus_per_node;
  } else {
    v.cluster.nodes = 1;
    v.cluster.gpus_per_node = world;
  }
  FieldReader meas(c["measured"], where + " field 'measured'");
  auto positive = [&](const char* key) {
    const double x = meas.Num(key);
    if (meas.ok() && !(std::isfinite(x) && x > 0))
      meas.Fail(std::string("'") + key + "' must be a positive finite number, is " + std::to_string(x));
    return x;
  };
  char buf[160];
  if (meas.Has("iteration_time_s")) {
    v.measured_s = positive("iteration_time_s");
  } else if (meas.Has("tokens_per_s_per_gpu")) {
    const double tps = positive("tokens_per_s_per_gpu");
    if (meas.ok()) {
      v.measured_s = static_cast<double>(k.global_batch) * k.seq_length / (tps * v.cluster.world());
      std::snprintf(buf, sizeof buf, "from %.0f tokens/s per GPU", tps);
      v.measured_from = buf;
    }
  } else if (meas.Has("tflops_per_gpu")) {
    v.measured_tflops_per_gpu = positive("tflops_per_gpu");
    const std::string conv = meas.StrOr("flops_convention", "");
    if (conv == "model") v.measured_kind = MeasuredKind::kModelTflopsPerGpu;
    else if (conv == "model_causal") v.measured_kind = MeasuredKind::kModelCausalTflopsPerGpu;
    else if (conv == "hardware") v.measured_kind = MeasuredKind::kHardwareTflopsPerGpu;
    else meas.Fail("'tflops_per_gpu' needs 'flops_convention': \"model\" (no recompute), \"model_causal\" "
                   "(no recompute, causal attention at half its square, as Megatron-LM logs) or \"hardware\" "
                   "(recompute forward counted), got '" + conv + "'");
    std::snprintf(buf, sizeof buf, "from %.0f %s TFLOP/s per GPU", v.measured_tflops_per_gpu, conv.c_str());
    v.measured_from = buf;
  } else {
    meas.Fail("needs 'iteration_time_s', 'tokens_per_s_per_gpu' or 'tflops_per_gpu'");
  }
  // The allocator's peak, GiB (2^30 bytes; Megatron-LM logs MB = 2^20 bytes).
  if (meas.Has("peak_allocated_gib")) v.measured_peak_allocated_bytes = positive("peak_allocated_gib") * 1073741824.0;
  // The other measures, read only when the first of the list is absent, and
  // the informational mfu and derived (how a time was worked out).
  meas.RejectUnknown({"tokens_per_s_per_gpu", "tflops_per_gpu", "flops_convention", "mfu", "derived"});
  if (!meas.ok()) return meas.status();
  if (v.measured_kind == MeasuredKind::kHardwareTflopsPerGpu && !k.recompute)
    return InvalidArgument(where + ": hardware TFLOP/s need the plan's 'recompute' to convert to a time");
  // Precision: bf16 (fp16, "mixed": same bytes and Tensor Core rate) or fp8
  // (Transformer-Engine FP8 GEMMs; the profile must have compute.fp8).
  std::string prec_name = top.StrOr("precision", "bf16");
  if (prec_name == "fp16" || prec_name == "mixed") prec_name = "bf16";  // same bytes and Tensor Core rate
  auto precision = ParsePrecision(prec_name);
  if (!precision.ok()) return InvalidArgument(where + ": " + precision.status().message());
  k.precision = *precision;
  if (k.fp8_recipe != Fp8Recipe::kDelayed && k.precision != Precision::kFp8)
    return InvalidArgument(where + ": plan 'fp8_recipe' is set but the case's 'precision' is not fp8");
  // MoE: "force_balanced" when the run spread tokens evenly over the experts
  // (Megatron's --moe-router-force-load-balancing, as NVIDIA's MoE benchmark
  // tables state); absent or "learned": the load-imbalance allowance.
  const std::string routing = top.StrOr("moe_routing", "learned");
  if (routing != "learned" && routing != "force_balanced")
    return InvalidArgument(where + ": 'moe_routing' = \"" + routing + "\": use \"learned\" or \"force_balanced\"");
  if (routing == "force_balanced" && !v.model.moe())
    return InvalidArgument(where + ": 'moe_routing' is set but the model has no experts");
  k.force_balanced_routing = routing == "force_balanced";
  v.note = top.StrOr("notes", "");
  // hardware's interconnect strings and the case's model_source are for the
  // reader; everything else a case holds is read above.
  hw.RejectUnknown({"intra_node", "inter_node"});
  if (!hw.ok()) return hw.status();
  top.RejectUnknown({"hardware", "model", "plan", "measured", "model_source"});
  if (!top.ok()) return top.status();
  return v;
}

StatusOr<std::vector<ValidationCase>> CasesFromJson(const json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
    return InvalidArgument("case file '" + path + "': expected {\"cases\": [...]}");
  std::vector<ValidationCase> out;
  for (size_t i = 0; i < j["cases"].size(); ++i) {
    auto c = OneCase(j["cases"][i], path, i);
    if (c.ok()) {
      out.push_back(std::move(*c));
      continue;
    }
    ValidationCase bad;  // kept, so the report lists it and the others are still scored
    const json& cj = j["cases"][i];
    bad.id = cj.is_object() && cj.contains("id") && cj["id"].is_string() ? cj["id"].get<std::string>()
                                                                         : "case" + std::to_string(i);
    bad.group = bad.id;
    bad.invalid = c.status().message();
    out.push_back(std::move(bad));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<ValidationCase>> JsonCasesFromText(const std::string& text, const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ParseJsonText(text, path));
  return CasesFromJson(j, path);
}

StatusOr<std::vector<ValidationCase>> ReadJsonCases(const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return CasesFromJson(j, path);
}

StatusOr<std::vector<ValidationCase>> ReadCases(const std::string& path) {
  const bool csv = path.size() >= 4 && path.substr(path.size() - 4) == ".csv";
  DT_ASSIGN_OR_RETURN(std::vector<ValidationCase> cases, csv ? ReadVtrainCsv(path) : ReadJsonCases(path));
  const std::string base = path.substr(path.find_last_of('/') + 1);
  for (ValidationCase& c : cases)
    if (c.source.empty()) c.source = base;
  return cases;
}

}  // namespace dt
