// Mixture of experts in the runtime: the router math (top-k, deterministic
// ties, renormalised weights), finite-difference gradient checks of the
// MoeMlp block (router, experts, input; fp32 forward, loss
// L = sum r_i y_i in double, central differences), and expert parallelism:
// two EP ranks over LocalComm give each rank the outputs and gradients of
// the one-rank block (experts' grads summed over both ranks' tokens). Expert
// capacity: which copies drop, what a dropped copy contributes, padding
// changing nothing but the work, the same checks with drops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/local_comm.h"
#include "runtime/model/moe_mlp.h"
#include "runtime/ops/moe_router.h"
#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Random;
using testing_util::Vec;

TEST(MoeRouter, TopKIsDescendingTiesGoToTheLowerExpertWeightsRenormalised) {
  // Token 0: distinct logits; token 1: a three-way tie at the top.
  const Vec logits = {0.5f, 2.0f, -1.0f, 1.0f, 3.0f, 3.0f, 0.0f, 3.0f};
  std::vector<int32_t> e(4);
  Vec w(4);
  RouteTopK(logits.data(), 2, 4, 2, e.data(), w.data());
  EXPECT_EQ(e, (std::vector<int32_t>{1, 3, 0, 1}));
  // Mixtral: softmax over all experts, then the top-k probabilities divided by their sum.
  auto mixtral = [&](int t, int j) {
    double z = 0, zk = 0;
    for (int x = 0; x < 4; ++x) z += std::exp(double(logits[t * 4 + x]));
    for (int i = 0; i < 2; ++i) zk += std::exp(double(logits[t * 4 + e[t * 2 + i]])) / z;
    return std::exp(double(logits[t * 4 + e[t * 2 + j]])) / z / zk;
  };
  for (int t = 0; t < 2; ++t)
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(w[t * 2 + j], mixtral(t, j), 1e-6) << t << "," << j;
  EXPECT_FLOAT_EQ(w[2], 0.5f);
}

TEST(MoeRouter, CapacityKeepsTheLargestWeightsPerExpert) {
  EXPECT_EQ(ExpertCapacity(14, 4, 1.0), 4);   // ceil(3.5)
  EXPECT_EQ(ExpertCapacity(16, 4, 1.0), 4);
  EXPECT_EQ(ExpertCapacity(16, 4, 1.25), 5);
  EXPECT_EQ(ExpertCapacity(2, 8, 0.1), 1);    // at least one
  // Six copies on expert 0 with capacity 3: the three largest weights stay,
  // the tie at 0.5 goes to the earlier copy; expert 1's two copies stay.
  const std::vector<int32_t> experts = {0, 1, 0, 0, 0, 1, 0, 0};
  const Vec weights = {0.9f, 0.1f, 0.5f, 0.2f, 0.5f, 0.8f, 0.3f, 0.95f};
  std::vector<uint8_t> kept(8);
  KeepWithinCapacity(experts.data(), weights.data(), 8, 2, 3, kept.data());
  EXPECT_EQ(kept, (std::vector<uint8_t>{1, 1, 1, 0, 0, 1, 0, 1}));
}


