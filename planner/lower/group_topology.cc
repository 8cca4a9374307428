#include "planner/lower/group_topology.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace dt {
namespace {

int SizeOf(const PlanSpec& p, std::string_view d) {
  if (d == "tp") return p.tp;
  if (d == "cp") return p.cp;
  if (d == "dp") return p.dp;
  return p.pp;
}

// Stride of dimension `d` in the order string (innermost first). Parsed in
// place: this runs for every collective op of every plan the search prices.
int StrideOf(const PlanSpec& p, std::string_view d) {
  const std::string_view o = p.order;
  int stride = 1;
  size_t start = 0;
  while (start <= o.size()) {
    size_t end = o.find('-', start);
    if (end == std::string_view::npos) end = o.size();
    const std::string_view tok = o.substr(start, end - start);
    if (tok == d) return stride;
    stride *= SizeOf(p, tok);
    start = end + 1;
  }
  return stride;
}

GroupTopology Place(int size, int stride, int gpus_per_node) {
  GroupTopology t;
  t.size = size;
  if (static_cast<int64_t>(stride) * size <= gpus_per_node) {
    t.per_node = size;
    t.spans_nodes = false;
  } else if (stride >= gpus_per_node || gpus_per_node % stride != 0) {
    t.per_node = 1;
    t.spans_nodes = size > 1;
  } else {
    t.per_node = gpus_per_node / stride;
    t.spans_nodes = true;
  }
  return t;
}

}  // namespace

GroupTopology TopologyOf(const PlanSpec& p, GroupKind g, int gpus_per_node) {
  // Folded expert layer (etp < tp; Validate: tp innermost, pp outermost,
  // so a stage's tp*cp*dp ranks are consecutive): the expert grid
  // etp-ep-edp tiles them, EP members at stride etp.
  if (g == GroupKind::kEp && p.expert_folded()) return Place(p.ep, StrideOf(p, "tp") * p.expert_tp(), gpus_per_node);
  // EP: ep consecutive dp coordinates (rank_grid.h), at the dp stride.
  if (g == GroupKind::kEp) return Place(p.ep, StrideOf(p, "dp"), gpus_per_node);
  // Expert TP: the first etp members of the TP group (all of it when etp == tp).
  if (g == GroupKind::kEtp) return Place(p.expert_tp(), StrideOf(p, "tp"), gpus_per_node);
  const char* name = g == GroupKind::kTp ? "tp" : g == GroupKind::kCp ? "cp" : g == GroupKind::kDp ? "dp" : "pp";
  return Place(SizeOf(p, name), StrideOf(p, name), gpus_per_node);
}

GroupTopology GradGroupTopology(const PlanSpec& p, int gpus_per_node) {
  // With the default order cp and dp are adjacent: the grad group is one
  // strided block of dp*cp ranks starting at the smaller stride.
  int scp = StrideOf(p, "cp"), sdp = StrideOf(p, "dp");
  int size = p.dp * p.cp;
  bool adjacent = (scp * p.cp == sdp) || (sdp * p.dp == scp) || p.cp == 1 || p.dp == 1;
  int stride = p.cp == 1 ? sdp : p.dp == 1 ? scp : std::min(scp, sdp);
  if (!adjacent) return Place(size, std::max(scp, sdp), gpus_per_node);
  return Place(size, stride, gpus_per_node);
}

GroupTopology ExpertGradGroupTopology(const PlanSpec& p, int gpus_per_node) {
  // dp / ep members at ep x the dp stride; with cp > 1 also the cp members,
  // at a smaller stride: placed as if all sat at the larger (pessimistic).
  // Folded (etp < tp): the expert-DP members sit at stride etp * ep of the
  // expert grid etp-ep-edp.
  if (p.expert_folded()) return Place(p.expert_dp(), StrideOf(p, "tp") * p.expert_tp() * p.ep, gpus_per_node);
  const int sdp = StrideOf(p, "dp") * p.ep;
  if (p.cp == 1) return Place(p.dp / p.ep, sdp, gpus_per_node);
  if (p.dp == p.ep) return Place(p.cp, StrideOf(p, "cp"), gpus_per_node);
  return Place(p.expert_dp(), std::max(sdp, StrideOf(p, "cp")), gpus_per_node);
}

}  // namespace dt
