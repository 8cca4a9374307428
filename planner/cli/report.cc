#include "planner/cli/report.h"

#include <cstdio>
#include <sstream>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/moe_ops.h"
#include "planner/lower/simulate.h"
#include "planner/profile/machine_speed.h"
#include "planner/spec/capabilities.h"
#include "planner/validate/published_accuracy.h"

namespace dt::cli {
namespace {

// From this share of a stage's kernel time spent waiting for launches the
// report calls the plan launch-bound (Prediction::host_wait_share).
constexpr double kLaunchBoundShare = 0.05;
// From this step-time difference the report names the attention kernel.
constexpr double kAttentionKernelShare = 0.05;

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// "full" recomputing only the first N layers of each chunk reads "full/N".
std::string RecomputeColumn(const PlanSpec& p) {
  std::string s = ToString(p.recompute);
  if (p.recompute == Recompute::kFull && p.recompute_num_layers > 0) s += "/" + std::to_string(p.recompute_num_layers);
  return s;
}

std::string Row(const PlanSpec& p, const Prediction& d, int rank) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%3d  %4d %3d %3d %3d %3d %4d %5d  %-11s %-9s %-3s %4d  %9.3f %12.0f %5.1f%%  %6s/%-6s\n",
                rank, p.dp, p.tp, p.pp, p.cp, p.vpp, p.micro_batch, p.num_microbatches,
                ToString(p.schedule), RecomputeColumn(p).c_str(), p.sequence_parallel ? "on" : "off",
                p.zero_stage, d.step_time_s, d.tokens_per_s, 100 * d.mfu,
                Gib(d.peak_memory_bytes).c_str(), Gib(d.capacity_bytes).c_str());
  std::string row = buf;
  if (p.ep > 1) row.insert(row.size() - 1, "  ep=" + std::to_string(p.ep));
  if (p.expert_folded()) row.insert(row.size() - 1, " etp=" + std::to_string(p.expert_tp()));
  return row;
}

json ReasonsJson(const std::map<std::string, int64_t>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

// A parameter count: billions with 2 decimals from 0.1B up (as before),
// millions below that, the exact number below a million (tiny CPU models
// would otherwise all read "0.00B").
std::string ParamCount(int64_t n) {
  if (n >= 100000000) return Fmt("%.2f", n / 1e9) + "B";
  if (n >= 1000000) return Fmt("%.2f", n / 1e6) + "M";
  return std::to_string(n);
}

}  // namespace

std::string Gib(double bytes) { return Fmt("%.1f", bytes / (1024.0 * 1024 * 1024)); }

