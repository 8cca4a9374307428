// Profile loading, name resolution, validation and derived tables.
#include "planner/profile/profile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <utility>

#include "base/format.h"

#ifndef DT_SOURCE_DIR
#define DT_SOURCE_DIR "."
#endif

namespace dt {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ProfileDir() { return std::string(DT_SOURCE_DIR) + "/profiles/"; }


Status CheckDevice(const DeviceProfile& d, const std::string& w) {
  if (d.kind != "gpu" && d.kind != "cpu")
    return InvalidArgument(w + ".kind = '" + d.kind + "': use \"gpu\" or \"cpu\"");
  if (d.dtype != "bf16" && d.dtype != "fp32")
    return InvalidArgument(w + ".dtype = '" + d.dtype + "': use \"bf16\" or \"fp32\"");
  if (d.memory_bytes <= 0) return InvalidArgument(w + ".memory_bytes must be > 0");
  if (d.reserved_bytes < 0 || d.reserved_bytes >= d.memory_bytes)
    return InvalidArgument(w + ".reserved_bytes must be in [0, memory_bytes)");
  if (!(d.fragmentation >= 0 && d.fragmentation < 1))
    return InvalidArgument(w + ".fragmentation = " + ShortNumber(d.fragmentation, 6) +
                           ": use a fraction in [0, 1)");
  if (!(d.peak_flops > 0) || !std::isfinite(d.peak_flops))
    return InvalidArgument(w + ".peak_flops = " + ShortNumber(d.peak_flops, 6) + ": must be > 0");
  if (!(d.memory_bandwidth_Bps > 0) || !std::isfinite(d.memory_bandwidth_Bps))
    return InvalidArgument(w + ".memory_bandwidth_Bps = " + ShortNumber(d.memory_bandwidth_Bps, 6) +
                           ": must be > 0");
  return Status::Ok();
}

Status CheckFraction(double v, const std::string& what) {
  if (!(v > 0 && v <= 1))
    return InvalidArgument(what + " = " + ShortNumber(v, 6) + ": use a fraction in (0, 1]");
  return Status::Ok();
}

// An efficiency curve over a call's size (GEMM FLOPs, attention keys): fractions,
// non-decreasing, and a larger call never faster.
Status CheckEfficiencyCurve(const Curve& e, const std::string& ge) {
  DT_RETURN_IF_ERROR(ValidateCurve(e, ge, true, true));
  for (size_t i = 0; i < e.size(); ++i) {
    DT_RETURN_IF_ERROR(CheckFraction(e.y[i], ge + "[" + std::to_string(i) + "] efficiency"));
    if (i == 0) continue;
    if (e.y[i] < e.y[i - 1])
      return InvalidArgument(ge + "[" + std::to_string(i) +
                             "]: efficiency must not decrease with size (non-monotone curve)");
    // Time = x / (peak * eff) must not decrease either: eff may grow at most
    // as fast as the size. A measured curve clamped to exactly that bound
    // (planner/profiler/assemble.cc) can miss it by a rounding error: allow 1e-9.
    if (e.x[i] / e.y[i] < e.x[i - 1] / e.y[i - 1] * (1.0 - 1e-9))
      return InvalidArgument(ge + "[" + std::to_string(i) +
                             "]: efficiency grows faster than size, so a larger call would be "
                             "faster; lower this point or raise the previous one");
  }
  return Status::Ok();
}

Status CheckGemmPoints(const std::vector<GemmPoint>& pts, const std::string& w) {
  for (size_t i = 0; i < pts.size(); ++i) {
    const GemmPoint& g = pts[i];
    std::string at = w + "[" + std::to_string(i) + "]";
    if (g.m < 1 || g.n < 1 || g.k < 1 || g.batch < 1)
      return InvalidArgument(at + ": m, n, k and batch must be >= 1");
    if (!(g.seconds > 0) || !std::isfinite(g.seconds)) return InvalidArgument(at + ".seconds must be > 0");
  }
  return Status::Ok();
}

Status CheckCompute(const ComputeProfile& c, const std::string& w) {
  DT_RETURN_IF_ERROR(CheckEfficiencyCurve(c.gemm_efficiency, w + ".gemm_efficiency.points"));
  DT_RETURN_IF_ERROR(CheckGemmPoints(c.gemm_points, w + ".gemm_points"));
  if (c.bf16.available()) {
    const std::string b = w + ".bf16";
    if (!(c.bf16.peak_flops > 0) || !std::isfinite(c.bf16.peak_flops))
      return InvalidArgument(b + ".peak_flops = " + ShortNumber(c.bf16.peak_flops, 6) + ": must be > 0");
    DT_RETURN_IF_ERROR(CheckEfficiencyCurve(c.bf16.gemm_efficiency, b + ".gemm_efficiency"));
    DT_RETURN_IF_ERROR(CheckGemmPoints(c.bf16.gemm_points, b + ".gemm_points"));
    DT_RETURN_IF_ERROR(CheckFraction(c.bf16.attention_efficiency, b + ".attention_efficiency"));
    if (c.bf16.narrow_s_per_element.empty() != c.bf16.widen_s_per_element.empty())
      return InvalidArgument(b + ": narrow_s_per_element and widen_s_per_element come together (give both or neither)");
    if (c.bf16.has_conversions()) {
      DT_RETURN_IF_ERROR(ValidateCurve(c.bf16.narrow_s_per_element, b + ".narrow_s_per_element", true, true));
      DT_RETURN_IF_ERROR(ValidateCurve(c.bf16.widen_s_per_element, b + ".widen_s_per_element", true, true));
    }
  }
  DT_RETURN_IF_ERROR(CheckFraction(c.attention_efficiency, w + ".attention_efficiency"));
  // x = keys per query row; the time (x / efficiency, for a fixed number of
  // queries) must not fall as x grows.
  const std::pair<const Curve*, const char*> attention_curves[] = {
      {&c.attention_efficiency_by_keys, "attention_efficiency_by_keys"},
      {&c.attention_efficiency_by_keys_cudnn, "attention_efficiency_by_keys_cudnn"},
      {&c.attention_noncausal_by_keys, "attention_noncausal_by_keys"},
      {&c.attention_noncausal_by_keys_cudnn, "attention_noncausal_by_keys_cudnn"}};
  for (const auto& [curve, key] : attention_curves)
    if (!curve->empty()) DT_RETURN_IF_ERROR(CheckEfficiencyCurve(*curve, w + "." + key + ".points"));
  DT_RETURN_IF_ERROR(CheckFraction(c.memory_bound_efficiency, w + ".memory_bound_efficiency"));
  if (!(c.kernel_overhead_s >= 0)) return InvalidArgument(w + ".kernel_overhead_s must be >= 0");
  if (!(c.host_overhead_s >= 0)) return InvalidArgument(w + ".host_overhead_s must be >= 0");
  if (!(c.step_overhead_s >= 0)) return InvalidArgument(w + ".step_overhead_s must be >= 0");
  const MoeHostProfile& mh = c.moe_host;
  if (!(mh.router_s >= 0 && mh.dispatch_s >= 0 && mh.backward_s >= 0 && mh.router_s < 1 && mh.dispatch_s < 1 &&
        mh.backward_s < 1))
    return InvalidArgument(w + ".moe_host: router_s, dispatch_s and backward_s must be seconds in [0, 1)");
  if (!(c.recompute_cost_ratio > 0 && c.recompute_cost_ratio <= 4))
    return InvalidArgument(w + ".recompute_cost_ratio must be in (0, 4] (1: a recompute costs what its forward ops price)");
  if (!(c.optimizer_bytes_per_param >= 0))
    return InvalidArgument(w + ".optimizer_bytes_per_param must be >= 0");
  if (!c.optimizer_time_by_params.empty()) {
    const Curve& o = c.optimizer_time_by_params;
    const std::string ow = w + ".optimizer_time_by_params.points";
    DT_RETURN_IF_ERROR(ValidateCurve(o, ow, true, true));
    for (size_t i = 1; i < o.size(); ++i)
      if (o.x[i] * o.y[i] < o.x[i - 1] * o.y[i - 1] * (1.0 - 1e-9))
        return InvalidArgument(ow + "[" + std::to_string(i) + "]: the step over " + ShortNumber(o.x[i], 6) +
                               " parameters would take less time than over " + ShortNumber(o.x[i - 1], 6) +
                               "; x * y must not decrease");
  }
  if (c.fp8.peak_flops != 0) {
    if (!(c.fp8.peak_flops > 0) || !std::isfinite(c.fp8.peak_flops))
      return InvalidArgument(w + ".fp8.peak_flops = " + ShortNumber(c.fp8.peak_flops, 6) + ": must be > 0");
    DT_RETURN_IF_ERROR(CheckEfficiencyCurve(c.fp8.gemm_efficiency, w + ".fp8.gemm_efficiency"));
  }
  return Status::Ok();
}

Status CheckEntries(const std::vector<LinkEntry>& es, const std::string& w, const char* key_name,
                    int lo, int hi) {
  for (size_t i = 0; i < es.size(); ++i) {
    const LinkEntry& e = es[i];
    std::string at = w + "[" + std::to_string(i) + "]";
    if (e.key < lo || e.key > hi)
      return InvalidArgument(at + "." + key_name + " = " + std::to_string(e.key) +
                             ": use a value in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "] (network.gpus_per_node bounds it)");
    if (i > 0 && e.key <= es[i - 1].key)
      return InvalidArgument(at + "." + key_name + ": entries must be sorted by " + key_name +
                             " without repeats");
    if (!(e.latency_s >= 0) || !std::isfinite(e.latency_s))
      return InvalidArgument(at + ".latency_s = " + ShortNumber(e.latency_s, 6) + ": must be >= 0");
    if (!(e.busbw_Bps > 0) || !std::isfinite(e.busbw_Bps))
      return InvalidArgument(at + ".busbw_Bps = " + ShortNumber(e.busbw_Bps, 6) +
                             ": bandwidth must be > 0 (bytes/s)");
    if (!e.points.empty()) {
      DT_RETURN_IF_ERROR(ValidateCurve(e.points, at + ".points", true, true));
      for (size_t p = 1; p < e.points.size(); ++p)
        if (e.points.x[p] / e.points.y[p] < e.points.x[p - 1] / e.points.y[p - 1])
          return InvalidArgument(at + ".points[" + std::to_string(p) +
                                 "]: a larger message would take less time than a smaller one "
                                 "(bytes / busbw must not decrease)");
    }
  }
  return Status::Ok();
}

Status CheckNetwork(const NetworkProfile& n, const std::string& w) {
  if (n.gpus_per_node < 1) return InvalidArgument(w + ".gpus_per_node must be >= 1");
  for (int k = 0; k < 4; ++k) {
    const CollectiveTable& t = n.collectives[k];
    std::string cw = w + ".collectives." + CollectiveKey(static_cast<CollKind>(k));
    if (n.gpus_per_node >= 2 && t.intra.empty())
      return InvalidArgument(cw + ".intra: missing; add at least one {\"group_size\": 2..." +
                             std::to_string(n.gpus_per_node) + ", \"latency_s\", \"busbw_Bps\"}");
    DT_RETURN_IF_ERROR(CheckEntries(t.intra, cw + ".intra", "group_size", 2, n.gpus_per_node));
    DT_RETURN_IF_ERROR(CheckEntries(t.inter, cw + ".inter", "ranks_per_node", 1, n.gpus_per_node));
  }
  return Status::Ok();
}

// Measured GEMM times as a curve over FLOPs per call, made non-decreasing
// (a running maximum) so a larger GEMM is never predicted faster.
// Time of a GEMM of F FLOPs whose shape was not measured: the median over
// the measured shapes of exactly F FLOPs (a skinny shape, e.g. the router's
// n = 4, is several times slower than the square-ish ones of the same FLOPs
// and must not set the price of every other shape), then non-decreasing in F.
Curve MeasuredGemmSeconds(const std::vector<GemmPoint>& pts) {
  std::vector<std::pair<double, double>> v;
  for (const GemmPoint& g : pts) v.emplace_back(g.flops(), g.seconds);
  std::sort(v.begin(), v.end());
  Curve c;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && v[j].first == v[i].first) ++j;
    const size_t n = j - i, mid = i + n / 2;  // v is sorted by time within a size
    c.x.push_back(v[i].first);
    c.y.push_back(n % 2 == 1 ? v[mid].second : 0.5 * (v[mid - 1].second + v[mid].second));
    i = j;
  }
  for (size_t i = 1; i < c.size(); ++i) c.y[i] = std::max(c.y[i], c.y[i - 1]);
  return c;
}

}  // namespace

