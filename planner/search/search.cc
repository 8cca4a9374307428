#include "planner/search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/lower/pipeline_bound.h"
#include "planner/lower/simulate.h"
#include "planner/search/enumerate.h"

namespace dt {
namespace {

// Runs fn(i) for i in [0, n) on `threads` workers pulling from a shared counter.
template <typename Fn>
void ParallelFor(int64_t n, int threads, Fn fn) {
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

// Keeps the N smallest step times seen; threshold() is the N-th (or +inf).
class TopTimes {
 public:
  explicit TopTimes(int n) : n_(n) {}
  void Add(double t) {
    std::lock_guard<std::mutex> lock(mu_);
    times_.insert(t);
    if (static_cast<int>(times_.size()) > n_) times_.erase(std::prev(times_.end()));
    if (static_cast<int>(times_.size()) == n_) threshold_.store(*times_.rbegin());
  }
  double threshold() const { return threshold_.load(); }

 private:
  int n_;
  std::mutex mu_;
  std::multiset<double> times_;
  std::atomic<double> threshold_{1e300};
};

// Whether the search adds, beside full recompute of every layer, full
// recompute of only the first N layers of each chunk: when the user fixed
// neither the recompute mode nor N, for frameworks that express it
// (Megatron-LM's --recompute-method block; torchtitan's and DeepSpeed's
// full modes checkpoint every layer).
bool SearchesPartialRecompute(const SearchConstraints& k) {
  return !k.recompute && k.recompute_num_layers == 0 &&
         (k.framework == Framework::kAny || k.framework == Framework::kMegatron);
}

// The fewest layers per chunk whose full recompute lets a fitting
// every-layer full-recompute plan still fit, when that is fewer than its
// largest chunk; 0 otherwise. Memory only shrinks as N grows (fewer
// layers keep their activations) up to the last layer of the chunk, and
// time only grows: that N is the one partial plan worth simulating.
int FewestRecomputedLayersThatFit(const ModelSpec& m, const PlanSpec& full, const HardwareProfile& hw) {
  if (full.recompute != Recompute::kFull || full.recompute_num_layers != 0) return 0;
  const int largest = *std::max_element(full.layers_per_chunk.begin(), full.layers_per_chunk.end());
  if (largest < 2) return 0;
  PlanSpec q = full;
  // Where the plan fits without recompute, that plan is faster than any
  // partial one and is a candidate of its own.
  q.recompute = Recompute::kNone;
  if (PredictMemory(m, q, hw).fits) return 0;
  q.recompute = Recompute::kFull;
  auto fits = [&](int n) {
    q.recompute_num_layers = n;
    return PredictMemory(m, q, hw).fits;
  };
  if (!fits(largest - 1)) return 0;
  int lo = 1, hi = largest - 1;  // fits(hi)
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (fits(mid)) hi = mid; else lo = mid + 1;
  }
  return hi;
}

}  // namespace

StatusOr<SearchResult> SearchPlans(const ModelSpec& m, const ClusterSpec& c,
                                   const HardwareProfile& profile, const SearchConstraints& k,
                                   const SearchOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  HardwareProfile for_precision;
  const HardwareProfile& hw = ProfileForPrecision(profile, k.precision, &for_precision);
  DT_RETURN_IF_ERROR(CheckClusterFitsProfile(c, hw));
  DT_RETURN_IF_ERROR(CheckPrecision(k.precision, m, hw));
  DT_ASSIGN_OR_RETURN(Enumeration e, EnumeratePlans(m, c, k));
  SearchResult r;
  r.grids_considered = e.grids_considered;
  r.plans_considered = e.plans_considered;
  r.grid_rejects = e.grid_rejects;
  r.plan_rejects = e.plan_rejects;
  int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  r.threads_used = threads;
  int64_t n = static_cast<int64_t>(e.plans.size());

  // 1. Memory check and lower bound for every candidate. Only the fit and
  // the peak over capacity are kept (a full Prediction per candidate, its
  // per-stage vectors included, would cost more than computing it); the
  // closest non-fitting plan's prediction is recomputed at the end.
  struct Fit {
    bool fits = false;
    double used = 0;  // peak memory / capacity
  };
  std::vector<Fit> mem(n);
  std::vector<double> bound(n, 0);
  auto check = [&](int64_t i) {
    const Prediction pm = PredictMemory(m, e.plans[i], hw);
    mem[i] = Fit{pm.fits, pm.peak_memory_bytes / pm.capacity_bytes};
    if (mem[i].fits)
      bound[i] = StepTimeLowerBound(e.plans[i], ComputePlanCosts(m, c, e.plans[i], hw, /*track_outside=*/false));
  };
  ParallelFor(n, threads, check);
  // 1b. Partial full recompute: beside each fitting full-recompute plan, the
  // same plan recomputing only the fewest layers per chunk that fit.
  if (SearchesPartialRecompute(k)) {
    std::vector<int> fewest(n, 0);
    ParallelFor(n, threads, [&](int64_t i) {
      if (mem[i].fits) fewest[i] = FewestRecomputedLayersThatFit(m, e.plans[i], hw);
    });
    for (int64_t i = 0; i < n; ++i) {
      if (fewest[i] == 0) continue;
      PlanSpec q = e.plans[i];
      q.recompute_num_layers = fewest[i];
      e.plans.push_back(std::move(q));
      ++r.plans_considered;
    }
    const int64_t added = static_cast<int64_t>(e.plans.size()) - n;
    mem.resize(n + added);
    bound.resize(n + added, 0);
    ParallelFor(added, threads, [&](int64_t j) { check(n + j); });
    n += added;
  }
  std::vector<int64_t> order;
  int64_t closest = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (mem[i].fits) {
      order.push_back(i);
    } else {
      ++r.plan_rejects["does not fit in memory"];
      if (closest < 0 || mem[i].used < mem[closest].used) closest = i;
    }
  }
  r.fitting = static_cast<int64_t>(order.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return bound[a] < bound[b]; });

  // 2. Simulate in lower-bound order, skipping plans that cannot reach the top N.
  const int top_n = std::max(1, opt.top);
  TopTimes best(top_n);
  // Indexed by position in `order` (fitting plans only): a slot per
  // enumerated plan would zero-fill tens of MB for the 1T search.
  std::vector<std::optional<Prediction>> sim(order.size());
  // Pipelined plans that pass the bound get the schedule-aware one
  // (pipeline_bound.h) before their simulation; -1: not computed.
  std::vector<double> pipe_bound(order.size(), -1.0);
  auto pipeline_bound = [&](int64_t j) {
    const PlanSpec& p = e.plans[order[j]];
    if (p.pp < 2) return 0.0;
    auto b = PipelineLowerBound(p, ComputePlanCosts(m, c, p, hw, /*track_outside=*/false));
    return b.ok() ? *b : 0.0;  // a schedule error surfaces from SimulatePlan
  };
  std::mutex err_mu;
  Status first_error;
  ParallelFor(static_cast<int64_t>(order.size()), threads, [&](int64_t j) {
    int64_t i = order[j];
    if (bound[i] > best.threshold()) return;
    // Costs and schedule once, for the schedule-aware bound and the simulation.
    auto priced = PricePlan(m, c, e.plans[i], hw);
    if (!priced.ok()) {
      std::lock_guard<std::mutex> lock(err_mu);
      if (first_error.ok()) first_error = priced.status();
      return;
    }
    if (e.plans[i].pp >= 2) {
      auto b = PipelineLowerBound(e.plans[i], priced->costs, priced->schedule);
      pipe_bound[j] = b.ok() ? *b : 0.0;
    } else {
      pipe_bound[j] = 0.0;
    }
    if (pipe_bound[j] > best.threshold()) return;
    auto pred = SimulatePriced(m, c, e.plans[i], hw, std::move(priced).value());
    if (!pred.ok()) {
      std::lock_guard<std::mutex> lock(err_mu);
      if (first_error.ok()) first_error = pred.status();
      return;
    }
    best.Add(pred->step_time_s);
    sim[j] = std::move(pred).value();
  });
  if (!first_error.ok()) return first_error;

  // 3. Deterministic ranking and counts against the final threshold.
  // A plan counts as pruned when either bound exceeds the final threshold
  // (the threshold only falls, so a plan skipped on the way has one that
  // does); the schedule-aware bound is computed wherever the other passes.
  std::vector<int64_t> done;  // positions in `order`
  const double final_threshold = best.threshold();
  for (int64_t j = 0; j < static_cast<int64_t>(order.size()); ++j) {
    bool pruned = bound[order[j]] > final_threshold;
    if (!pruned) {
      if (pipe_bound[j] < 0) pipe_bound[j] = pipeline_bound(j);
      pruned = pipe_bound[j] > final_threshold;
    }
    if (pruned) {
      ++r.pruned;
    } else {
      ++r.simulated;
    }
    if (sim[j]) done.push_back(j);
  }
  // Ties in time go to the earlier enumerated plan, as before.
  std::sort(done.begin(), done.end(), [&](int64_t a, int64_t b) {
    if (sim[a]->step_time_s != sim[b]->step_time_s) return sim[a]->step_time_s < sim[b]->step_time_s;
    return order[a] < order[b];
  });
  for (int64_t j : done) {
    if (static_cast<int>(r.top.size()) >= top_n) break;
    r.top.push_back({e.plans[order[j]], *sim[j]});
  }
  if (r.top.empty() && closest >= 0) r.closest = RankedPlan{e.plans[closest], PredictMemory(m, e.plans[closest], hw)};
  r.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace dt
