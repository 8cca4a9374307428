#include "planner/profiler/measure_step_comm.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "base/check.h"
#include "planner/profile/interp.h"
#include "planner/profile/profile.h"
#include "planner/schedule/build_schedule.h"
#include "planner/spec/rank_grid.h"
#include "runtime/comm/mpi_comm.h"
#include "runtime/comm/timed_comm.h"
#include "runtime/data/data_loader.h"
#include "runtime/data/markov_source.h"
#include "runtime/exec/interpreter.h"
#include "runtime/model/model_chunk.h"
#include "runtime/optim/optimizer.h"

namespace dt {
namespace {

constexpr int kWarmupSteps = 2;
constexpr int kTimedSteps = 6;

// Runs kTimedSteps steps of plan p (after the warmup) on every rank with
// its groups timed; returns this rank's median call by (operation, size).
std::map<std::pair<std::string, double>, double> TimeStepCollectives(const MeasureConfig& cfg, const ModelSpec& m,
                                                                     const PlanSpec& p, int world_rank) {
  StatusOr<RankGrid> grid = RankGrid::Create(p.tp, p.cp, p.dp, p.pp, p.order);
  DT_CHECK(grid.ok()) << grid.status().message();
  StatusOr<rt::Groups> groups_or = rt::BuildGroups(*grid, world_rank, p.ep);
  DT_CHECK(groups_or.ok()) << groups_or.status().message();
  rt::Groups& groups = *groups_or;
  rt::CommTimes times;
  times.keep_each_call = true;  // for the median call below
  auto timed = [&](std::unique_ptr<rt::Comm>& c, const char* label) -> rt::Comm* {
    if (!c || c->size() < 2) return nullptr;
    c = std::make_unique<rt::TimedComm>(std::move(c), label, &times);
    return c.get();
  };
  rt::Comm* tp = timed(groups.tp, "tp");
  rt::Comm* dp = timed(groups.dp, "dp");
  rt::ModelChunk chunk(m, p, /*chunk=*/0, groups.coord.tp, rt::ParallelComms{tp, dp, nullptr, nullptr, nullptr, nullptr},
                       *cfg.be, 1234);
  rt::OptimizerOptions oo;
  oo.lr.total_steps = 1 << 30;
  oo.zero_stage = p.zero_stage;
  oo.bucket_bytes = p.dp_bucket_bytes;
  rt::Optimizer opt({&chunk.params()}, {true}, oo, rt::OptimizerComms{dp, tp, nullptr, nullptr, nullptr, nullptr});
  rt::MarkovOptions mo;
  mo.vocab = std::max(2, std::min(m.vocab, 256));  // token ids the model's embedding holds
  StatusOr<rt::MarkovSource> src = rt::MarkovSource::Create(mo);
  DT_CHECK(src.ok()) << src.status().message();
  StatusOr<rt::DataLoader> loader = rt::DataLoader::Create(std::make_shared<rt::MarkovSource>(std::move(*src)),
                                                          rt::BatchShapeFor(p, groups.coord.dp, /*seed=*/1));
  DT_CHECK(loader.ok()) << loader.status().message();
  StatusOr<std::vector<ActionList>> schedule = BuildSchedule(p);
  DT_CHECK(schedule.ok()) << schedule.status().message();
  rt::Interpreter interp(p, (*schedule)[0], {&chunk}, &opt, nullptr, &*loader);
  for (int s = 0; s < kWarmupSteps + kTimedSteps; ++s) {
    if (s == kWarmupSteps) times.Clear();
    if (cfg.sync != nullptr) cfg.sync->Barrier();  // steps start together, as dtrun's do
    interp.RunStep(s);
    loader->Advance();
  }
  // The median call: a size the step moves once per step has only
  // kTimedSteps calls, and one descheduled call would set its mean.
  std::map<std::pair<std::string, double>, double> per_call;
  for (const auto& [key, e] : times.by_call) {
    if (e.each.empty()) continue;
    std::vector<double> v = e.each;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    per_call[key] = v[v.size() / 2];
  }
  return per_call;
}

// The isolated series' time at `bytes`, log-log between its points.
double AloneSeconds(const CollSeries& s, double bytes) {
  Curve c;
  for (const CollSample& x : s.samples) {
    c.x.push_back(x.bytes);
    c.y.push_back(x.seconds);
  }
  return Interpolate(c, bytes, Scale::kLog, Scale::kLog).value;
}

// One plan's times per (collective, size), the least over ranks, folded
// into *best (the least over plans). The plans are symmetric, so every rank
// saw the same calls; checked (count and a digest of the sizes, max and min
// over ranks) before the element-wise reduction, which needs equal lists. A
// plan whose ranks disagree is left out on every rank.
void LeastTimesOverRanks(const MeasureConfig& cfg, const std::map<std::pair<std::string, double>, double>& mine,
                         std::map<std::pair<std::string, double>, double>* best) {
  if (cfg.sync != nullptr && cfg.sync->size() > 1) {
    double digest = 0;
    int k = 0;
    for (const auto& kv : mine) digest += std::fmod(kv.first.second * (++k) + kv.first.first.size(), 65521.0);
    std::vector<float> check = {static_cast<float>(mine.size()), -static_cast<float>(mine.size()),
                                static_cast<float>(std::fmod(digest, 65521.0)),
                                -static_cast<float>(std::fmod(digest, 65521.0))};
    cfg.sync->AllReduce(check.data(), check.size(), rt::ReduceOp::kMax);
    if (check[0] != -check[1] || check[2] != -check[3]) return;
  }
  std::vector<float> v;
  for (const auto& kv : mine) v.push_back(static_cast<float>(-kv.second));
  if (cfg.sync != nullptr && !v.empty()) cfg.sync->AllReduce(v.data(), v.size(), rt::ReduceOp::kMax);
  size_t i = 0;
  for (const auto& kv : mine) {
    const double t = -static_cast<double>(v[i++]);
    auto it = best->find(kv.first);
    if (it == best->end() || t < it->second) (*best)[kv.first] = t;
  }
}

}  // namespace

std::vector<CollSeries> MeasureStepCollectives(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                               int world_size, int world_rank) {
  std::vector<CollSeries> out;
  const int g = world_size;
  if (g < 2 || m.moe() || m.heads % g != 0 || m.hidden % g != 0 || m.kv_heads % g != 0) return out;
  std::vector<PlanSpec> plans;
  auto base = [&](int mbs) { return ProfilerStepPlan(m, seq, mbs, 2); };
  for (int mbs : {1, 2, 4, 8}) {  // the activation sizes tp plans move
    PlanSpec p = base(mbs);
    p.tp = g;
    p.sequence_parallel = true;
    plans.push_back(p);
  }
  for (int zero : {0, 1, 3}) {  // gradient buckets, ZeRO shards, ZeRO-3's per-layer units
    PlanSpec p = base(2);
    p.dp = g;
    p.zero_stage = zero;
    plans.push_back(p);
  }
  // The plans are timed kRounds times (odd rounds in reverse order), and a
  // size keeps its median round: one plan's steps last a few milliseconds,
  // so a neighbour's burst on a shared VM can fill the whole window. One
  // profile on a Zen 5 VM measured gpt-tiny's 16 KiB all-gather in step at
  // 17.2 us where two others measured 6.5-6.9 us and dtrun's calls of that
  // plan took 7.6 us: TP plans were priced 38% slow for it.
  constexpr int kRounds = 3;
  // Per size, each round's least time (over ranks, then over that round's plans).
  std::map<std::pair<std::string, double>, std::vector<double>> rounds;
  for (int round = 0; round < kRounds; ++round) {
    std::map<std::pair<std::string, double>, double> best;
    for (size_t at = 0; at < plans.size(); ++at) {
      const PlanSpec& p = plans[round % 2 == 0 ? at : plans.size() - 1 - at];
      LeastTimesOverRanks(cfg, TimeStepCollectives(cfg, m, p, world_rank), &best);
    }
    for (const auto& [key, t] : best) rounds[key].push_back(t);
  }
  std::map<std::pair<std::string, double>, double> best;
  for (auto& [key, v] : rounds) {
    std::sort(v.begin(), v.end());
    best[key] = v[v.size() / 2];  // every rank holds the same values: the same median
  }
  std::map<std::string, CollSeries> by_op;
  for (const auto& [key, t] : best) {
    CollSeries& s = by_op[key.first];
    for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather})
      if (key.first == CollectiveKey(k)) s.kind = k;
    s.group_size = g;
    s.samples.push_back({key.second, t});  // the map orders sizes ascending
  }
  for (auto& [op, s] : by_op) out.push_back(s);
  return out;
}

std::vector<double> ApplyInStepCollectives(const std::vector<CollSeries>& in_step, std::vector<CollSeries>* series) {
  std::vector<double> ratios;
  for (const CollSeries& is : in_step) {
    for (CollSeries& s : *series) {
      if (s.kind != is.kind || s.group_size != is.group_size || s.samples.empty()) continue;
      std::vector<double> r;
      for (const CollSample& x : is.samples) {
        const double alone = AloneSeconds(s, x.bytes);
        r.push_back(alone > 0 ? x.seconds / alone : 1.0);
      }
      ratios.insert(ratios.end(), r.begin(), r.end());
      for (CollSample& pt : s.samples) {
        double nearest = 4.0;  // a factor 4 in size at most
        double ratio = 1.0;
        for (size_t i = 0; i < is.samples.size(); ++i) {
          const double d = std::max(pt.bytes, is.samples[i].bytes) / std::min(pt.bytes, is.samples[i].bytes);
          if (d <= nearest) nearest = d, ratio = r[i];
        }
        pt.seconds *= ratio;
      }
    }
  }
  return ratios;
}

}  // namespace dt
