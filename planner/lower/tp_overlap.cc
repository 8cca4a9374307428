#include "planner/lower/tp_overlap.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "planner/cost/compute_cost.h"

namespace dt {
namespace {

enum class Method { kRingExchange, kPipeline, kBulk };

struct Pair {
  const char* collective;
  Method method;
  std::vector<const char*> gemms;  // the GEMM(s) it runs under (TE fuses fc1's gate and up)
};

const std::vector<Pair>& Pairs() {
  static const std::vector<Pair> pairs = {
      {"sp_allgather_attn", Method::kRingExchange, {"qkv"}},
      {"sp_reducescatter_attn", Method::kPipeline, {"proj"}},
      {"sp_allgather_mlp", Method::kRingExchange, {"fc1", "fc1_gate", "fc1_up"}},
      {"sp_reducescatter_mlp", Method::kPipeline, {"fc2"}},
      {"sp_allgather_mlp_grad", Method::kRingExchange, {"fc2_dgrad"}},
      {"sp_allgather_mlp_input", Method::kBulk, {"fc1_dgrad", "fc1_up_dgrad", "fc1_gate_dgrad"}},
      {"sp_reducescatter_mlp_grad", Method::kBulk, {"fc1_wgrad", "fc1_up_wgrad", "fc1_gate_wgrad"}},
      {"sp_allgather_attn_grad", Method::kRingExchange, {"proj_dgrad"}},
      {"sp_allgather_attn_input", Method::kBulk, {"qkv_dgrad"}},
      {"sp_reducescatter_attn_grad", Method::kBulk, {"qkv_wgrad"}},
  };
  return pairs;
}

constexpr double kCommSmShare = 16.0 / 132.0;  // TE's default num_sm of an H100's 132 SMs
constexpr int kPipelineSplits = 4;             // TE's default num_splits for "pipeline"

// The GEMMs of `names` nearest to op `at` in the list (a layer's list holds
// each name once per pass; recompute lists repeat the forward's).
std::vector<const Op*> PairedGemms(const std::vector<Op>& ops, size_t at, const std::vector<const char*>& names) {
  std::vector<const Op*> found;
  for (const char* name : names) {
    const Op* best = nullptr;
    size_t best_d = ops.size();
    for (size_t j = 0; j < ops.size(); ++j) {
      if (ops[j].kind != OpKind::kGemm || std::strcmp(ops[j].name, name) != 0) continue;
      const size_t d = j > at ? j - at : at - j;
      if (d < best_d) best = &ops[j], best_d = d;
    }
    if (best) found.push_back(best);
  }
  return found;
}

}  // namespace

void ChargeOverlappedTpComm(const std::vector<Op>& ops, int tp, const HardwareProfile& hw,
                            std::vector<double>* charged) {
  DT_CHECK(charged->size() == ops.size()) << "one charge per op";
  if (tp < 2) return;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind != OpKind::kCollective || op.group != GroupKind::kTp) continue;
    const Pair* pair = nullptr;
    for (const Pair& p : Pairs())
      if (std::strcmp(op.name, p.collective) == 0) pair = &p;
    if (!pair) continue;
    const std::vector<const Op*> gemms = PairedGemms(ops, i, pair->gemms);
    if (gemms.empty()) continue;
    double g = 0;
    for (const Op* x : gemms) g += OpDeviceTime(*x, hw);  // the device time they hide the collective under
    const double c = (*charged)[i];
    double together = 0;
    switch (pair->method) {
      case Method::kRingExchange: {
        const double gc = g / tp;
        together = gc + (tp - 1) * std::max(gc, c / (tp - 1));
        break;
      }
      case Method::kPipeline: {
        const double gc = g / kPipelineSplits / (1.0 - kCommSmShare);
        const double cc = c / kPipelineSplits;
        together = gc + (kPipelineSplits - 1) * std::max(gc, cc) + cc;
        break;
      }
      case Method::kBulk:
        together = std::max(g / (1.0 - kCommSmShare), c);
        break;
    }
    (*charged)[i] = std::max(0.0, together - g);
  }
}

}  // namespace dt