// One rank's MoeMlp with its own store; `ep` may be null (all experts here).
struct Block {
  std::unique_ptr<Backend> be = MakeCpuBackend();
  ParamStore store;
  LayerContext ctx;
  std::unique_ptr<MoeMlp> mlp;
  Block(int64_t rows, int64_t h, int64_t experts, int64_t k, int64_t f, Comm* ep, double capacity = 0,
        bool pad = false) {
    ctx.be = be.get();
    ctx.moe_capacity_factor = capacity;
    ctx.moe_pad_to_capacity = pad;
    ctx.seq = rows;
    ctx.batch = 1;
    ctx.rows = ctx.local_rows = rows;
    ctx.hidden = h;
    ctx.num_experts = experts;
    ctx.top_k = k;
    ctx.expert_ffn_local = f;
    ctx.ep = ep;
    ctx.ep_rank = ep ? ep->rank() : 0;
    ctx.ep_size = ep ? ep->size() : 1;
    ctx.store = &store;
    mlp = std::make_unique<MoeMlp>(&ctx, "layers.0.");
    store.Finalize();
  }
  // Values: router N(0, 1) so routing margins dwarf the FD step; experts
  // N(0, 0.5); the same for a given global name on any EP layout.
  void SetValues() {
    for (const Param& p : store.params()) {
      const uint32_t seed = static_cast<uint32_t>(std::hash<std::string>()(p.name));
      const Vec v = Random(p.numel, seed, p.name.find("router") != std::string::npos ? 1.0f : 0.5f);
      std::copy(v.begin(), v.end(), store.value(static_cast<int>(&p - store.params().data())));
    }
  }
  int Index(const std::string& name) const {
    for (size_t i = 0; i < store.params().size(); ++i)
      if (store.params()[i].name == name) return static_cast<int>(i);
    return -1;
  }
  Vec Out(const Vec& x, MoeStash* s) {
    Tensor in({ctx.rows, ctx.hidden});
    std::copy(x.begin(), x.end(), in.data());
    Tensor out = mlp->Forward(in, s);
    return Vec(out.data(), out.data() + out.numel());
  }
  // Returns d(in); param grads accumulate in the store.
  Vec Grad(const Vec& x, const Vec& r) {
    MoeStash s;
    Out(x, &s);
    Tensor in({ctx.rows, ctx.hidden}), dout({ctx.rows, ctx.hidden});
    std::copy(x.begin(), x.end(), in.data());
    std::copy(r.begin(), r.end(), dout.data());
    Tensor din = mlp->Backward(in, dout, &s);
    return Vec(din.data(), din.data() + din.numel());
  }
};

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// Drops happen, a token whose copies all drop gets a zero output, padding to
// capacity changes no output or gradient, and a capacity no expert reaches
// changes nothing against dropless.
TEST(MoeMlp, CapacityDropsAndPaddingChangesOnlyTheWork) {
  const int64_t rows = 12, h = 8, experts = 4, k = 2, f = 6;
  const Vec x = Random(rows * h, 31), r = Random(rows * h, 32);
  Block dropless(rows, h, experts, k, f, nullptr), tight(rows, h, experts, k, f, nullptr, 0.75),
      padded(rows, h, experts, k, f, nullptr, 0.75, true), loose(rows, h, experts, k, f, nullptr, 4.0, true);
  for (Block* b : {&dropless, &tight, &padded, &loose}) b->SetValues();
  MoeStash sd, st, sp, sl;
  const Vec yd = dropless.Out(x, &sd), yt = tight.Out(x, &st), yp = padded.Out(x, &sp), yl = loose.Out(x, &sl);
  const int64_t cap = ExpertCapacity(rows * k, experts, 0.75);
  int64_t dropped = 0;
  for (int64_t slot : st.slot_row) dropped += slot < 0;
  std::vector<int64_t> load(experts, 0);
  for (int32_t e : sd.experts) ++load[e];
  int64_t over = 0;
  for (int64_t n : load) over += std::max<int64_t>(0, n - cap);
  EXPECT_EQ(dropped, over);
  EXPECT_GT(dropped, 0) << "capacity " << cap << " must drop copies here: pick other seeds";
  EXPECT_EQ(st.send_total, rows * k - dropped);
  EXPECT_EQ(sp.send_total, experts * cap);  // every expert padded to capacity
  // A token's output is the weighted sum of its kept copies only.
  for (int64_t t = 0; t < rows; ++t) {
    const bool all_dropped = st.slot_row[t * k] < 0 && st.slot_row[t * k + 1] < 0;
    for (int64_t c = 0; c < h; ++c) {
      if (all_dropped) EXPECT_EQ(yt[t * h + c], 0.0f) << t;
      EXPECT_NEAR(yp[t * h + c], yt[t * h + c], 1e-6) << t;
      EXPECT_NEAR(yl[t * h + c], yd[t * h + c], 1e-6) << t;
    }
  }
  const Vec dt = tight.Grad(x, r), dp = padded.Grad(x, r), dd = dropless.Grad(x, r), dl = loose.Grad(x, r);
  for (size_t i = 0; i < dt.size(); ++i) {
    EXPECT_NEAR(dp[i], dt[i], 1e-5) << i;
    EXPECT_NEAR(dl[i], dd[i], 1e-5) << i;
  }
  for (size_t i = 0; i < tight.store.params().size(); ++i)
    for (int64_t j = 0; j < tight.store.params()[i].numel; ++j) {
      EXPECT_NEAR(padded.store.grad(static_cast<int>(i))[j], tight.store.grad(static_cast<int>(i))[j], 1e-5);
      EXPECT_NEAR(loose.store.grad(static_cast<int>(i))[j], dropless.store.grad(static_cast<int>(i))[j], 1e-5);
    }
}

