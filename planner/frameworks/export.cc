#include "planner/frameworks/export.h"

#include <nlohmann/json.hpp>

#include "planner/frameworks/megatron_args.h"

namespace dt {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

std::string Header(const char* what, const PlanFile& f) {
  return "# " + std::string(what) + " for " + f.model.name + " on " + Str(f.cluster.nodes) + " node(s) x " +
         Str(f.cluster.gpus_per_node) + ", dtplan plan: " + Describe(f.plan) + "\n";
}

bool Bf16(const PlanFile& f) { return f.cluster.device != "cpu"; }

// The loss kernel dtplan priced (PlanSpec::cross_entropy_fusion is
// Megatron-LM's switch) against what a framework without that switch runs.
std::string LossNote(const PlanSpec& p, const std::string& theirs) {
  return std::string("the loss was priced as ") +
         (p.cross_entropy_fusion ? "one fused pass over the logits (Megatron-LM's --cross-entropy-loss-fusion)"
                                 : "Megatron-LM's unfused cross-entropy (six PyTorch passes over the logits)") +
         "; " + theirs + ", not exactly the kernel priced (docs/simulator.md \"The loss\")";
}

StatusOr<FrameworkExport> ExportMegatron(const PlanFile& f) {
  FrameworkExport out;
  DT_ASSIGN_OR_RETURN(std::vector<CliFlag> flags, MegatronArgs(f.model, f.plan, Bf16(f), &out.notes));
  out.config = Header("Megatron-LM core_v0.14.0 arguments (pretrain_gpt.py)", f) + "MEGATRON_ARGS=(\n";
  for (const CliFlag& c : flags) {
    out.config += "    " + c.name;
    if (!c.value.empty()) {
      const bool quote = !c.words && c.value.find_first_of("|*() ") != std::string::npos;
      out.config += " " + (quote ? "\"" + c.value + "\"" : c.value);
    }
    out.config += "\n";
  }
  out.config += ")\n";
  out.launch = "# add your data, tokenizer, checkpoint and logging flags after \"${MEGATRON_ARGS[@]}\"\n" +
               TorchrunLaunchLines(f.cluster, "pretrain_gpt.py \"${MEGATRON_ARGS[@]}\"");
  if (f.plan.zero_stage >= 2)
    out.notes.push_back("Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS > 1 (unset it or set 8)");
  else if (f.plan.tp > 1 || f.plan.cp > 1)
    out.notes.push_back("set CUDA_DEVICE_MAX_CONNECTIONS=1 in the job's environment, as Megatron-LM's examples do");
  return out;
}

// torchtitan llama3 flavors (torchtitan/models/llama3/__init__.py, v0.2.2).
std::string TorchtitanFlavor(const ModelSpec& m) {
  struct Flavor { const char* name; int layers, hidden, heads, kv; };
  for (const Flavor& fl : {Flavor{"8B", 32, 4096, 32, 8}, Flavor{"70B", 80, 8192, 64, 8}, Flavor{"405B", 126, 16384, 128, 8}})
    if (m.num_layers == fl.layers && m.hidden == fl.hidden && m.heads == fl.heads && m.kv_heads == fl.kv) return fl.name;
  return "";
}

std::string TomlList(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
  return s + "]";
}

StatusOr<FrameworkExport> ExportTorchtitan(const PlanFile& f) {
  const ModelSpec& m = f.model;
  const PlanSpec& p = f.plan;
  DT_RETURN_IF_ERROR(CheckExpressible(Framework::kTorchtitan, m, p));
  FrameworkExport out;
  out.config_file = "job.toml";
  std::string& t = out.config;
  t = Header("torchtitan v0.2.2 job config", f);
  const std::string flavor = TorchtitanFlavor(m);
  t += "[model]\nname = \"llama3\"\nflavor = \"" + (flavor.empty() ? m.name : flavor) + "\"\n";
  if (flavor.empty())
    out.notes.push_back("torchtitan has no llama3 flavor of this shape: register \"" + m.name +
                        "\" in torchtitan/models/llama3/__init__.py (dim=" + Str(m.hidden) + ", n_layers=" +
                        Str(m.num_layers) + ", n_heads=" + Str(m.heads) + ", n_kv_heads=" + Str(m.kv_heads) +
                        ", FFN width " + Str(m.ffn_hidden) + ", vocab " + Str(m.vocab) + ")");
  else
    out.notes.push_back("flavor " + flavor + " takes its FFN width and vocabulary from torchtitan's own args and tokenizer");
  // Batch: without PP, torchtitan accumulates global / (local x dp) steps;
  // with PP, local_batch_size is split into microbatches.
  const int64_t local = p.pp > 1 ? static_cast<int64_t>(p.micro_batch) * p.num_microbatches : p.micro_batch;
  t += "\n[training]\nlocal_batch_size = " + Str(local) + "\nglobal_batch_size = " + Str(p.global_batch()) +
       "\nseq_len = " + Str(p.seq_length) + "\nmixed_precision_param = \"" +
       (Bf16(f) ? "bfloat16" : "float32") + "\"\n";
  const bool fsdp = p.zero_stage >= 2;
  t += "\n[parallelism]\ndata_parallel_replicate_degree = " + Str(fsdp ? 1 : p.dp) +
       "\ndata_parallel_shard_degree = " + Str(fsdp ? p.dp : 1) + "\n";
  if (fsdp) t += std::string("fsdp_reshard_after_forward = \"") + (p.zero_stage == 3 ? "always" : "never") + "\"\n";
  t += "tensor_parallel_degree = " + Str(p.tp) + "\n";
  t += "context_parallel_degree = " + Str(p.cp) + "\n";
  t += "pipeline_parallel_degree = " + Str(p.pp) + "\n";
  if (p.pp > 1) {
    const char* sched = p.schedule == Schedule::kGpipe ? "GPipe" : p.schedule == Schedule::k1F1B ? "1F1B" : "Interleaved1F1B";
    t += std::string("pipeline_parallel_schedule = \"") + sched + "\"\n";
    t += "pipeline_parallel_microbatch_size = " + Str(p.micro_batch) + "\n";
    t += "module_fqns_per_model_part = [\n";
    for (int c = 0; c < p.num_chunks(); ++c) {
      std::vector<std::string> names;
      if (c == 0) names.push_back("tok_embeddings");
      for (int l = p.ChunkFirstLayer(c); l < p.ChunkFirstLayer(c) + p.layers_per_chunk[c]; ++l)
        names.push_back("layers." + Str(l));
      if (c == p.num_chunks() - 1) names.push_back("norm"), names.push_back("output");
      t += "    " + TomlList(names) + ",\n";
    }
    t += "]\n";
  }
  t += "\n[activation_checkpoint]\nmode = \"";
  t += p.recompute == Recompute::kNone ? "none" : p.recompute == Recompute::kFull ? "full" : "selective";
  t += "\"\n";
  if (p.recompute == Recompute::kSelective) {
    t += "selective_ac_option = \"op\"\n";
    out.notes.push_back("selective recompute maps to torchtitan's per-op selective checkpointing (\"op\"), "
                        "which saves matmul outputs and recomputes the rest: close to, not the same as, the "
                        "attention-core recompute dtplan priced");
    if (p.recompute_modules != kDefaultRecomputeModules)
      out.notes.push_back("recompute_modules [" + RecomputeModulesString(p.recompute_modules, ", ") +
                          "] (Megatron-LM's per-module selective recompute) has no torchtitan counterpart: its "
                          "per-op policy chooses by operator, not by module; the step time and memory of this "
                          "export are not the ones dtplan priced");
  }
  if (p.recompute == Recompute::kFull && p.recompute_num_layers > 0)
    out.notes.push_back("full recompute of the first " + Str(p.recompute_num_layers) +
                        " layers of each chunk (Megatron-LM's block method) has no torchtitan counterpart: mode "
                        "\"full\" checkpoints every layer, so this export recomputes more and stores less than "
                        "dtplan priced");
  if (p.tp_comm_overlap)
    out.notes.push_back("TP communication overlap was priced as Transformer Engine's userbuffers (Megatron-LM's "
                        "--tp-comm-overlap); torchtitan's nearest is parallelism.enable_async_tensor_parallel = true "
                        "(with compile), a different implementation whose overlap dtplan has not priced");
  if (p.zero_stage == 2)
    out.notes.push_back("ZeRO-2 maps to FSDP with fsdp_reshard_after_forward = \"never\" (parameters stay gathered "
                        "from forward to backward)");
  out.notes.push_back(LossNote(p, "torchtitan's loss is PyTorch's cross_entropy on the logits cast to fp32 (a "
                                  "log-softmax pass and its backward)"));
  out.launch = TorchrunLaunchLines(f.cluster, "-m torchtitan.train --job.config_file job.toml");
  return out;
}

StatusOr<FrameworkExport> ExportDeepSpeed(const PlanFile& f) {
  const ModelSpec& m = f.model;
  const PlanSpec& p = f.plan;
  DT_RETURN_IF_ERROR(CheckExpressible(Framework::kDeepSpeed, m, p));
  FrameworkExport out;
  out.config_file = "ds_config.json";
  json j;
  j["train_batch_size"] = p.global_batch();
  j["train_micro_batch_size_per_gpu"] = p.micro_batch;
  j["gradient_accumulation_steps"] = p.num_microbatches;
  j["zero_optimization"] = {{"stage", p.zero_stage}};
  // Reduce-scatter / all-reduce in buckets during the backward (ZeRO without
  // a pipeline; CheckExpressible refused the overlap elsewhere).
  if (p.zero_stage >= 1 && p.pp == 1) j["zero_optimization"]["overlap_comm"] = p.overlap_grad_reduce;
  j["bf16"] = {{"enabled", Bf16(f)}};
  if (p.tp > 1) j["tensor_parallel"] = {{"autotp_size", p.tp}};
  out.config = j.dump(2) + "\n";
  if (p.pp > 1) {
    std::string split;
    for (int s = 0; s < p.pp; ++s) split += (s ? ", " : "") + Str(p.StageLayers(s));
    out.notes.push_back("pipeline: build the model as deepspeed.pipe.PipelineModule(layers=..., num_stages=" +
                        Str(p.pp) + ") with layers per stage [" + split +
                        "] (partition_method=\"uniform\" may split them differently: check its log)");
    if (p.recompute == Recompute::kFull && p.recompute_num_layers == 0)
      out.notes.push_back("full recompute: PipelineModule(..., activation_checkpoint_interval=1)");
  } else if (p.recompute == Recompute::kFull && p.recompute_num_layers == 0) {
    out.notes.push_back("full recompute: wrap each transformer layer in deepspeed.checkpointing.checkpoint");
  }
  if (p.recompute == Recompute::kFull && p.recompute_num_layers > 0)
    out.notes.push_back("full recompute of the first " + Str(p.recompute_num_layers) +
                        " layers of each stage only: wrap just those transformer layers in "
                        "deepspeed.checkpointing.checkpoint (model code, no config key)");
  if (p.tp_comm_overlap)
    out.notes.push_back("TP communication overlap (priced as Transformer Engine's userbuffers) has no DeepSpeed "
                        "config key: AutoTP runs the collectives in line, so this export is slower than dtplan "
                        "priced");
  if (p.recompute == Recompute::kSelective && p.recompute_modules == kDefaultRecomputeModules)
    out.notes.push_back("selective recompute (attention core only) is model code in DeepSpeed: checkpoint the "
                        "softmax(QK^T)V block, not the whole layer");
  else if (p.recompute == Recompute::kSelective)
    out.notes.push_back("selective recompute of [" + RecomputeModulesString(p.recompute_modules, ", ") +
                        "] is model code in DeepSpeed: wrap each of those blocks of every layer in "
                        "deepspeed.checkpointing.checkpoint (no config key)");
  out.notes.push_back(LossNote(p, "DeepSpeed runs the model code's loss"));
  if (p.tp > 1) out.notes.push_back("tensor parallelism is DeepSpeed AutoTP training (tensor_parallel.autotp_size, DeepSpeed >= 0.16.4)");
  out.notes.push_back("train_batch_size = micro batch x gradient accumulation x data-parallel size (" +
                      Str(p.micro_batch) + " x " + Str(p.num_microbatches) + " x " + Str(p.dp) + ")");
  const ClusterSpec& c = f.cluster;
  out.launch = "deepspeed --num_nodes " + Str(c.nodes) + " --num_gpus " + Str(c.gpus_per_node) +
               " --hostfile hostfile train.py --deepspeed --deepspeed_config ds_config.json\n" +
               TorchrunLaunchLines(c, "train.py --deepspeed --deepspeed_config ds_config.json");
  return out;
}

}  // namespace

