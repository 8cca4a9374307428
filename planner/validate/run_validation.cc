#include "planner/validate/run_validation.h"

#include <atomic>
#include <mutex>
#include <thread>

#include "planner/cost/flops.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"
#include "planner/validate/metrics.h"

namespace dt {
namespace {

// NIC efficiency assumed when a case states its inter-node line rate: the
// bundled profiles' achievable/line ratio (docs/profiles.md, 23/25 GB/s).
constexpr double kNicEfficiency = 0.92;

HardwareProfile Apply(const HardwareProfile& base, const HardwareOverride& o) {
  HardwareProfile hw = base;
  if (o.network) hw.network = *o.network;
  if (o.inter_node_Bps_per_node) {
    const double per_rank = kNicEfficiency * *o.inter_node_Bps_per_node / hw.network.gpus_per_node;
    for (auto& table : hw.network.collectives)
      for (auto& e : table.inter) e.busbw_Bps = per_rank * e.key;
  }
  return hw;
}

bool FullyFixed(const SearchConstraints& k) {
  return k.tp && k.pp && k.dp && k.micro_batch && k.schedule && k.recompute && k.zero_stage &&
         k.sequence_parallel && (k.vpp || (k.schedule && *k.schedule != Schedule::kInterleaved));
}

// The scored plan and what its prediction says (time, breakdown, memory).
void TakePrediction(const PlanSpec& p, const Prediction& pred, CaseResult* r) {
  r->plan = p;
  r->predicted_s = pred.step_time_s;
  r->breakdown = pred.time;
  r->fits = pred.fits;
  r->peak_memory_bytes = pred.peak_memory_bytes;
  r->capacity_bytes = pred.capacity_bytes;
  for (const StagePeak& s : pred.stages)
    if (s.stage == 0) r->predicted_allocated_bytes = AllocatedBytes(s.memory);
}

StatusOr<CaseResult> RunOne(const ValidationCase& c, const HardwareProfile& base, std::optional<bool> cudnn) {
  HardwareProfile hw = Apply(base, c.hardware);
  CaseResult r;
  r.id = c.id;
  r.group = c.group;
  r.measured_s = c.measured_s;
  r.measured_from = c.measured_from;
  SearchConstraints k = c.constraints;
  const Status curve = CheckCudnnAttentionCurve(hw);
  if (cudnn && k.flash_attention && curve.ok() && k.cudnn_attention != *cudnn) {
    k.cudnn_attention = *cudnn;
    r.attention_overridden = true;
  }
  if (k.cudnn_attention && !curve.ok())
    return InvalidArgument("case '" + c.id + "': plan.attention_kernel \"cudnn\": " + curve.message());
  ModelSpec m = c.model;
  m.seq_length = k.seq_length;
  if (FullyFixed(k)) {
    PlanSpec p;
    p.tp = *k.tp; p.pp = *k.pp; p.dp = *k.dp; p.cp = k.cp.value_or(1); p.vpp = k.vpp.value_or(1);
    p.micro_batch = *k.micro_batch;
    p.num_microbatches = static_cast<int>(k.global_batch / (static_cast<int64_t>(p.dp) * p.micro_batch));
    p.seq_length = k.seq_length;
    p.schedule = *k.schedule; p.recompute = *k.recompute;
    p.sequence_parallel = *k.sequence_parallel; p.zero_stage = *k.zero_stage;
    p.ep = k.ep.value_or(1);
    p.etp = k.etp && *k.etp != p.tp ? *k.etp : 0;
    CopyPlanSettings(k, &p);
    p.tp_comm_overlap = k.tp_comm_overlap;
    p.overlap_grad_reduce = k.overlap_grad_reduce;
    if (c.dp_bucket_bytes > 0) p.dp_bucket_bytes = c.dp_bucket_bytes;
    p.layers_per_chunk = c.layers_per_chunk.empty() ? EvenSplit(m.num_layers, p.pp * p.vpp) : c.layers_per_chunk;
    if (c.layers_per_chunk.empty() && k.split == SearchConstraints::Split::kAccounted) {
      std::vector<int> accounted = AccountedSplit(m, p.pp * p.vpp);
      if (!accounted.empty()) p.layers_per_chunk = std::move(accounted);
    }
    DT_RETURN_IF_ERROR(Validate(p, m, "case '" + c.id + "'"));
    DT_ASSIGN_OR_RETURN(Prediction pred, SimulatePlan(m, c.cluster, p, hw));
    TakePrediction(p, pred, &r);
  } else if (!c.layers_per_chunk.empty()) {
    return InvalidArgument("case '" + c.id + "': plan.pipeline_layout needs the plan fully fixed (tp, pp, dp, "
                           "microbatch_size, schedule, recompute, zero_stage or distributed_optimizer, "
                           "sequence_parallel, and virtual_stages for the interleaved schedule)");
  } else {
    SearchOptions so;
    so.top = 1;
    so.threads = 1;
    DT_ASSIGN_OR_RETURN(SearchResult s, SearchPlans(m, c.cluster, hw, k, so));
    r.searched = true;
    if (!s.top.empty()) {
      TakePrediction(s.top[0].plan, s.top[0].prediction, &r);
    } else if (s.closest) {  // nothing fits: score the plan closest to fitting
      DT_ASSIGN_OR_RETURN(Prediction pred, SimulatePlan(m, c.cluster, s.closest->plan, hw));
      TakePrediction(s.closest->plan, pred, &r);
      r.fits = false;
    } else {
      return Infeasible("case '" + c.id + "': no plan satisfies the case's constraints");
    }
  }
  if (c.measured_kind != MeasuredKind::kIterationTime) {
    const bool hardware = c.measured_kind == MeasuredKind::kHardwareTflopsPerGpu;
    const bool causal = c.measured_kind == MeasuredKind::kModelCausalTflopsPerGpu;
    r.measured_s = StepFlops(m, r.plan, hardware, causal) / (c.measured_tflops_per_gpu * 1e12 * r.plan.world());
  }
  r.error = (r.predicted_s - r.measured_s) / r.measured_s;
  r.measured_allocated_bytes = c.measured_peak_allocated_bytes;
  if (r.measured_allocated_bytes > 0)
    r.memory_error = (r.predicted_allocated_bytes - r.measured_allocated_bytes) / r.measured_allocated_bytes;
  return r;
}

}  // namespace

StatusOr<ValidationReport> RunValidation(const std::vector<ValidationCase>& cases,
                                         const ValidationOptions& opt) {
  std::map<std::string, HardwareProfile> profiles;
  for (const auto& c : cases) {
    if (!c.invalid.empty() || !c.not_modeled.empty()) continue;
    std::string name = opt.profile_override.empty() ? c.profile : opt.profile_override;
    if (profiles.count(name)) continue;
    if (opt.profiles != nullptr) {
      auto it = opt.profiles->find(name);
      if (it == opt.profiles->end()) return InvalidArgument("no profile '" + name + "' given for case '" + c.id + "'");
      profiles.emplace(name, it->second);
      continue;
    }
    DT_ASSIGN_OR_RETURN(HardwareProfile hw, LoadProfile(name));
    profiles.emplace(name, std::move(hw));
  }
  std::vector<StatusOr<CaseResult>> results(cases.size(), Status(StatusCode::kInternal, "not run"));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < cases.size(); i = next++) {
      const std::string& name = opt.profile_override.empty() ? cases[i].profile : opt.profile_override;
      if (cases[i].invalid.empty() && cases[i].not_modeled.empty())
        results[i] = RunOne(cases[i], profiles.at(name), opt.cudnn_attention);
    }
  };
  int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  ValidationReport rep;
  std::vector<double> pred, meas, mem_pred, mem_meas;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> groups;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto& r = results[i];
    if (!r.ok() || !cases[i].invalid.empty() || !cases[i].not_modeled.empty()) {
      CaseResult skip;
      skip.id = cases[i].id;
      skip.group = cases[i].group;
      skip.measured_s = cases[i].measured_s;
      skip.invalid = cases[i].not_modeled.empty();  // bad input, or a plan that cannot be priced
      skip.skipped = !cases[i].invalid.empty()       ? cases[i].invalid
                     : !cases[i].not_modeled.empty() ? cases[i].not_modeled
                                                     : r.status().message();
      ++(skip.invalid ? rep.invalid : rep.not_modeled);
      rep.cases.push_back(std::move(skip));
      continue;
    }
    ++rep.scored;
    if (r->attention_overridden) ++rep.attention_overridden;
    rep.cases.push_back(*r);
    pred.push_back(r->predicted_s);
    meas.push_back(r->measured_s);
    groups[r->group].first.push_back(r->predicted_s);
    groups[r->group].second.push_back(r->measured_s);
    if (r->measured_allocated_bytes > 0) {
      mem_pred.push_back(r->predicted_allocated_bytes);
      mem_meas.push_back(r->measured_allocated_bytes);
    }
  }
  rep.memory_scored = static_cast<int>(mem_pred.size());
  rep.memory_mape = mem_pred.empty() ? 0.0 : Mape(mem_pred, mem_meas);
  rep.memory_max_error = mem_pred.empty() ? 0.0 : MaxApe(mem_pred, mem_meas);
  rep.mape = pred.empty() ? 0.0 : Mape(pred, meas);
  rep.max_error = pred.empty() ? 0.0 : MaxApe(pred, meas);
  // A rank correlation needs at least 3 plans of a model to mean anything.
  for (const auto& [g, v] : groups) {
    if (v.first.size() < 3) continue;
    rep.spearman[g] = Spearman(v.first, v.second);
    rep.group_size[g] = static_cast<int>(v.first.size());
  }
  return rep;
}

