#include "planner/profiler/assemble.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "base/format.h"
#include "planner/profiler/measure_step_comm.h"
#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/lower/simulate.h"

#include "sim/collective_model.h"

namespace dt {
namespace {


// Clamps a fitted fraction into (0, 1], noting when it had to.
double Fraction(double v, const std::string& what, std::string* note) {
  if (std::isfinite(v) && v > 0 && v <= 1) return v;
  double c = std::isfinite(v) && v > 1 ? 1.0 : 0.01;
  *note += " " + what + " fit " + ShortNumber(v) + " clamped to " + ShortNumber(c) + ".";
  return c;
}

}  // namespace

Curve GemmEfficiencyCurve(const std::vector<GemmPoint>& pts, double peak) {
  // Best rate per log2 bin of FLOPs: the curve's x is the bin's largest size.
  std::vector<std::pair<double, double>> v;  // (flops, efficiency)
  for (const GemmPoint& g : pts) v.emplace_back(g.flops(), std::min(1.0, g.flops() / g.seconds / peak));
  std::sort(v.begin(), v.end());
  Curve c;
  for (const auto& [x, e] : v) {
    if (!c.x.empty() && std::floor(std::log2(x)) == std::floor(std::log2(c.x.back()))) {
      c.x.back() = x;
      c.y.back() = std::max(c.y.back(), e);
      continue;
    }
    c.x.push_back(x);
    c.y.push_back(e);
  }
  for (size_t i = 1; i < c.size(); ++i) {
    c.y[i] = std::max(c.y[i], c.y[i - 1]);                      // non-decreasing
    c.y[i] = std::min(c.y[i], c.y[i - 1] * c.x[i] / c.x[i - 1]);  // time non-decreasing
  }
  return c;
}

namespace {
// sum planner FLOPs / (peak * sum(t - ops * overhead)); 0.3 (noted) when nothing was measured.
double AttentionEfficiency(const std::vector<KernelSample>& samples, double peak, double overhead,
                           const char* what, std::string* note) {
  if (samples.empty()) {
    *note += std::string(" ") + what + " 0.3: estimate (not measured).";
    return 0.3;
  }
  double f = 0, t = 0;
  for (const KernelSample& s : samples) {
    f += s.planner_flops;
    t += std::max(s.seconds - s.planner_ops * overhead, 1e-12);
  }
  return Fraction(f / (peak * t), what, note);
}

// Relative change end / start - 1 of a quantity measured both times; 0
// when either is missing.
double Change(double start, double end) { return start > 0 && end > 0 ? end / start - 1 : 0.0; }

std::string Percent(double change) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", 100 * change);
  return buf;
}

// "stream copy A then B GB/s per rank (+x%), a <step> C then D ms (speed +y%)".
std::string SpeedProbeParts(const Measurements& m) {
  std::string parts;
  if (m.speed_start.copy_Bps > 0 && m.speed_end.copy_Bps > 0)
    parts += "stream copy " + ShortNumber(m.speed_start.copy_Bps / 1e9, 3) + " then " +
             ShortNumber(m.speed_end.copy_Bps / 1e9, 3) + " GB/s per rank (" +
             Percent(Change(m.speed_start.copy_Bps, m.speed_end.copy_Bps)) + ")";
  if (m.speed_start.step_s > 0 && m.speed_end.step_s > 0)
    parts += std::string(parts.empty() ? "" : ", ") + "a " + m.speed_step_what + " " +
             ShortNumber(m.speed_start.step_s * 1e3, 3) + " then " + ShortNumber(m.speed_end.step_s * 1e3, 3) +
             " ms (speed " + Percent(Change(m.speed_end.step_s, m.speed_start.step_s)) + ")";
  return parts;
}

}  // namespace

double SpeedChange(const Measurements& m) {
  // The whole training step is what the profile's fits price (the refit of
  // memory_bound_efficiency divides the copy rate out again), so it decides;
  // the copy rate, which moves by itself on a shared host (+26% between two
  // copies a minute apart with the steps within 6%, 2026-11-28), only when
  // no step was timed. A step time that rises is a slower machine.
  if (m.speed_start.step_s > 0 && m.speed_end.step_s > 0)
    return std::fabs(Change(m.speed_end.step_s, m.speed_start.step_s));
  return std::fabs(Change(m.speed_start.copy_Bps, m.speed_end.copy_Bps));
}