std::string TorchrunLaunchLines(const ClusterSpec& c, const std::string& entry) {
  const std::string n = Str(c.nodes), g = Str(c.gpus_per_node);
  const std::string torchrun = "torchrun --nnodes " + n + " --nproc-per-node " + g +
                               " --rdzv-backend c10d --rdzv-endpoint \"$MASTER_ADDR:29500\" " + entry;
  std::string s;
  s += "# torchrun, on every node (MASTER_ADDR = the first node's address):\n" + torchrun + "\n";
  s += "# Slurm, one torchrun per node:\nexport MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
       "srun --nodes " + n + " --ntasks-per-node 1 " + torchrun + "\n";
  s += "# Open MPI, one torchrun per node (hostfile lists the nodes):\nmpirun -np " + n +
       " --npernode 1 --hostfile hostfile -x MASTER_ADDR " + torchrun + "\n";
  return s;
}

StatusOr<FrameworkExport> ExportPlan(Framework f, const PlanFile& file) {
  DT_RETURN_IF_ERROR(Validate(file.plan, file.model, "the plan"));
  if (file.plan.world() != file.cluster.world())
    return InvalidArgument("the plan uses " + Str(file.plan.world()) + " ranks but its cluster has " +
                           Str(file.cluster.world()) + "; replan");
  switch (f) {
    case Framework::kMegatron: return ExportMegatron(file);
    case Framework::kTorchtitan: return ExportTorchtitan(file);
    case Framework::kDeepSpeed: return ExportDeepSpeed(file);
    case Framework::kAny: break;
  }
  return InvalidArgument("--to: name a framework (megatron, torchtitan or deepspeed)");
}

}  // namespace dt