json ToJson(const ValidationReport& r) {
  json cases = json::array();
  for (const auto& c : r.cases)
    cases.push_back({{"id", c.id},
                     {"group", c.group},
                     {"plan", ToJson(c.plan)},
                     {"searched", c.searched},
                     {"measured_s", c.measured_s},
                     {"predicted_s", c.predicted_s},
                     {"error", c.error},
                     {"breakdown_s", {{"compute", c.breakdown.compute},
                                      {"tp_comm_exposed", c.breakdown.tp_exposed},
                                      {"pp_comm_exposed", c.breakdown.pp_exposed},
                                      {"dp_comm_exposed", c.breakdown.dp_exposed},
                                      {"pipeline_bubble", c.breakdown.bubble},
                                      {"optimizer", c.breakdown.optimizer}}},
                     {"fits", c.fits},
                     {"peak_memory_bytes", c.peak_memory_bytes},
                     {"capacity_bytes", c.capacity_bytes},
                     {"measured_allocated_bytes", c.measured_allocated_bytes},
                     {"predicted_allocated_bytes", c.predicted_allocated_bytes},
                     {"memory_error", c.memory_error},
                     {"measured_from", c.measured_from},
                     {"attention_overridden", c.attention_overridden},
                     {"skipped", c.skipped},
                     {"invalid", c.invalid}});
  json sp = json::object();
  for (const auto& [g, v] : r.spearman) sp[g] = {{"rho", v}, {"cases", r.group_size.at(g)}};
  return json{{"cases", cases}, {"scored", r.scored}, {"invalid", r.invalid}, {"not_modeled", r.not_modeled},
              {"mape", r.mape}, {"max_error", r.max_error}, {"spearman", sp},
              {"memory_scored", r.memory_scored}, {"memory_mape", r.memory_mape},
              {"memory_max_error", r.memory_max_error}, {"attention_overridden", r.attention_overridden}};
}

}  // namespace dt