std::string FormatSearch(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                         const SearchConstraints& k, const SearchResult& r) {
  std::ostringstream os;
  std::string kind = ToString(m.family);
  if (!m.source_type.empty()) kind = "HF " + m.source_type + ": " + kind + (m.FamilyLayout() ? " layout" : " layout variant");
  os << "model    " << m.name << " (" << kind << ", "
     << ParamCount(m.TotalParams()) << " params, " << m.num_layers << " layers, hidden "
     << m.hidden << ", " << m.heads << " heads)\n";
  // The allowance an expert-parallel plan of this search is priced at (moe_ops.h).
  PlanSpec ep_plan;
  ep_plan.ep = 2;
  ep_plan.moe_capacity_factor = k.moe_capacity_factor;
  ep_plan.moe_pad_to_capacity = k.moe_pad_to_capacity;
  const double allowance = ExpertLoadImbalance(ep_plan);
  const bool capped = k.moe_capacity_factor > 0;
  if (m.moe())
    os << "MoE      " << m.num_experts << " experts, top-" << m.moe_top_k << " routed"
       << (m.shared_ffn_hidden > 0 ? " + shared" : "") << ": " << ParamCount(m.TotalParams())
       << " total, " << ParamCount(m.ActiveParams())
       << " active params per token; MFU counts active FLOPs (routed tokens x top-k), "
       << (capped && k.moe_pad_to_capacity ? "expert time is priced at the capacity, "
                                           : "expert time is priced at a load-imbalance allowance of ")
       << Fmt("%.2f", allowance)
       << (capped && k.moe_pad_to_capacity ? "x the balanced rows (inputs padded to it, the tokens beyond it dropped)\n"
           : capped ? "x on plans with ep > 1 (at most the capacity, " + Fmt("%.2f", k.moe_capacity_factor) +
                          "x the balanced rows; the tokens beyond it dropped)\n"
                    : std::string("x on plans with ep > 1\n"));
  if (m.mtp_layers > 0)
    os << "MTP      " << m.mtp_layers << " multi-token prediction module(s), " << ParamCount(m.MtpParams())
       << " params beyond the total above (their layer, eh_proj, norms; embedding and LM head shared): trained, "
          "held and priced on the last pipeline stage, FLOPs counted in MFU\n";
  os << "cluster  " << c.nodes << " nodes x " << c.gpus_per_node << " " << c.device << " = "
     << c.world() << " devices\n";
  os << "profile  " << hw.name << " (" << Gib(static_cast<double>(hw.device.memory_bytes))
     << " GiB, "
     << (hw.device.peak_flops >= 1e12 ? Fmt("%.0f TFLOP/s ", hw.device.peak_flops / 1e12)
                                      : Fmt("%.0f GFLOP/s ", hw.device.peak_flops / 1e9))
     << hw.device.dtype << " per device)\n";
  if (k.precision == Precision::kFp8)
    os << "precision fp8: the layers' linear GEMMs at up to " << Fmt("%.0f", hw.compute.fp8.peak_flops / 1e12)
       << " TFLOP/s FP8 (Transformer Engine style, docs/fp8.md); attention, norms, embedding and LM head in "
       << hw.device.dtype << "; MFU is against the " << hw.device.dtype << " peak\n";
  if (k.precision == Precision::kBf16 && hw.device.dtype == "fp32" && hw.compute.bf16.available())
    os << "precision bf16: GEMMs on bf16 operands with fp32 accumulation, priced from profile's compute.bf16 "
          "measurements (up to " << Fmt("%.0f", hw.compute.bf16.peak_flops / 1e9)
       << " GFLOP/s); other kernels in fp32; MFU is against that bf16 peak\n";
  if (Bf16PricedAsFp32(hw, k.precision))
    os << "note: profile " << hw.name << " has no bf16 GEMM measurements (compute.bf16): this bf16 plan's GEMMs "
          "are priced at its fp32 rate, but dtrun runs them on bf16 operands (about 2x faster on a CPU with "
          "AVX512-BF16); " << RemeasureCpuProfile(c.gpus_per_node) << "\n";
  os << "batch    " << k.global_batch << " sequences x " << k.seq_length << " tokens\n\n";
  os << "searched " << r.grids_considered << " dp x tp x pp x cp grids and " << r.plans_considered
     << " plans in " << Fmt("%.2f", r.wall_seconds) << " s on " << r.threads_used << " threads\n";
  int64_t grid_rej = 0, plan_rej = 0;
  for (const auto& [_, v] : r.grid_rejects) grid_rej += v;
  for (const auto& [_, v] : r.plan_rejects) plan_rej += v;
  if (grid_rej) {
    os << "  rejected grids: " << grid_rej << "\n";
    for (const auto& [why, n] : r.grid_rejects) os << "    " << n << "  " << why << "\n";
  }
  os << "  rejected plans: " << plan_rej << "\n";
  for (const auto& [why, n] : r.plan_rejects) os << "    " << n << "  " << why << "\n";
  os << "  fitting plans: " << r.fitting;
  if (r.fitting > 0)
    os << " (simulated " << r.simulated << "; pruned " << r.pruned
       << " whose lower bound could not reach the top " << r.top.size() << ")";
  os << "\n\n";
  if (r.top.empty()) return os.str();
  os << "rank   dp  tp  pp  cp vpp  mbs    mb  schedule    recompute sp  zero  step(s)     tokens/s   MFU   mem GiB/cap\n";
  for (size_t i = 0; i < r.top.size(); ++i)
    os << Row(r.top[i].plan, r.top[i].prediction, static_cast<int>(i + 1));
  const Prediction& b = r.top[0].prediction;
  os << "\nbest: " << Describe(r.top[0].plan) << "\n  step " << Fmt("%.3f", b.step_time_s)
     << " s = compute " << Fmt("%.3f", b.time.compute) << (m.moe() ? " + TP/EP comm " : " + TP comm ")
     << Fmt("%.3f", b.time.tp_exposed)
     << " + PP comm " << Fmt("%.3f", b.time.pp_exposed) << " + DP comm " << Fmt("%.3f", b.time.dp_exposed)
     << " + bubble " << Fmt("%.3f", b.time.bubble) << " + optimizer " << Fmt("%.3f", b.time.optimizer)
     << " (exposed times on the critical stage)\n";
  if (b.approximated_points)
    os << "  note: some GEMM, message or group sizes lie outside the profile's tabulated range; "
          "the nearest point's efficiency / bandwidth was used\n";
  if (const std::string n = LaunchBoundNote(b, hw); !n.empty()) os << "  note: " << n << "\n";
  const PlanSpec& bp = r.top[0].plan;
  if (const std::string n = AttentionKernelNote(m, c, hw, bp, b); !n.empty()) os << "  note: " << n << "\n";
  if (m.moe()) os << "  note: " << MoeAccuracyNote() << "\n";
  if (const std::string n = DropoutNote(m, bp); !n.empty()) os << "  note: " << n << "\n";
  if (hw.device.kind == "gpu" &&
      UsesMegatronTorchSoftmax(m, bp, hw.device.bytes_per_element(), AttentionKernels::kMegatron))
    os << "  note: unfused attention with micro_batch x heads per TP rank = " << bp.micro_batch * (m.heads / bp.tp)
       << " (seq " << bp.seq_length << "): Megatron's fused softmax kernel needs a multiple of 4 (and 16 < seq <= "
          "4096), so it falls back to five PyTorch ops per softmax, priced as such; flash attention, or a "
          "microbatch that makes the product a multiple of 4, avoids it\n";
  return os.str();
}

json SearchToJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const SearchConstraints& k, const SearchResult& r) {
  json top = json::array();
  for (const auto& t : r.top)
    top.push_back({{"plan", ToJson(t.plan)}, {"prediction", ToJson(t.prediction)}});
  json j = {{"model", ToJson(m)},
            {"cluster", ToJson(c)},
            {"profile", hw.name},
            {"global_batch", k.global_batch},
            {"seq_length", k.seq_length},
            {"grids_considered", r.grids_considered},
            {"plans_considered", r.plans_considered},
            {"grid_rejects", ReasonsJson(r.grid_rejects)},
            {"plan_rejects", ReasonsJson(r.plan_rejects)},
            {"fitting", r.fitting},
            {"simulated", r.simulated},
            {"pruned", r.pruned},
            {"wall_seconds", r.wall_seconds},
            {"top", top}};
  if (r.closest)
    j["closest"] = {{"plan", ToJson(r.closest->plan)}, {"prediction", ToJson(r.closest->prediction)}};
  if (m.moe()) j["accuracy_note"] = MoeAccuracyNote();
  if (!r.top.empty()) {
    if (const std::string n = LaunchBoundNote(r.top[0].prediction, hw); !n.empty()) j["launch_note"] = n;
    if (const std::string n = AttentionKernelNote(m, c, hw, r.top[0].plan, r.top[0].prediction); !n.empty())
      j["attention_note"] = n;
    if (const std::string n = DropoutNote(m, r.top[0].plan); !n.empty()) j["dropout_note"] = n;
  }
  return j;
}

std::string DropoutNote(const ModelSpec& m, const PlanSpec& p) {
  if (!m.uses_dropout() || p.dropout) return "";
  return "the model trains with dropout, this plan without: the plan's time, memory and run leave out its masks' "
         "memory and passes";
}

std::string LaunchBoundNote(const Prediction& p, const HardwareProfile& hw) {
  if (p.host_wait_share < kLaunchBoundShare) return "";
  return "launch-bound: " + Fmt("%.0f", 100 * p.host_wait_share) +
         "% of the kernel time on its busiest stage is the device waiting for the host to launch eager kernels (" +
         Fmt("%.0f", hw.compute.host_overhead_s * 1e6) +
         " us per op on this profile): a larger microbatch, a smaller TP or CUDA graphs (not priced) would shrink it";
}

std::string AttentionKernelNote(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                                const PlanSpec& p, const Prediction& pred) {
  if (hw.device.kind != "gpu" || p.cudnn_attention || !p.flash_attention ||
      hw.compute.attention_efficiency_by_keys_cudnn.empty() || !(pred.step_time_s > 0))
    return "";
  PlanSpec q = p;
  q.cudnn_attention = true;
  StatusOr<Prediction> alt = SimulatePlan(m, c, q, hw);
  if (!alt.ok() || !(alt->step_time_s < (1 - kAttentionKernelShare) * pred.step_time_s)) return "";
  return "attention kernel: priced at the profile's default attention rate; with cuDNN's fused attention, "
         "which Transformer Engine selects on Hopper and whose speed depends on the cuDNN release, this plan's "
         "step would be " +
         Fmt("%.3f", alt->step_time_s) + " s (" + Fmt("%.0f", 100 * (alt->step_time_s / pred.step_time_s - 1)) +
         "%; --attention-kernel cudnn prices it so; docs/validation.md, \"Long context\")";
}

json PlanFileJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const PlanSpec& p, const Prediction& pred) {
  json j = ToJson(PlanFile{m, c, p, ToJson(pred)});
  j["profile"] = hw.name;
  // Which bundled runtime executes this plan (planner/spec/capabilities.h).
  json ex = json::object();
  for (RuntimeDevice d : {RuntimeDevice::kCpu, RuntimeDevice::kCuda}) {
    const Status s = CheckExecutable(m, p, d);
    ex[d == RuntimeDevice::kCpu ? "cpu" : "cuda"] = s.ok() ? json("yes") : json(s.message());
  }
  j["dtrun_executes"] = ex;
  return j;
}

}  // namespace dt::cli
