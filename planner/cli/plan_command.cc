// dtplan (no subcommand): search the plan space and print the ranking.
#include <cstdio>
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/cli/html_report.h"
#include "planner/cli/report.h"
#include "planner/cli/setup.h"
#include "planner/lower/simulate.h"
#include "planner/search/search.h"
#include "planner/spec/capabilities.h"

namespace dt::cli {

int Fail(const std::string& message) {
  std::cerr << "dtplan: error: " << message << "\n";
  return 2;
}

Status ApplyDimensions(const DimensionOptions& d, SearchConstraints* k) {
  k->dp = d.dp; k->tp = d.tp; k->pp = d.pp; k->cp = d.cp; k->vpp = d.vpp; k->ep = d.ep; k->etp = d.etp;
  k->micro_batch = d.mbs; k->zero_stage = d.zero;
  k->sequence_parallel = d.sp;
  if (!d.precision.empty()) {
    auto p = ParsePrecision(d.precision);
    if (!p.ok()) return InvalidArgument("--precision: " + p.status().message());
    k->precision = *p;
  }
  if (!d.moe_dispatcher.empty()) {
    auto m = ParseMoeDispatcher(d.moe_dispatcher);
    if (!m.ok()) return InvalidArgument("--moe-dispatcher: " + m.status().message());
    k->moe_dispatcher = *m;
  }
  if (!d.fp8_recipe.empty()) {
    auto r = ParseFp8Recipe(d.fp8_recipe);
    if (!r.ok()) return InvalidArgument("--fp8-recipe: " + r.status().message());
    k->fp8_recipe = *r;
  }
  k->moe_a2a_overlap = d.moe_a2a_overlap;
  k->moe_shared_expert_overlap = d.moe_shared_expert_overlap;
  k->delay_wgrad_compute = d.delay_wgrad_compute;
  k->overlap_dispatch_backward_wgrad = d.overlap_dispatch_backward_wgrad;
  k->moe_capacity_factor = d.moe_capacity_factor;
  k->moe_pad_to_capacity = d.moe_pad_to_capacity;
  k->tp_comm_overlap = d.tp_comm_overlap;
  k->moe_router_cuda_graph = d.moe_router_cuda_graph;
  k->cudnn_attention = d.attention_kernel == "cudnn";
  k->overlap_grad_reduce = !d.no_overlap_grad_reduce;
  k->overlap_p2p_comm = !d.no_overlap_p2p_comm;
  k->fp8_param_gather = d.fp8_param_gather;
  if (!d.adam_moments.empty()) k->adam_moment_bytes = d.adam_moments == "bf16" ? 2 : 0;
  if (d.sp_on) k->sequence_parallel = true;
  if (d.sp_off) k->sequence_parallel = false;
  if (!d.schedule.empty()) {
    auto s = ParseSchedule(d.schedule);
    if (!s.ok()) return InvalidArgument("--schedule: " + s.status().message());
    k->schedule = *s;
  }
  if (!d.recompute.empty()) {
    auto r = ParseRecompute(d.recompute);
    if (!r.ok()) return InvalidArgument("--recompute: " + r.status().message());
    k->recompute = *r;
  }
  if (!d.recompute_modules.empty()) {
    auto mods = ParseRecomputeModuleList(d.recompute_modules);
    if (!mods.ok()) return InvalidArgument("--recompute-modules: " + mods.status().message());
    if (!k->recompute || *k->recompute != Recompute::kSelective)
      return InvalidArgument("--recompute-modules chooses the modules of selective recompute: add --recompute "
                             "selective");
    k->recompute_modules = *mods;
  }
  if (d.recompute_layers > 0) {
    if (!k->recompute || *k->recompute != Recompute::kFull)
      return InvalidArgument("--recompute-layers " + std::to_string(d.recompute_layers) +
                             " chooses how many layers of each chunk full recompute covers: add --recompute full");
    k->recompute_num_layers = d.recompute_layers;
  }
  return Status::Ok();
}

StatusOr<Prediction> WriteBestPlanFiles(const ModelSpec& m, const ClusterSpec& cluster, const HardwareProfile& hw,
                                        const SearchResult& r, const RankedPlan& best, const std::string& out,
                                        const std::string& trace, const std::string& report) {
  dt::SimulateOptions sim_opt;
  sim_opt.trace_path = trace.empty() && !report.empty() ? report + ".trace.tmp" : trace;
  // The search already simulated the best plan; simulate it again only
  // to write its trace (the same deterministic run, with task names).
  StatusOr<Prediction> pred = best.prediction;
  if (!sim_opt.trace_path.empty()) pred = SimulatePlan(m, cluster, best.plan, hw, sim_opt);
  if (!pred.ok()) return pred.status();
  if (!report.empty()) {
    auto t = ReadJsonFile(sim_opt.trace_path);
    if (trace.empty()) std::remove(sim_opt.trace_path.c_str());
    if (!t.ok()) return Status(t.status().code(), "--report: " + t.status().message());
    Status w = WriteTextFile(report, HtmlReport(m, cluster, hw, r, best.plan, *pred, *t));
    if (!w.ok()) return Status(w.code(), "--report: " + w.message());
  }
  Status w = WriteJsonFile(out, PlanFileJson(m, cluster, hw, best.plan, *pred));
  if (!w.ok()) return Status(w.code(), "--out: " + w.message());
  return pred;
}

int RunPlan(const PlanOptions& o) {
  auto setup = LoadSetup(o.common);
  if (!setup.ok()) return Fail(setup.status().message());
  const auto& [model, cluster, hw, setup_note] = *setup;

  if (o.global_batch_set && o.global_batch < 1)
    return Fail("--global-batch " + std::to_string(o.global_batch) +
                " must be >= 1 (sequences per step); omit it for 8 per device");
  if (o.seq_length_set && o.seq_length < 1)
    return Fail("--seq-length " + std::to_string(o.seq_length) + " must be >= 1 (tokens per sequence); omit it for the model's " +
                std::to_string(model.seq_length));
  auto framework = ParseFramework(o.framework);
  if (!framework.ok()) return Fail("--framework: " + framework.status().message());
  SearchConstraints k;
  k.seq_length = o.seq_length > 0 ? o.seq_length : model.seq_length;
  k.global_batch = o.global_batch > 0 ? o.global_batch : 8LL * cluster.world();
  k.framework = *framework;
  const bool bf16 = o.dims.precision.empty() ? hw.device.dtype != "fp32" : o.dims.precision != "fp32";
  k.grad_bytes = FrameworkGradBytes(*framework, bf16);
  k.flash_attention = o.attention.empty() ? cluster.device != "cpu" : o.attention == "flash";
  k.cross_entropy_fusion = o.cross_entropy != "unfused";
  k.dropout = true;  // a model that trains with dropout is planned with it (every runtime device prices it)
  if (Status s = ApplyDimensions(o.dims, &k); !s.ok()) return Fail(s.message());
  if (k.cudnn_attention && cluster.device != "cpu") {
    if (Status s = CheckCudnnAttentionCurve(hw); !s.ok()) return Fail("--attention-kernel cudnn: " + s.message());
  }
  if (k.precision == Precision::kFp8 && cluster.device == "cpu")
    return Fail("--precision fp8 needs GPUs with FP8 Tensor Cores; plan CPU ranks with --precision fp32 or bf16");
  if (Status s = CheckSequenceFits(model, k.seq_length); !s.ok()) return Fail("--seq-length " + s.message());
  ModelSpec m = model;
  m.seq_length = k.seq_length;

  SearchOptions so;
  so.top = o.top;
  so.threads = o.common.threads;
  auto result = SearchPlans(m, cluster, hw, k, so);
  if (!result.ok()) return Fail(result.status().message());
  const SearchResult& r = *result;

  if (!setup_note.empty()) std::cerr << "dtplan: note: " << setup_note << "\n";
  if (o.common.json) {
    std::cout << SearchToJson(m, cluster, hw, k, r).dump(2) << "\n";
  } else {
    std::cout << FormatSearch(m, cluster, hw, k, r);
  }
  if (r.top.empty()) {
    std::string msg = "no plan fits in memory on " + std::to_string(cluster.world()) + " devices";
    if (r.closest) {
      const Prediction& p = r.closest->prediction;
      msg += "; closest: " + Describe(r.closest->plan) + " needs " + Gib(p.peak_memory_bytes) +
             " GiB per device of " + Gib(p.capacity_bytes) + " GiB (" +
             std::to_string(static_cast<int>(100 * (p.peak_memory_bytes / p.capacity_bytes - 1) + 0.5)) +
             "% over); add nodes (--nodes), lower --global-batch or --seq-length";
    } else {
      // Nothing was even a candidate: name the most common rejection.
      std::string why;
      int64_t most = 0;
      for (const auto* rej : {&r.grid_rejects, &r.plan_rejects})
        for (const auto& [reason, count] : *rej)
          if (count > most) most = count, why = reason;
      msg = "no plan for " + std::to_string(cluster.world()) + " devices passes the checks" +
            (why.empty() ? "" : " (" + why + ")") + "; relax the fixed dimensions";
    }
    return Fail(msg);
  }
  const RankedPlan& best = r.top[0];
  auto pred = WriteBestPlanFiles(m, cluster, hw, r, best, o.out, o.trace, o.report);
  if (!pred.ok()) return Fail(pred.status().message());
  if (!o.common.json) {
    if (Status ex = CheckExecutable(m, best.plan, RuntimeDeviceFor(cluster.device)); !ex.ok())
      std::cout << "note: dtrun cannot execute this plan yet: " << ex.message() << "\n";
    std::cout << "wrote " << o.out;
    if (!o.trace.empty()) std::cout << " and trace " << o.trace << " (open in ui.perfetto.dev)";
    if (!o.report.empty()) std::cout << " and report " << o.report;
    std::cout << "\n";
    std::string to;
    for (Framework f : {Framework::kMegatron, Framework::kTorchtitan, Framework::kDeepSpeed})
      if (CheckExpressible(f, m, best.plan).ok()) to += std::string(to.empty() ? "" : "|") + ToString(f);
    if (!to.empty()) std::cout << "run it in a framework: dtplan export --plan " << o.out << " --to " << to << "\n";
  }
  return 0;
}

}  // namespace dt::cli