// Central differences of L = sum r_i y_i against the analytic gradients;
// with a capacity, the same where no step flips a routing or drop decision.
void CheckFiniteDifferences(double capacity, bool pad) {
  const int64_t rows = 7, h = 8, experts = 4, k = 2, f = 6;
  Block b(rows, h, experts, k, f, nullptr, capacity, pad);
  b.SetValues();
  Vec x = Random(rows * h, 11), r = Random(rows * h, 12);
  const Vec dx = b.Grad(x, r);
  MoeStash base;
  b.Out(x, &base);
  const std::vector<int32_t> routing = base.experts;
  const std::vector<int64_t> slots = base.slot_row;
  if (capacity > 0) {
    int64_t dropped = 0;
    for (int64_t slot : slots) dropped += slot < 0;
    ASSERT_GT(dropped, 0) << "capacity " << capacity << " must drop copies here";
  }

  // Every expert must see tokens for the check to cover it.
  std::vector<int> used(experts, 0);
  for (int32_t e : routing) ++used[e];
  for (int e = 0; e < experts; ++e) ASSERT_GT(used[e], 0) << "expert " << e << " unused: pick other seeds";

  double worst = 0.0;
  int checked = 0, skipped = 0;
  std::map<std::string, std::pair<double, double>> by_kind;  // worst error, largest |grad|
  auto check = [&](const char* what, float* v, int64_t n, const float* analytic) {
    for (int64_t i = 0; i < n; ++i) {
      const float orig = v[i];
      const double eps = 1e-2;
      MoeStash sp, sm;
      v[i] = orig + static_cast<float>(eps);
      const double lp = Dot(b.Out(x, &sp), r);
      v[i] = orig - static_cast<float>(eps);
      const double lm = Dot(b.Out(x, &sm), r);
      v[i] = orig;
      if (sp.experts != routing || sm.experts != routing || sp.slot_row != slots || sm.slot_row != slots) {
        // a step across a routing (or drop) boundary
        ++skipped;
        continue;
      }
      const double numeric = (lp - lm) / (2 * eps);
      const double err = std::fabs(numeric - analytic[i]) / std::max(1.0, std::fabs(numeric));
      worst = std::max(worst, err);
      auto& k = by_kind[what];
      k.first = std::max(k.first, err);
      k.second = std::max(k.second, std::fabs(numeric));
      EXPECT_LT(err, 2e-3) << what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric;
      ++checked;
    }
  };
  check("input", x.data(), rows * h, dx.data());
  const int router = b.Index("layers.0.mlp.router.weight");
  ASSERT_GE(router, 0);
  check("router", b.store.value(router), b.store.params()[router].numel, b.store.grad(router));
  for (int e = 0; e < experts; ++e)
    for (const char* m : {"gate", "up", "down"}) {
      const int i = b.Index("layers.0.mlp.experts." + std::to_string(e) + "." + m + ".weight");
      ASSERT_GE(i, 0);
      EXPECT_TRUE(b.store.params()[i].expert);
      check(m, b.store.value(i), b.store.params()[i].numel, b.store.grad(i));
    }
  EXPECT_FALSE(b.store.params()[router].expert);
  EXPECT_LT(skipped, checked / 50 + 1) << "too many routing flips";
  std::printf("MoE FD check: %d derivatives, max error %.3g (relative to max(1, |numeric|)), %d skipped\n",
              checked, worst, skipped);
  for (const auto& [what, k] : by_kind)
    std::printf("  %-6s max error %.3g, largest |grad| %.3g\n", what.c_str(), k.first, k.second);
  for (const char* what : {"input", "router", "gate", "up", "down"}) EXPECT_GT(by_kind[what].second, 0.05) << what;
}

