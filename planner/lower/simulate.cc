#include "planner/lower/simulate.h"

#include <algorithm>

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/flops.h"
#include "planner/lower/lowering.h"
#include "planner/lower/memory_params_for.h"
#include "planner/memory/param_count.h"
#include "planner/memory/stage_memory.h"
#include "planner/schedule/schedule.h"
#include "sim/chrome_trace.h"

namespace dt {
namespace {

void FillMemory(const ModelSpec& m, const PlanSpec& p, const HardwareProfile& hw, bool all_stages,
                Prediction* out) {
  const MemoryParams mp = MemoryParamsFor(hw, p);
  out->capacity_bytes = mp.capacity_bytes;
  out->stages.clear();
  out->peak_memory_bytes = 0;
  // Under an even split the first stages hold the most layers and the most
  // microbatches in flight, and the first/last stages hold the embedding and
  // LM head; so stages 0, 1 and pp-1 bound the peak (the search's fast path).
  // The accounted split (AccountedSplit) only takes layers from stages 0 and
  // pp-1, so stage 1 still bounds the middle ones.
  // Dense leading layers (DeepSeek's first_k_dense_replace) are lighter than
  // MoE layers, so the stages that hold them can weigh less than the first
  // stage without any: the fast path checks every stage up to that one.
  std::vector<int> stages;
  if (all_stages || p.pp <= 3) {
    for (int s = 0; s < p.pp; ++s) stages.push_back(s);
  } else {
    int first_moe_only = 1;
    while (first_moe_only < p.pp - 1 && DenseLayersOnStage(m, p, first_moe_only) > 0) ++first_moe_only;
    for (int s = 0; s <= first_moe_only; ++s) stages.push_back(s);
    if (first_moe_only < p.pp - 1) stages.push_back(p.pp - 1);
  }
  for (int s : stages) {
    StagePeak sp;
    sp.stage = s;
    sp.in_flight = InFlightMicrobatches(p, s);
    sp.memory = EstimateStageMemory(m, p, mp, s, sp.in_flight);
    out->peak_memory_bytes = std::max(out->peak_memory_bytes, sp.memory.total);
    out->stages.push_back(sp);
  }
  out->fits = out->peak_memory_bytes <= out->capacity_bytes;
}

}  // namespace

Prediction PredictMemory(const ModelSpec& m, const PlanSpec& p, const HardwareProfile& hw) {
  Prediction out;
  FillMemory(m, p, hw, /*all_stages=*/false, &out);
  return out;
}

double StepTimeLowerBound(const PlanSpec& p, const PlanCosts& c) {
  // Stage s cannot start before microbatch 0 has passed chunks 0..s-1, and
  // its last backward must still flow back through chunks s-1..0; in between
  // it is busy with all its own work (Megatron's bubble argument, made a
  // bound: exact for uniform 1F1B with free communication).
  // Combined 1F1B (moe_a2a_overlap) may hide every EP all-to-all: the
  // bound counts none of them.
  auto hidden = [&](const ChunkCost& k) { return p.moe_a2a_overlap ? k.ep_fwd + k.ep_bwd : 0.0; };
  double best = 0, before_f = 0, before_b = 0;
  for (int s = 0; s < p.pp; ++s) {
    double busy = 0;
    for (int ch = s; ch < p.num_chunks(); ch += p.pp) {
      const ChunkCost& k = c.chunks[ch];
      // ZeRO-2/3 gathers and reduce-scatters block the compute stream too.
      busy += p.num_microbatches * (k.fwd_compute + k.fwd_comm + k.bwd_compute + k.bwd_comm - hidden(k) +
                                    2 * k.zero3_gather + k.grad_sync_per_microbatch);
    }
    const double opt = c.optimizer[s];
    best = std::max(best, before_f + busy + std::max(opt, before_b));
    const ChunkCost& k = c.chunks[s];
    before_f += k.fwd_compute + k.fwd_comm - (p.moe_a2a_overlap ? k.ep_fwd : 0.0) + k.zero3_gather;
    before_b += k.bwd_compute + k.bwd_comm - (p.moe_a2a_overlap ? k.ep_bwd : 0.0) + k.zero3_gather +
                k.grad_sync_per_microbatch;
  }
  return best;
}

StatusOr<PricedPlan> PricePlan(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                               const HardwareProfile& profile) {
  HardwareProfile for_precision;
  const HardwareProfile& hw = ProfileForPrecision(profile, p.precision, &for_precision);
  DT_RETURN_IF_ERROR(Validate(p, m, "plan"));
  if (p.world() != c.world())
    return InvalidArgument("plan uses dp*tp*pp*cp = " + std::to_string(p.world()) +
                           " devices but the cluster has " + std::to_string(c.world()) +
                           "; change --nodes/--gpus or the plan");
  DT_RETURN_IF_ERROR(CheckClusterFitsProfile(c, hw));
  DT_RETURN_IF_ERROR(CheckPrecision(p.precision, m, hw));
  PricedPlan out;
  out.costs = ComputePlanCosts(m, c, p, hw);
  DT_ASSIGN_OR_RETURN(out.schedule, BuildSchedule(p));
  return out;
}

StatusOr<Prediction> SimulatePlan(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                                  const HardwareProfile& profile, const SimulateOptions& opt) {
  DT_ASSIGN_OR_RETURN(PricedPlan priced, PricePlan(m, c, p, profile));
  return SimulatePriced(m, c, p, profile, std::move(priced), opt);
}

StatusOr<Prediction> SimulatePriced(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                                    const HardwareProfile& profile, PricedPlan priced,
                                    const SimulateOptions& opt) {
  HardwareProfile for_precision;
  const HardwareProfile& hw = ProfileForPrecision(profile, p.precision, &for_precision);
  PlanCosts& costs = priced.costs;
  if (opt.free_communication) MakeCommunicationFree(&costs);
  const std::vector<ActionList>& schedule = priced.schedule;
  if (static_cast<int>(schedule.size()) != p.pp || static_cast<int>(costs.chunks.size()) != p.num_chunks())
    return InvalidArgument("simulate: " + std::to_string(schedule.size()) + " action lists and " +
                           std::to_string(costs.chunks.size()) + " chunk costs for a plan of pp " +
                           std::to_string(p.pp) + " and " + std::to_string(p.num_chunks()) +
                           " chunks (PricePlan of another plan?)");
  thread_local sim::Engine engine;
  const bool trace = !opt.trace_path.empty();
  Lowered lowered = LowerSchedule(schedule, p, costs, trace, &engine);
  DT_RETURN_IF_ERROR(engine.Run());

  Prediction out;
  out.step_time_s = engine.makespan();
  out.time = ReadBreakdown(lowered, engine);
  FillMemory(m, p, hw, /*all_stages=*/true, &out);
  out.tokens_per_s = out.step_time_s > 0 ? p.tokens_per_step() / out.step_time_s : 0;
  out.model_flops_per_step = StepFlops(m, p, /*with_recompute=*/false);
  out.hardware_flops_per_step = StepFlops(m, p, /*with_recompute=*/true);
  const double peak = hw.device.peak_flops * c.world();
  out.mfu = out.step_time_s > 0 && peak > 0 ? out.model_flops_per_step / (out.step_time_s * peak) : 0;
  out.approximated_points = costs.outside_profile;
  for (int s = 0; s < p.pp; ++s) {
    double wait = 0, kernels = 0;
    for (int ch = s; ch < p.num_chunks(); ch += p.pp) {
      wait += costs.chunks[ch].host_wait;
      kernels += costs.chunks[ch].fwd_compute + costs.chunks[ch].bwd_compute;
    }
    if (kernels > 0) out.host_wait_share = std::max(out.host_wait_share, wait / kernels);
  }
  if (trace) {
    DT_RETURN_IF_ERROR(sim::WriteChromeTrace(engine, opt.trace_path, CategoryNames()));
  }
  return out;
}

}  // namespace dt