Status CheckCudnnAttentionCurve(const HardwareProfile& p) {
  if (!p.compute.attention_efficiency_by_keys_cudnn.empty()) return Status::Ok();
  return InvalidArgument("profile '" + p.name + "' has no cuDNN attention curve (compute.attention_efficiency_by_keys_cudnn); "
                         "use a profile that has one (H100-SXM5-80GB) or the default attention kernel");
}

Status PrepareProfile(HardwareProfile* p, const std::string& where) {
  if (p->name.empty()) return InvalidArgument(where + ": field 'name' must not be empty");
  DT_RETURN_IF_ERROR(CheckDevice(p->device, where + ": device"));
  DT_RETURN_IF_ERROR(CheckCompute(p->compute, where + ": compute"));
  DT_RETURN_IF_ERROR(CheckNetwork(p->network, where + ": network"));
  p->compute.measured_gemm_seconds = MeasuredGemmSeconds(p->compute.gemm_points);
  p->compute.bf16.measured_gemm_seconds = MeasuredGemmSeconds(p->compute.bf16.gemm_points);
  return Status::Ok();
}

std::vector<std::string> BundledProfileNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ProfileDir(), ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<HardwareProfile> LoadProfile(const std::string& name_or_path) {
  DT_ASSIGN_OR_RETURN(std::string path, ProfilePath(name_or_path));
  DT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return ProfileFromJson(j, "profile '" + path + "'");
}