std::string SpeedProbeSummary(const Measurements& m) {
  const std::string parts = SpeedProbeParts(m);
  return parts.empty() ? "" : "Machine speed at the profile's start and end, measured alike: " + parts + ".";
}

std::string UnsteadyMachineWarning(const Measurements& m, double threshold) {
  if (!(SpeedChange(m) > threshold)) return "";
  return "the machine's speed changed by more than " + Percent(threshold).substr(1) + " while it was profiled (" +
         SpeedProbeParts(m) +
         "): the profile mixes two machine speeds, and plans priced with it can be off by as much. "
         "This happens on a shared host whose neighbours load it; re-run `dtplan profile` when it is steady "
         "(`dtplan profile --speed-check PROFILE` tells how fast the machine runs now against the profile).";
}

namespace {

// compute.recompute_cost_ratio from the steps timed with full recompute:
// per step, (its time - the plain step's) / the recompute's priced time
// under `hp`, the median over steps (1 when none was timed). The two steps
// of a pair ran alternately, so a drifting machine moves both; their
// difference is what a recompute costs in situ. Appends what it found to
// *note.
double RecomputeCostRatio(const std::vector<ModelSample>& steps, const HardwareProfile& hp, std::string* note) {
  std::vector<double> ratios;
  std::string each;
  for (const ModelSample& s : steps) {
    if (s.full_recompute_seconds <= 0 || s.recompute_ops.empty()) continue;
    double priced = 0;
    for (const Op& op : s.recompute_ops) priced += OpTime(op, hp);
    if (priced <= 0) continue;
    const double r = (s.full_recompute_seconds - s.seconds) / priced;
    ratios.push_back(r);
    each += " " + s.what + " " + ShortNumber(r, 3) + ";";
  }
  if (ratios.empty()) return 1.0;
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const double median = n % 2 ? ratios[n / 2] : 0.5 * (ratios[n / 2 - 1] + ratios[n / 2]);
  // Kept within [0.25, 2]: outside it a step pair was disturbed, not priced.
  const double r = std::clamp(median, 0.25, 2.0);
  *note += " recompute_cost_ratio " + ShortNumber(r, 3) + (r != median ? " (clamped)" : "") +
           ": full recompute timed beside the plain step, (step with it - without) / the recompute's priced "
           "time, median over " + std::to_string(n) + " microbatch sizes:" + each;
  return r;
}

// In situ: a GEMM inside the runtime's training step can take longer than
// the same shape called again and again on its own (its operands were last
// touched several ops earlier; gpt-tiny's at microbatch 16: 1.15x,
// docs/profiler.md). Where the whole-model steps timed a shape, its time per
// call there (median over steps) replaces the isolated one in *points; the
// efficiency curve keeps the isolated rates (peak and shapes the steps do not
// run). Returns the note saying what was replaced.
std::string ApplyInStepGemms(const std::vector<ModelSample>& steps, std::vector<GemmPoint>* points) {
  std::vector<GemmPoint>& pts = *points;
  std::string in_situ_note;
  {
    std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<double, int>> in_step;
    for (const ModelSample& s : steps)
      for (const GemmPoint& g : s.in_step_gemms) {
        auto& a = in_step[{g.m, g.n, g.k}];
        a.first += g.seconds;
        ++a.second;
      }
    std::vector<double> ratios;
    std::vector<std::pair<double, double>> ratio_by_flops;  // (log FLOPs, in-step / alone)
    std::vector<bool> replaced(pts.size(), false);
    int added = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      GemmPoint& g = pts[i];
      auto it = in_step.find({g.m, g.n, g.k});
      if (g.batch != 1 || it == in_step.end() || it->second.second <= 0 || !(g.seconds > 0)) continue;
      const double t = it->second.first / it->second.second;
      it->second.second = 0;  // used
      if (!(t > 0)) continue;
      ratios.push_back(t / g.seconds);
      ratio_by_flops.push_back({std::log(g.flops()), t / g.seconds});
      g.seconds = t;
      replaced[i] = true;
    }
    // Shapes the steps do not run (those of tp > 1 plans: the steps are
    // tp = 1) run inside their own plans' steps too: their isolated time
    // takes the in-step / alone ratio of the timed shapes nearest in FLOPs
    // (the median over those within 2x of its FLOPs, else the nearest one),
    // so that a tp 2 plan's GEMMs are not priced warmer than a tp 1 plan's.
    int scaled = 0;
    if (!ratio_by_flops.empty()) {
      for (size_t i = 0; i < pts.size(); ++i) {
        GemmPoint& g = pts[i];
        if (replaced[i] || g.batch != 1 || !(g.seconds > 0)) continue;
        const double x = std::log(g.flops());
        std::vector<double> near;
        double best = 0, best_d = 1e300;
        for (const auto& [lx, r] : ratio_by_flops) {
          const double dist = std::fabs(lx - x);
          if (dist <= std::log(2.0)) near.push_back(r);
          if (dist < best_d) best_d = dist, best = r;
        }
        double r = best;
        if (!near.empty()) {
          std::sort(near.begin(), near.end());
          r = near[near.size() / 2];
        }
        g.seconds *= r;
        ++scaled;
      }
    }
    // Shapes above the isolated sweep's size cap that the steps ran.
    for (const auto& [key, a] : in_step) {
      if (a.second <= 0 || !(a.first > 0)) continue;
      GemmPoint g;
      std::tie(g.m, g.n, g.k) = key;
      g.seconds = a.first / a.second;
      pts.push_back(g);
      ++added;
    }
    const std::string added_note =
        added > 0 ? " " + std::to_string(added) + " more shapes (above the isolated sweep's cap) measured in the steps only." : "";
    if (!ratios.empty()) {
      std::sort(ratios.begin(), ratios.end());
      in_situ_note = " " + std::to_string(ratios.size()) +
                     " gemm_points timed inside the whole-model training steps (median over steps of the time per call) instead of alone: "
                     "in-step / alone " + ShortNumber(ratios[ratios.size() / 2], 3) + " median, " +
                     ShortNumber(ratios.front(), 3) + "-" + ShortNumber(ratios.back(), 3) + ".";
    }
    in_situ_note += added_note;
    if (scaled > 0)
      in_situ_note += " " + std::to_string(scaled) +
                      " gemm_points the steps do not run (tp > 1 shapes) scaled by the in-step / alone ratio of the "
                      "timed shapes nearest in FLOPs.";
  }
  return in_situ_note;
}

}  // namespace

