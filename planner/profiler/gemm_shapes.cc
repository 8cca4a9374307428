#include "planner/profiler/gemm_shapes.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "planner/cost/layer_ops.h"

namespace dt {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  std::string t(suffix);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

GemmCall CallOf(const std::string& op_name) {
  if (EndsWith(op_name, "_dgrad")) return GemmCall::kDgrad;
  if (EndsWith(op_name, "_wgrad")) return GemmCall::kWgrad;
  return GemmCall::kForward;
}

void AddGemms(const std::vector<Op>& ops, const std::string& prefix, std::vector<GemmShape>* out) {
  for (const Op& op : ops) {
    if (op.kind != OpKind::kGemm || op.batch != 1) continue;
    GemmShape g;
    g.m = op.m;
    g.n = op.n;
    g.k = op.k;
    g.call = CallOf(op.name);
    g.origin = prefix + " " + op.name;
    out->push_back(g);
  }
}

}  // namespace

std::vector<int> TpSplits(const ModelSpec& m, int max_tp) {
  std::vector<int> tps;
  for (int tp = 1; tp <= std::max(1, max_tp); ++tp)
    if (m.heads % tp == 0 && (m.kv_heads % tp == 0 || tp > m.kv_heads)) tps.push_back(tp);
  return tps;
}

std::vector<GemmShape> ModelGemmShapes(const ModelSpec& m, int seq_length,
                                       const std::vector<int>& tps, const std::vector<int>& mbs) {
  std::vector<GemmShape> out;
  for (int tp : tps) {
    for (int b : mbs) {
      PlanSpec p;
      p.tp = tp;
      p.micro_batch = b;
      p.seq_length = seq_length;
      p.flash_attention = false;
      std::string prefix = m.name + " tp" + std::to_string(tp) + " mbs" + std::to_string(b);
      LayerOps layer = TransformerLayerOps(m, p, 4);
      AddGemms(layer.forward, prefix, &out);
      AddGemms(layer.backward, prefix, &out);
      LayerOps head = HeadOps(m, p, 4);
      AddGemms(head.forward, prefix, &out);
      AddGemms(head.backward, prefix, &out);
    }
  }
  return out;
}

std::vector<GemmShape> GenericGemmGrid(double max_flops) {
  std::vector<GemmShape> out;
  // Sizes 16, 23, 32, 45, 64, ... (x sqrt 2): FLOPs grow ~2.8x per step.
  for (double s = 16; 2 * s * s * s <= max_flops * 1.0001; s *= std::sqrt(2.0)) {
    int64_t n = static_cast<int64_t>(std::lround(s / 8) * 8);
    if (n < 16) n = 16;
    GemmShape g;
    g.m = g.n = g.k = n;
    g.origin = "grid";
    out.push_back(g);
  }
  return out;
}

std::vector<GemmShape> SelectGemmShapes(std::vector<GemmShape> all, double max_flops,
                                        std::vector<GemmShape>* skipped) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  std::vector<GemmShape> out;
  for (GemmShape& g : all) {
    if (!seen.insert({g.m, g.n, g.k}).second) continue;
    if (g.flops() > max_flops) {
      if (skipped) skipped->push_back(g);
      continue;
    }
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GemmShape& a, const GemmShape& b) { return a.flops() < b.flops(); });
  return out;
}

}  // namespace dt
