// dtplan --from-megatron: price a Megatron-LM job's own configuration
// (planner/frameworks/megatron_args.h) next to the best plan the search
// finds for the same model, batch and cluster, and say by how much the best
// is faster.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "planner/cli/commands.h"
#include "planner/cli/report.h"
#include "planner/cli/setup.h"
#include "planner/cost/comm_cost.h"
#include "planner/frameworks/export.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/simulate.h"
#include "planner/search/search.h"

namespace dt::cli {
namespace {

StatusOr<std::string> ArgvText(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  std::ifstream in(arg.substr(1));
  if (!in) return NotFound("--from-megatron: cannot open '" + arg.substr(1) + "': check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Line(const char* label, const PlanSpec& p, const Prediction& pr) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-18s %-50s step %8.3f s  %10.0f tokens/s  MFU %4.1f%%  peak %6s of %s GiB%s\n",
                label, Describe(p).c_str(), pr.step_time_s, pr.tokens_per_s, 100 * pr.mfu,
                Gib(pr.peak_memory_bytes).c_str(), Gib(pr.capacity_bytes).c_str(), pr.fits ? "" : "  DOES NOT FIT");
  return buf;
}

}  // namespace

int RunFromMegatron(const PlanOptions& o) {
  if (!o.common.model.empty())
    return Fail("--from-megatron takes the model from the Megatron-LM flags; drop --model");
  // The job's own flags fix these; a second value on dtplan's command line
  // would be ignored for the job, so it is refused.
  if (o.seq_length_set)
    return Fail("--from-megatron takes the sequence length from the job's --seq-length; drop dtplan's "
                "--seq-length (or edit the job's flag)");
  if (o.global_batch_set)
    return Fail("--from-megatron takes the global batch from the job's --global-batch-size; drop dtplan's "
                "--global-batch (or edit the job's flag)");
  if (!o.attention.empty())
    return Fail("--from-megatron takes the attention core from the job's --attention-backend; drop --attention "
                "(or edit the job's flag)");
  if (!o.cross_entropy.empty())
    return Fail("--from-megatron takes the loss kernel from the job's --cross-entropy-loss-fusion; drop "
                "--cross-entropy (or edit the job's flag)");
  auto text = ArgvText(o.from_megatron);
  if (!text.ok()) return Fail(text.status().message());
  auto words = SplitCommandLine(*text);
  if (!words.ok()) return Fail("--from-megatron: " + words.status().message());
  const int world = o.cluster_set ? o.common.nodes * o.common.gpus : 0;
  auto job = ImportMegatron(*words, world, "megatron-job");
  if (!job.ok()) return Fail("--from-megatron: " + job.status().message());
  ClusterSpec cluster;
  cluster.device = o.common.device;
  if (o.cluster_set) {
    cluster.nodes = o.common.nodes;
    cluster.gpus_per_node = o.common.gpus;
  } else {
    cluster.nodes = job->launcher_nodes;
    cluster.gpus_per_node = job->launcher_gpus_per_node;
  }
  if (job->bf16 != (cluster.device != "cpu"))
    return Fail(job->bf16 ? "--from-megatron: the job trains in bf16/fp16 but --device is cpu (fp32); use --device gpu"
                          : "--from-megatron: the job trains in fp32 (no --bf16 or --fp16); dtplan's GPU profiles "
                            "price bf16 mixed precision: add --bf16 to the pasted flags");
  auto hw = LoadProfileFor(o.common.profile, cluster.device, cluster.gpus_per_node);
  if (!hw.ok()) return Fail(hw.status().message());
  if (Status s = CheckClusterFitsProfile(cluster, *hw); !s.ok()) return Fail(s.message());
  auto framework = ParseFramework(o.framework.empty() ? "megatron" : o.framework);
  if (!framework.ok()) return Fail("--framework: " + framework.status().message());

  ModelSpec m = job->model;
  PlanSpec mine = job->plan;
  // Megatron-LM's fp32 main gradients, unless the job set them (--main-grads-dtype bf16).
  const int job_grad_bytes = job->plan.grad_bytes;
  mine.grad_bytes = job_grad_bytes > 0 ? job_grad_bytes : FrameworkGradBytes(Framework::kMegatron, job->bf16);
  // --attention-kernel cudnn: the job's attention is priced as the best plan's is
  // (a job on the unfused core is refused by plan validation in SimulatePlan).
  // A job with --attention-backend fused chose cuDNN's kernel itself.
  if (mine.cudnn_attention && o.dims.attention_kernel == "default")
    return Fail("--attention-kernel default: the job selects cuDNN's fused attention itself (--attention-backend "
                "fused); drop --attention-kernel, or change the job's flag to auto or flash");
  if (o.dims.attention_kernel == "cudnn") mine.cudnn_attention = true;
  if (mine.cudnn_attention) {
    if (Status s = CheckCudnnAttentionCurve(*hw); !s.ok())
      return Fail(o.dims.attention_kernel == "cudnn"
                      ? "--attention-kernel cudnn: " + s.message()
                      : "the job's --attention-backend fused (cuDNN's kernel) cannot be priced: profile '" + hw->name +
                            "' has no cuDNN attention curve; use --profile h100, or change the job's flag to auto "
                            "or flash (priced at the profile's default rate)");
  }
  auto mine_pred = SimulatePlan(m, cluster, mine, *hw);
  if (!mine_pred.ok()) return Fail("--from-megatron: " + mine_pred.status().message());

  SearchConstraints k;
  k.seq_length = m.seq_length;
  k.global_batch = mine.global_batch();
  k.flash_attention = mine.flash_attention;
  k.cross_entropy_fusion = mine.cross_entropy_fusion;  // the job's loss kernel
  k.dropout = mine.dropout;
  k.precision = mine.precision;  // --fp8-format: the best plan is searched in FP8 too
  k.moe_dispatcher = mine.moe_dispatcher;  // --moe-enable-deepep: the best plan uses DeepEP too
  k.moe_a2a_overlap = mine.moe_a2a_overlap;  // and combined 1F1B when the job has it
  k.moe_shared_expert_overlap = mine.moe_shared_expert_overlap;  // and the shared-expert overlap
  k.delay_wgrad_compute = mine.delay_wgrad_compute;
  k.overlap_dispatch_backward_wgrad = mine.overlap_dispatch_backward_wgrad;
  k.moe_capacity_factor = mine.moe_capacity_factor;  // and the job's expert capacity (token dropping)
  k.moe_pad_to_capacity = mine.moe_pad_to_capacity;
  k.moe_router_cuda_graph = mine.moe_router_cuda_graph;  // and the router's CUDA graphs
  k.tp_comm_overlap = mine.tp_comm_overlap;  // and TP overlap wherever the plan has tp > 1 and SP
  k.overlap_grad_reduce = mine.overlap_grad_reduce;  // and the job's gradient-reduction overlap
  k.overlap_p2p_comm = mine.overlap_p2p_comm;  // and its pipeline-send overlap
  k.fp8_param_gather = mine.fp8_param_gather;  // and FP8 parameters
  k.fp8_recipe = mine.fp8_recipe;  // and the job's FP8 scaling recipe
  k.adam_moment_bytes = mine.adam_moment_bytes;  // and the job's Adam moment dtype
  // --recompute-modules: the best plan's selective recompute uses the job's
  // modules too (searched plans without recompute, or with full, ignore them).
  if (mine.recompute == Recompute::kSelective) k.recompute_modules = mine.recompute_modules;
  if (mine.recompute == Recompute::kFull) k.recompute_num_layers = mine.recompute_num_layers;
  k.framework = *framework;
  k.grad_bytes = job_grad_bytes > 0 && *framework == Framework::kMegatron ? job_grad_bytes
                                                                          : FrameworkGradBytes(*framework, job->bf16);
  if (Status s = ApplyDimensions(o.dims, &k); !s.ok()) return Fail(s.message());
  k.cudnn_attention = mine.cudnn_attention;  // the best plan runs the job's attention kernel
  SearchOptions so;
  so.top = o.top;
  so.threads = o.common.threads;
  auto result = SearchPlans(m, cluster, *hw, k, so);
  if (!result.ok()) return Fail(result.status().message());

  const RankedPlan* best = result->top.empty() ? nullptr : &result->top[0];
  if (!best && (!o.trace.empty() || !o.report.empty()))
    return Fail(std::string(o.trace.empty() ? "--report" : "--trace") +
                ": no plan the search considered fits, so there is no best plan to trace; your config " +
                (mine_pred->fits ? "fits" : "does not fit either"));
  if (best) {
    auto written = WriteBestPlanFiles(m, cluster, *hw, *result, *best, o.out, o.trace, o.report);
    if (!written.ok()) return Fail(written.status().message());
  }
  const double ratio = best ? mine_pred->step_time_s / best->prediction.step_time_s : 0.0;
  const Framework to = *framework == Framework::kAny ? Framework::kMegatron : *framework;

  if (o.common.json) {
    json j = SearchToJson(m, cluster, *hw, k, *result);
    j["from_megatron"] = {{"plan", ToJson(mine)}, {"prediction", ToJson(*mine_pred)},
                          {"global_batch", mine.global_batch()}};
    if (best) {
      j["from_megatron"]["best_speedup"] = ratio;  // your step / the best plan's
      j["out"] = o.out;
      if (!o.trace.empty()) j["trace"] = o.trace;
      if (!o.report.empty()) j["report"] = o.report;
    }
    json ignored = json::array(), notes = json::array();
    for (const auto& n : job->ignored) ignored.push_back(n);
    for (const auto& n : job->notes) notes.push_back(n);
    j["from_megatron"]["ignored_flags"] = ignored;
    j["from_megatron"]["notes"] = notes;
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::cout << FormatSearch(m, cluster, *hw, k, *result) << "\n";
  std::cout << "imported from Megatron-LM: " << m.num_layers << " layers, hidden " << m.hidden << ", "
            << m.heads << " heads" << (m.kv_heads != m.heads ? " (" + std::to_string(m.kv_heads) + " KV)" : "")
            << ", " << ToString(m.family) << " family, " << m.TotalParams() / 1e9 << "B parameters, "
            << m.seq_length << " tokens per sequence, global batch " << mine.global_batch() << "\n";
  std::cout << Line("your config:", mine, *mine_pred);
  if (!best) {
    std::cout << "no plan the search considered fits; your config " << (mine_pred->fits ? "fits" : "does not fit either") << "\n";
  } else {
    std::cout << Line("best plan found:", best->plan, best->prediction);
    if (!mine_pred->fits) {
      std::cout << "your config does not fit in memory (" << Gib(mine_pred->peak_memory_bytes) << " of "
                << Gib(mine_pred->capacity_bytes) << " GiB); the best plan does\n";
    } else if (ratio > 1.0005) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "the best plan is %.2fx faster (%.1f%% less time per step)\n", ratio,
                    100 * (1 - 1 / ratio));
      std::cout << buf;
    } else {
      std::cout << "your config is as fast as the best plan found (within 0.05%)\n";
    }
    std::cout << "wrote " << o.out;
    if (!o.trace.empty()) std::cout << " and trace " << o.trace << " (open in ui.perfetto.dev)";
    if (!o.report.empty()) std::cout << " and report " << o.report;
    std::cout << "; its " << DisplayName(to) << (to == Framework::kMegatron ? " flags" : " config")
              << ": dtplan export --plan " << o.out << " --to "
              << ToString(to) << "\n";
  }
  if (!job->ignored.empty()) {
    std::string names;
    for (const auto& n : job->ignored) names += (names.empty() ? "" : " ") + n;
    std::cerr << "dtplan: note: ignored (no effect on memory or step time): " << names << "\n";
  }
  for (const auto& n : job->notes) std::cerr << "dtplan: note: " << n << "\n";
  return 0;
}

}  // namespace dt::cli