StatusOr<HardwareProfile> AssembleProfile(const Measurements& m) {
  const std::string where = "measured profile '" + m.name + "'";
  if (m.gemms.empty()) return InvalidArgument(where + ": no GEMM was measured");
  for (const GemmPoint& g : m.gemms)
    if (!(g.seconds > 0)) return InvalidArgument(where + ": a GEMM time is not positive");
  if (!(m.copy_Bps > 0)) return InvalidArgument(where + ": stream copy bandwidth not measured");

  HardwareProfile p;
  p.name = m.name;
  p.created = m.machine.date;
  const MachineInfo& mi = m.machine;
  p.machine.cpu_model = m.device_kind == "cpu" ? mi.cpu_model : m.device_name;
  p.machine.cores = mi.cores;
  p.machine.ranks_per_node = m.ranks_per_node;
  p.machine.gemm_library =
      !m.gemm_library.empty() ? m.gemm_library : m.device_kind == "cpu" ? "Eigen" : "cuBLAS";
  p.description = "MEASURED by `dtplan profile` on " + mi.datetime + " on host '" + mi.hostname + "': " +
                  m.device_name + ", " + std::to_string(mi.cores) + " logical CPUs, " +
                  ShortNumber(mi.mem_total_bytes / 1073741824.0, 3) + " GiB RAM. " +
                  std::to_string(m.ranks_per_node) + " MPI ranks per node x " +
                  std::to_string(m.threads_per_rank) + " OpenMP thread(s) each, measured concurrently; "
                  "valid for plans with that many ranks per node.";
  if (const std::string speed = SpeedProbeSummary(m); !speed.empty()) p.description += " " + speed;
  p.sources["measured"] = "dtplan profile (planner/profiler, docs/profiler.md): runtime backend '" +
                          m.device_kind + "' kernels and the runtime's communicator, warmup + median of "
                          "repetitions, slowest rank. Command: " + m.command;
  std::string models;
  for (const std::string& s : m.models) models += (models.empty() ? "" : ", ") + s;
  p.sources["shapes"] = "GEMM shapes: every TP split and microbatch size of [" + models +
                        "] (planner/cost/layer_ops.h) plus a square size grid";

  DeviceProfile& d = p.device;
  d.kind = m.device_kind;
  d.dtype = "fp32";
  d.memory_bytes = m.memory_bytes;
  d.reserved_bytes = std::min(m.reserved_bytes, m.memory_bytes - 1);
  // The runtime allocates every tensor exactly (malloc per tensor, counted
  // by its allocator): no caching-allocator slack to model.
  d.fragmentation = 0.0;
  double peak = 0;
  for (const GemmPoint& g : m.gemms) peak = std::max(peak, g.flops() / g.seconds);
  d.peak_flops = peak;
  d.memory_bandwidth_Bps = m.copy_Bps;
  d.note = std::string("peak_flops: best measured GEMM rate per rank (not a theoretical peak); "
                        "memory_bandwidth_Bps: stream copy (read + write) per rank with all ranks copying; ") +
           (m.device_kind == "cpu" ? "memory_bytes: MemTotal / ranks per node; "
                                   : "memory_bytes: the GPU's total memory (cudaMemGetInfo); ") +
           "reserved_bytes: RSS of a rank after MPI init; fragmentation 0: the runtime allocates each tensor "
           "exactly";

  ComputeProfile& c = p.compute;
  c.gemm_points = m.gemms;
  c.gemm_efficiency = GemmEfficiencyCurve(m.gemms, peak);
  c.gemm_efficiency_note = "measured GEMM rate / peak_flops, best per power-of-2 FLOP bin";
  const std::string in_situ_note = ApplyInStepGemms(m.model_steps, &c.gemm_points);
  c.kernel_overhead_s = std::max(0.0, m.tiny_op_s);
  std::string fit_note;
  c.attention_efficiency = AttentionEfficiency(m.attention, peak, c.kernel_overhead_s, "attention_efficiency", &fit_note);
  for (const GemmPoint& g : m.bf16_gemms)
    if (!(g.seconds > 0)) return InvalidArgument(where + ": a bf16 GEMM time is not positive");
  if (!m.bf16_gemms.empty()) {
    Bf16InputsCompute& b = c.bf16;
    for (const GemmPoint& g : m.bf16_gemms) b.peak_flops = std::max(b.peak_flops, g.flops() / g.seconds);
    b.gemm_points = m.bf16_gemms;
    b.gemm_efficiency = GemmEfficiencyCurve(m.bf16_gemms, b.peak_flops);
    // As for fp32: the shapes the runtime's bf16 steps ran, at their in-step time.
    std::string bf16_note = ApplyInStepGemms(m.bf16_model_steps, &b.gemm_points);
    b.attention_efficiency = AttentionEfficiency(m.bf16_attention, b.peak_flops, c.kernel_overhead_s,
                                                 "bf16.attention_efficiency", &bf16_note);
    for (const ConversionPoint& cp : m.bf16_conversions) {
      if (!(cp.narrow_s > 0) || !(cp.widen_s > 0)) return InvalidArgument(where + ": a bf16 conversion time is not positive");
      b.narrow_s_per_element.x.push_back(static_cast<double>(cp.elements));
      b.narrow_s_per_element.y.push_back(cp.narrow_s);
      b.widen_s_per_element.x.push_back(static_cast<double>(cp.elements));
      b.widen_s_per_element.y.push_back(cp.widen_s);
    }
    if (!m.bf16_conversions.empty())
      bf16_note += " narrow_s_per_element / widen_s_per_element: the runtime's bf16 storage conversions "
                   "(NarrowToBf16 / WidenFromBf16) per element, against elements per call, repeated on one buffer.";
    b.note = "the runtime backend of precision=bf16 plans (GEMM operands rounded to bf16, fp32 accumulation: " +
             m.bf16_gemm + "): GEMMs at the shapes of gemm_points up to 2 GFLOP per call (larger ones are priced at the rate of the "
             "largest measured point); peak_flops its best measured rate; "
             "attention_efficiency the runtime attention fwd+bwd against it." + bf16_note;
  }
  {
    double b = 0, t = 0;
    for (const KernelSample& s : m.memory_ops) {
      b += s.planner_bytes;
      t += std::max(s.seconds - s.planner_ops * c.kernel_overhead_s, 1e-12);
    }
    c.memory_bound_efficiency =
        m.memory_ops.empty() ? 0.7 : Fraction(b / (m.copy_Bps * t), "memory_bound_efficiency", &fit_note);
    if (m.memory_ops.empty()) fit_note += " memory_bound_efficiency 0.7: estimate (not measured).";
  }
  if (m.optimizer_s > 0 && m.optimizer_params > 0)
    c.optimizer_bytes_per_param = std::max(0.0, m.optimizer_s - c.kernel_overhead_s) * m.copy_Bps *
                                  c.memory_bound_efficiency / m.optimizer_params;
  else
    c.optimizer_bytes_per_param = 28;
  if (m.optimizer_s > 0 && m.optimizer_params > 0 && !m.optimizer_sizes.empty()) {
    std::vector<Measurements::OptimizerPoint> pts = m.optimizer_sizes;
    pts.push_back({m.optimizer_params, m.optimizer_s});
    std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.params < b.params; });
    const double ref = m.optimizer_s / m.optimizer_params;
    double floor_s = 0;
    std::string list;
    for (const auto& q : pts) {
      if (!(q.params > 0 && q.seconds > 0)) continue;
      if (!c.optimizer_time_by_params.x.empty() && q.params <= c.optimizer_time_by_params.x.back()) continue;
      floor_s = std::max(floor_s, q.seconds);  // more parameters never take less time
      c.optimizer_time_by_params.x.push_back(q.params);
      c.optimizer_time_by_params.y.push_back(floor_s / q.params / ref);
      list += (list.empty() ? "" : ", ") + ShortNumber(q.params / 1e6, 3) + "M: " +
              ShortNumber(c.optimizer_time_by_params.y.back(), 3);
    }
    c.optimizer_time_by_params_note =
        "grad norm + AdamW step per parameter by the parameters one rank updates, relative to the step over " +
        ShortNumber(m.optimizer_params / 1e6, 3) + "M (optimizer_bytes_per_param), all ranks at once: " + list +
        ". A few hundred thousand parameters keep weights, gradients and moments in the caches.";
  }
  c.note = "gemm_points: the runtime backend's GEMM at the planner's shapes, called as "
           "runtime/ops/linear.cc calls it; attention_efficiency: runtime attention fwd+bwd "
           "against the planner's attention FLOPs (" + std::to_string(m.attention.size()) +
           " shapes); memory_bound_efficiency: a GPT layer's memory-bound kernels against the "
           "planner's bytes (" + std::to_string(m.memory_ops.size()) + " shapes); "
           "optimizer_bytes_per_param: grad norm + AdamW step time expressed as bytes; "
           "kernel_overhead_s: a 1-element add." + in_situ_note + fit_note;

  NetworkProfile& n = p.network;
  n.gpus_per_node = m.ranks_per_node;
  n.note = "measured intra-node collectives (" + std::string(m.device_kind == "cpu" ? "MPI over shared memory" : "NCCL") +
           "), nccl-tests bus bandwidth convention; inter-node tables not measured (single node)";
  std::vector<CollSeries> collectives = m.collectives;
  if (!m.in_step_collectives.empty()) {
    // Timed inside the runtime's steps (measure_step_comm.h): scale the
    // isolated points near the sizes the steps moved by in-step / alone.
    std::vector<double> r = ApplyInStepCollectives(m.in_step_collectives, &collectives);
    if (!r.empty()) {
      std::sort(r.begin(), r.end());
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "; collectives near the sizes the runtime's tp and dp steps move are scaled by the in-step / "
                    "alone ratio of the nearest in-step size within 4x (%zu in-step sizes: median %.2f, range "
                    "%.2f-%.2f)",
                    r.size(), r[r.size() / 2], r.front(), r.back());
      n.note += buf;
    }
  }
  for (const CollSeries& s : collectives) {
    LinkEntry e = LinkEntryFromSeries(s);
    if (e.points.empty()) continue;
    auto& table = n.collectives[static_cast<int>(s.kind)].intra;
    table.push_back(e);
    std::sort(table.begin(), table.end(), [](const LinkEntry& a, const LinkEntry& b) { return a.key < b.key; });
  }
  DT_RETURN_IF_ERROR(PrepareProfile(&p, where));
  if (!m.model_steps.empty()) {
    // In situ: the runtime's whole-model training step also streams
    // what the isolated kernels leave out (zero-filled tensor allocations,
    // clones, cold caches). Refit memory_bound_efficiency so the planner
    // ops of those steps price them; minimise the squared relative error.
    // The optimizer part is priced from its own measurement (unchanged by
    // the refit: optimizer_bytes_per_param is rescaled below).
    const double opt_s_per_param = m.optimizer_params > 0 ? m.optimizer_s / m.optimizer_params : 0.0;
    auto predict = [&](const HardwareProfile& hp, const ModelSample& s) {
      const double n = static_cast<double>(s.params);
      double t = opt_s_per_param * OptimizerTimeFactor(n, hp) * n + hp.compute.step_overhead_s;
      for (const Op& op : s.ops) t += OpTime(op, hp);
      t += OpTime(GradZeroingOp(4.0 * n), hp);  // its fp32 gradients zeroed once per step, as plan_costs.cc prices it
      return t;
    };
    auto error = [&](const HardwareProfile& hp) {
      double e = 0;
      for (const ModelSample& s : m.model_steps) {
        double r = predict(hp, s) / s.seconds - 1;
        e += r * r;
      }
      return e;
    };
    HardwareProfile trial = p;
    double best = c.memory_bound_efficiency, best_err = error(p);
    for (int i = 0; i <= 400; ++i) {
      trial.compute.memory_bound_efficiency = 0.01 * std::pow(100.0, i / 400.0);
      double e = error(trial);
      if (e < best_err) best_err = e, best = trial.compute.memory_bound_efficiency;
    }
    const double isolated = c.memory_bound_efficiency;
    c.memory_bound_efficiency = best;
    if (m.optimizer_s > 0 && m.optimizer_params > 0)
      c.optimizer_bytes_per_param = std::max(0.0, m.optimizer_s - c.kernel_overhead_s) * m.copy_Bps *
                                    c.memory_bound_efficiency / m.optimizer_params;
    std::string fit = " memory_bound_efficiency refit on the runtime's whole-model training step "
                      "(isolated layer kernels: " + ShortNumber(isolated, 3) + "); measured/predicted ms:";
    for (const ModelSample& s : m.model_steps) {
      fit += " " + s.what + " " + ShortNumber(s.seconds * 1e3, 3) + "/" + ShortNumber(predict(p, s) * 1e3, 3) + ";";
      c.step_checks.push_back({s.what, s.seconds, predict(p, s)});
    }
    c.note += fit;
    DT_RETURN_IF_ERROR(PrepareProfile(&p, where));
    c.recompute_cost_ratio = RecomputeCostRatio(m.model_steps, p, &c.note);
  }
  // The bf16 steps, checked as the planner prices a 1-rank bf16 plan on the
  // finished profile (compute.bf16: their GEMMs in situ, the measured
  // conversion rates), so a bf16 plan's note gives the bf16 error. A check
  // the planner cannot price is left out and said in the note, never fatal
  // to the profile it ends.
  for (const ModelSample& s : m.bf16_model_steps) {
    ClusterSpec one;
    one.nodes = one.gpus_per_node = 1;
    one.device = "cpu";
    StatusOr<Prediction> pred = SimulatePlan(s.model, one, s.plan, p);
    if (!pred.ok()) {
      p.compute.note += " The " + s.what + " is not a step check: " + pred.status().message() + ".";
      continue;
    }
    StepCheck check{s.what, s.seconds, pred->step_time_s};
    check.precision = "bf16";
    p.compute.step_checks.push_back(check);
  }
  return p;
}

}  // namespace dt