TEST(MoeMlp, FiniteDifferenceGradientsOfRouterExpertsAndInput) { CheckFiniteDifferences(0, false); }
TEST(MoeMlp, FiniteDifferenceGradientsWithCapacityDrops) { CheckFiniteDifferences(0.75, false); }
TEST(MoeMlp, FiniteDifferenceGradientsWithCapacityPadding) { CheckFiniteDifferences(0.75, true); }

// Each EP rank drops among its own copies, as the one-rank block does for
// each input alone.
void CheckTwoEpRanksMatchOneRank(double capacity, bool pad) {
  const int64_t rows = 9, h = 8, experts = 4, k = 2, f = 6;
  const Vec x[2] = {Random(rows * h, 21), Random(rows * h, 22)};
  const Vec r[2] = {Random(rows * h, 23), Random(rows * h, 24)};
  // Reference: all experts on one rank, each input separately; grads summed.
  Block ref(rows, h, experts, k, f, nullptr, capacity, pad);
  ref.SetValues();
  Vec ref_out[2], ref_dx[2];
  std::vector<Vec> ref_router(2);
  const int router = ref.Index("layers.0.mlp.router.weight");
  for (int q = 0; q < 2; ++q) {
    MoeStash s;
    ref_out[q] = ref.Out(x[q], &s);
    const Vec before(ref.store.grad(router), ref.store.grad(router) + ref.store.params()[router].numel);
    ref_dx[q] = ref.Grad(x[q], r[q]);
    ref_router[q].resize(before.size());
    for (size_t i = 0; i < before.size(); ++i) ref_router[q][i] = ref.store.grad(router)[i] - before[i];
  }
  LocalGroupHandle group(2);
  std::vector<std::unique_ptr<Block>> blocks(2);
  std::vector<std::unique_ptr<Comm>> comms(2);
  for (int q = 0; q < 2; ++q) comms[q] = group.Member(q);
  Vec out[2], dx[2];
  RunRanks(2, [&](int q) {
    blocks[q] = std::make_unique<Block>(rows, h, experts, k, f, comms[q].get(), capacity, pad);
    blocks[q]->SetValues();
    MoeStash s;
    out[q] = blocks[q]->Out(x[q], &s);
    dx[q] = blocks[q]->Grad(x[q], r[q]);
  });
  for (int q = 0; q < 2; ++q) {
    EXPECT_EQ(blocks[q]->store.params().size(), 1u + 3u * experts / 2) << "rank " << q << " holds half the experts";
    for (size_t i = 0; i < out[q].size(); ++i) EXPECT_NEAR(out[q][i], ref_out[q][i], 1e-5) << q;
    for (size_t i = 0; i < dx[q].size(); ++i) EXPECT_NEAR(dx[q][i], ref_dx[q][i], 1e-5) << q;
    const Block& b = *blocks[q];
    for (size_t i = 0; i < ref_router[q].size(); ++i)
      EXPECT_NEAR(b.store.grads()[b.store.params()[0].offset + i], ref_router[q][i], 1e-5) << q;
    // Expert grads: the one holding it saw both ranks' tokens.
    for (const Param& p : b.store.params()) {
      if (!p.expert) continue;
      const int j = ref.Index(p.name);
      ASSERT_GE(j, 0) << p.name;
      for (int64_t i = 0; i < p.numel; ++i)
        EXPECT_NEAR(b.store.grads()[p.offset + i], ref.store.grad(j)[i], 1e-5) << p.name;
    }
  }
}

TEST(MoeMlp, TwoEpRanksMatchOneRank) { CheckTwoEpRanksMatchOneRank(0, false); }
TEST(MoeMlp, TwoEpRanksMatchOneRankWithCapacityDrops) { CheckTwoEpRanksMatchOneRank(0.75, false); }
TEST(MoeMlp, TwoEpRanksMatchOneRankWithCapacityPadding) { CheckTwoEpRanksMatchOneRank(0.75, true); }

}  // namespace
}  // namespace dt::rt