StatusOr<std::string> ProfilePath(const std::string& name_or_path) {
  std::string path = name_or_path;
  bool is_path = name_or_path.find('/') != std::string::npos ||
                 (name_or_path.size() > 5 &&
                  name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
  if (!is_path) {
    std::string want = Lower(name_or_path);
    if (want == "a100") want = "a100-sxm4-80gb";
    if (want == "h100") want = "h100-sxm5-80gb";
    if (want == "cpu") want = "cpu-generic";
    std::vector<std::string> names = BundledProfileNames();
    path.clear();
    for (const std::string& n : names)
      if (Lower(n) == want) path = ProfileDir() + n + ".json";
    if (path.empty()) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      return NotFound("unknown hardware profile '" + name_or_path + "': use one of [" + list +
                      "] (aliases a100, h100, cpu) or a path to a profile JSON file");
    }
  }
  return path;
}

StatusOr<HardwareProfile> ProfileFromJsonText(const std::string& text, const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ParseJsonText(text, path));
  return ProfileFromJson(j, "profile '" + path + "'");
}

bool operator==(const HardwareProfile& a, const HardwareProfile& b) {
  const DeviceProfile &da = a.device, &db = b.device;
  const ComputeProfile &ca = a.compute, &cb = b.compute;
  bool net = a.network.gpus_per_node == b.network.gpus_per_node && a.network.note == b.network.note;
  for (int k = 0; k < 4 && net; ++k)
    net = a.network.collectives[k].intra == b.network.collectives[k].intra &&
          a.network.collectives[k].inter == b.network.collectives[k].inter;
  return net && a.name == b.name && a.description == b.description && a.created == b.created &&
         a.sources == b.sources && da.kind == db.kind && da.memory_bytes == db.memory_bytes &&
         da.reserved_bytes == db.reserved_bytes && da.fragmentation == db.fragmentation &&
         da.dtype == db.dtype && da.peak_flops == db.peak_flops &&
         da.memory_bandwidth_Bps == db.memory_bandwidth_Bps && da.note == db.note &&
         ca.gemm_efficiency == cb.gemm_efficiency &&
         ca.gemm_efficiency_note == cb.gemm_efficiency_note && ca.gemm_points == cb.gemm_points &&
         ca.attention_efficiency == cb.attention_efficiency &&
         ca.attention_efficiency_by_keys == cb.attention_efficiency_by_keys &&
         ca.attention_efficiency_by_keys_note == cb.attention_efficiency_by_keys_note &&
         ca.attention_efficiency_by_keys_cudnn == cb.attention_efficiency_by_keys_cudnn &&
         ca.attention_efficiency_by_keys_cudnn_note == cb.attention_efficiency_by_keys_cudnn_note &&
         ca.attention_noncausal_by_keys == cb.attention_noncausal_by_keys &&
         ca.attention_noncausal_by_keys_note == cb.attention_noncausal_by_keys_note &&
         ca.attention_noncausal_by_keys_cudnn == cb.attention_noncausal_by_keys_cudnn &&
         ca.attention_noncausal_by_keys_cudnn_note == cb.attention_noncausal_by_keys_cudnn_note &&
         ca.optimizer_time_by_params == cb.optimizer_time_by_params &&
         ca.optimizer_time_by_params_note == cb.optimizer_time_by_params_note &&
         ca.memory_bound_efficiency == cb.memory_bound_efficiency &&
         ca.kernel_overhead_s == cb.kernel_overhead_s &&
         ca.optimizer_bytes_per_param == cb.optimizer_bytes_per_param &&
         ca.host_overhead_s == cb.host_overhead_s && ca.host_runs_ahead == cb.host_runs_ahead &&
         ca.step_overhead_s == cb.step_overhead_s &&
         ca.moe_host == cb.moe_host &&
         ca.recompute_cost_ratio == cb.recompute_cost_ratio &&
         ca.fp8 == cb.fp8 && ca.bf16 == cb.bf16 && ca.step_checks == cb.step_checks && ca.note == cb.note;
}

std::string StepCheckNote(const HardwareProfile& hw) {
  // One range per precision, fp32 first (a bf16 plan's error is the bf16 steps').
  std::string ranges;
  for (const char* precision : {"fp32", "bf16"}) {
    std::vector<const StepCheck*> c;
    std::vector<double> err;  // predicted / measured - 1, per check
    for (const StepCheck& s : hw.compute.step_checks)
      if (s.precision == precision) c.push_back(&s), err.push_back(s.predicted_s / s.measured_s - 1);
    if (c.empty()) continue;
    const auto [lo, hi] = std::minmax_element(err.begin(), err.end());
    const size_t worst = std::abs(*lo) > std::abs(*hi) ? lo - err.begin() : hi - err.begin();
    char buf[200];
    std::snprintf(buf, sizeof(buf), "%zu whole %s training step%s within %+.0f%%..%+.0f%% (worst: %s, %+.0f%%)",
                  c.size(), precision, c.size() == 1 ? "" : "s", 100 * *lo, 100 * *hi, c[worst]->what.c_str(),
                  100 * err[worst]);
    ranges += (ranges.empty() ? "" : ", and ") + std::string(buf);
  }
  if (ranges.empty()) return "";
  return "profile " + hw.name + "'s own check predicted " + ranges +
         " of the measured steps: expect errors of that size";
}

}  // namespace dt
