#include "planner/profiler/measure_compute.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "base/check.h"
#include "planner/cost/layer_ops.h"
#include "planner/profiler/bench_timer.h"
#include "runtime/bench/profiling_backend.h"
#include "runtime/model/model_chunk.h"
#include "runtime/model/param_store.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/layernorm.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/grad_norm.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/bf16.h"

namespace dt {
namespace {

using rt::Trans;

double AllMax(rt::Comm* sync, double v) {
  if (sync == nullptr || sync->size() == 1) return v;
  float f = static_cast<float>(v);
  sync->AllReduce(&f, 1, rt::ReduceOp::kMax);
  return std::max(v, static_cast<double>(f));  // float rounding never lowers our own value
}

void Barrier(rt::Comm* sync) {
  if (sync != nullptr) sync->Barrier();
}

// Device buffer of n floats filled with a small constant, freed on scope exit.
struct DevBuf {
  rt::Backend* be;
  size_t n;
  float* p;
  DevBuf(rt::Backend* b, size_t count, float v = 0.01f) : be(b), n(std::max<size_t>(count, 1)) {
    p = be->Alloc(n);
    be->Fill(p, v, n);
  }
  ~DevBuf() { be->Free(p, n); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

void Report(const MeasureConfig& cfg, const std::string& line) {
  if (cfg.progress) cfg.progress(line);
}

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

// Planner ops of one layer (forward + backward) for (tp, mbs), unfused
// attention, no dropout: the runtime kernels timed against them run none.
std::vector<Op> LayerPlannerOps(const ModelSpec& m, int seq, int tp, int mbs) {
  PlanSpec p;
  p.tp = tp;
  p.micro_batch = mbs;
  p.seq_length = seq;
  p.flash_attention = false;
  p.dropout = false;
  LayerOps ops = TransformerLayerOps(m, p, 4);
  std::vector<Op> all = ops.forward;
  all.insert(all.end(), ops.backward.begin(), ops.backward.end());
  return all;
}

}  // namespace

PlanSpec ProfilerStepPlan(const ModelSpec& m, int seq, int micro_batch, int num_microbatches) {
  PlanSpec p;
  p.micro_batch = micro_batch;
  p.num_microbatches = num_microbatches;
  p.seq_length = seq;
  p.recompute = Recompute::kNone;
  p.flash_attention = false;
  p.dropout = false;
  p.sequence_parallel = false;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

double ConcurrentMedianSeconds(const MeasureConfig& cfg, const std::function<void()>& fn) {
  DT_CHECK(cfg.be != nullptr) << "MeasureConfig without backend";
  auto call = [&] {
    fn();
    cfg.be->Synchronize();
  };
  Barrier(cfg.sync);
  double t0 = NowSeconds();
  call();
  double once = AllMax(cfg.sync, NowSeconds() - t0);
  for (int i = 1; i < cfg.warmup; ++i) call();
  // Short calls are batched so one repetition lasts >= ~2 ms (timer noise).
  int iters = once < 2e-3 ? static_cast<int>(std::min(1000.0, std::ceil(2e-3 / std::max(once, 1e-7)))) : 1;
  int reps = RepsForBudget(once * iters, cfg.point_budget_s, std::min(3, cfg.max_reps), cfg.max_reps);
  Barrier(cfg.sync);
  Timing t = TimeRepeated(call, 0, reps, iters);
  return AllMax(cfg.sync, t.median_s);
}

namespace {
// Shape i of n on cfg's backend, called as runtime/ops/linear.cc calls it.
GemmPoint MeasureGemm(const MeasureConfig& cfg, const GemmShape& g, size_t i, size_t n, const char* tag) {
  rt::Backend* be = cfg.be;
  const int64_t m = g.m, nn = g.n, k = g.k;
  DevBuf a(be, std::max(m * k, k * nn)), b(be, std::max(nn * k, k * m)), c(be, m * nn);
  std::function<void()> fn;
  switch (g.call) {
    case GemmCall::kForward:  // y[m,n] = x[m,k] W[n,k]^T
      fn = [&] { be->Gemm(Trans::kNo, Trans::kYes, m, nn, k, 1.0f, a.p, k, b.p, k, 0.0f, c.p, nn); };
      break;
    case GemmCall::kDgrad:  // dx[m,n] = dy[m,k] W[k,n]
      fn = [&] { be->Gemm(Trans::kNo, Trans::kNo, m, nn, k, 1.0f, a.p, k, b.p, nn, 0.0f, c.p, nn); };
      break;
    case GemmCall::kWgrad:  // dW[n,m] += dy[k,n]^T x[k,m]
      fn = [&] { be->Gemm(Trans::kYes, Trans::kNo, nn, m, k, 1.0f, a.p, nn, b.p, m, 1.0f, c.p, m); };
      break;
  }
  GemmPoint p;
  p.m = m;
  p.n = nn;
  p.k = k;
  p.seconds = ConcurrentMedianSeconds(cfg, fn);
  Report(cfg, std::string(tag) + "gemm " + std::to_string(i + 1) + "/" + std::to_string(n) + " " +
                  std::to_string(m) + "x" + std::to_string(nn) + "x" + std::to_string(k) + " (" + g.origin +
                  "): " + Fmt("%.3f ms, %.1f GFLOP/s", p.seconds * 1e3, p.flops() / p.seconds / 1e9));
  return p;
}
}  // namespace

namespace {
// The GEMM shapes are measured in kGemmPasses rounds, each in its own fixed
// shuffle of the shapes (the same on every rank), and a shape's time is the
// median of its rounds. Measured once each in size order, a machine whose
// speed drifts during the profile (a shared VM's) bent the efficiency curve:
// two profiles of one VM differed by +4% at the small GEMMs and -11% at the
// large ones, the ones measured last. Shuffled rounds blur every size alike.
constexpr int kGemmPasses = 3;

std::vector<size_t> PassOrder(size_t n, int pass) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937 rng(0x9E3779B9u + static_cast<unsigned>(pass));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// One round's share of the per-point budget and repetitions.
MeasureConfig PassConfig(const MeasureConfig& cfg) {
  MeasureConfig c = cfg;
  c.point_budget_s = cfg.point_budget_s / kGemmPasses;
  c.max_reps = std::max(1, cfg.max_reps / kGemmPasses);  // 5 -> 1 per round: three samples in all
  return c;
}

// Runs measure(i, pass) for every shape in every round; each shape's point
// carries the median of its rounds' times.
std::vector<GemmPoint> InRounds(size_t n, const std::function<GemmPoint(size_t, int)>& measure) {
  std::vector<GemmPoint> out(n);
  std::vector<std::vector<double>> seconds(n);
  for (int pass = 0; pass < kGemmPasses; ++pass)
    for (size_t i : PassOrder(n, pass)) {
      out[i] = measure(i, pass);
      seconds[i].push_back(out[i].seconds);
    }
  for (size_t i = 0; i < n; ++i) out[i].seconds = Median(seconds[i]);
  return out;
}

std::string RoundTag(int pass, const char* tag) {
  return "round " + std::to_string(pass + 1) + "/" + std::to_string(kGemmPasses) + " " + tag;
}
}  // namespace

std::vector<GemmPoint> MeasureGemms(const MeasureConfig& cfg, const std::vector<GemmShape>& shapes) {
  const MeasureConfig pc = PassConfig(cfg);
  return InRounds(shapes.size(), [&](size_t i, int pass) {
    return MeasureGemm(pc, shapes[i], i, shapes.size(), RoundTag(pass, "").c_str());
  });
}

void MeasureGemmsInterleaved(const MeasureConfig& cfg, const MeasureConfig& second_cfg,
                             double second_max_flops, const std::vector<GemmShape>& shapes,
                             std::vector<GemmPoint>* first, std::vector<GemmPoint>* second) {
  const MeasureConfig pc = PassConfig(cfg), sc = PassConfig(second_cfg);
  auto twin = [&](size_t i) { return shapes[i].flops() <= second_max_flops; };  // measured on both
  std::vector<GemmPoint> second_points(shapes.size());
  std::vector<std::vector<double>> second_seconds(shapes.size());
  std::vector<GemmPoint> a = InRounds(shapes.size(), [&](size_t i, int pass) {
    GemmPoint p = MeasureGemm(pc, shapes[i], i, shapes.size(), RoundTag(pass, "").c_str());
    if (twin(i)) {  // right after its first-backend twin
      second_points[i] = MeasureGemm(sc, shapes[i], i, shapes.size(), RoundTag(pass, "bf16 ").c_str());
      second_seconds[i].push_back(second_points[i].seconds);
    }
    return p;
  });
  first->insert(first->end(), a.begin(), a.end());
  for (size_t i = 0; i < shapes.size(); ++i)
    if (twin(i)) {
      second_points[i].seconds = Median(second_seconds[i]);
      second->push_back(second_points[i]);
    }
}

double MeasureCopyBandwidth(const MeasureConfig& cfg, int64_t bytes) {
  size_t n = static_cast<size_t>(bytes / 4);
  DevBuf src(cfg.be, n, 1.0f), dst(cfg.be, n, 0.0f);
  double t = ConcurrentMedianSeconds(cfg, [&] { cfg.be->Copy(dst.p, src.p, n); });
  double bw = 2.0 * n * 4 / t;
  Report(cfg, Fmt("stream copy %.0f MiB per rank: %.2f GB/s per rank", bytes / 1048576.0, bw / 1e9));
  return bw;
}

double MeasureTinyOp(const MeasureConfig& cfg) {
  DevBuf x(cfg.be, 1), y(cfg.be, 1), z(cfg.be, 1);
  double t = ConcurrentMedianSeconds(cfg, [&] { cfg.be->Add(x.p, y.p, z.p, 1); });
  Report(cfg, Fmt("tiny op (1-element add): %.3f us", t * 1e6));
  return t;
}

std::vector<KernelSample> MeasureAttention(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                           const std::vector<int>& tps,
                                           const std::vector<int>& mbs, double max_flops) {
  std::vector<KernelSample> out;
  for (int tp : tps) {
    for (int b : mbs) {
      KernelSample s;
      for (const Op& op : LayerPlannerOps(m, seq, tp, b)) {
        if (op.kind != OpKind::kAttention) continue;
        s.planner_flops += op.flops;
        s.planner_bytes += op.bytes;
        s.planner_ops += 1;
      }
      if (s.planner_flops / 3 > max_flops) continue;  // forward = 1/3 of fwd + bwd
      rt::AttentionDims d{seq, b, m.heads / tp, m.head_dim()};
      DevBuf qkv(cfg.be, d.QkvNumel()), probs(cfg.be, d.ProbsNumel()), o(cfg.be, d.OutNumel()),
          dout(cfg.be, d.OutNumel()), dqkv(cfg.be, d.QkvNumel()), scratch(cfg.be, seq * seq);
      s.seconds = ConcurrentMedianSeconds(cfg, [&] {
        rt::AttentionForward(*cfg.be, d, qkv.p, probs.p, o.p);
        rt::AttentionBackward(*cfg.be, d, qkv.p, probs.p, dout.p, dqkv.p, scratch.p);
      });
      s.what = m.name + " attention tp" + std::to_string(tp) + " mbs" + std::to_string(b);
      out.push_back(s);
      Report(cfg, s.what + Fmt(": fwd+bwd %.3f ms, %.1f GFLOP/s (planner FLOPs)", s.seconds * 1e3,
                               s.planner_flops / s.seconds / 1e9));
    }
  }
  return out;
}

std::vector<KernelSample> MeasureLayerMemoryOps(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                                const std::vector<int>& tps, int mbs) {
  std::vector<KernelSample> out;
  rt::Backend* be = cfg.be;
  for (int tp : tps) {
    KernelSample s;
    for (const Op& op : LayerPlannerOps(m, seq, tp, mbs)) {
      if (op.kind != OpKind::kMemoryBound) continue;
      s.planner_bytes += op.bytes;
      s.planner_ops += 1;
    }
    const int64_t rows = static_cast<int64_t>(seq) * mbs, h = m.hidden;
    const int64_t fl = (m.ffn_hidden + tp - 1) / tp, ql = 3 * h / tp;
    DevBuf x(be, rows * h), y(be, rows * h), z(be, rows * h), mean(be, rows), rstd(be, rows),
        gamma(be, h, 1.0f), beta(be, h), dgamma(be, h), dbeta(be, h), f(be, rows * fl),
        act(be, rows * fl), qkv(be, rows * ql), bias(be, std::max({h, fl, ql}));
    s.seconds = ConcurrentMedianSeconds(cfg, [&] {
      // Forward, in gpt_layer.cc's order (GEMMs and collectives left out).
      rt::LayerNormForward(*be, x.p, gamma.p, beta.p, rows, h, y.p, mean.p, rstd.p);
      be->AddBias(qkv.p, bias.p, rows, ql);
      be->AddBias(z.p, bias.p, rows, h);
      be->Add(x.p, z.p, y.p, rows * h);
      rt::LayerNormForward(*be, y.p, gamma.p, beta.p, rows, h, z.p, mean.p, rstd.p);
      be->AddBias(f.p, bias.p, rows, fl);
      be->GeluForward(f.p, act.p, rows * fl);
      be->AddBias(z.p, bias.p, rows, h);
      be->Add(y.p, z.p, x.p, rows * h);
      // Backward.
      be->Copy(z.p, x.p, rows * h);
      be->BiasGrad(x.p, dbeta.p, rows, h);
      be->GeluBackward(f.p, act.p, act.p, rows * fl);
      be->BiasGrad(act.p, bias.p, rows, fl);
      rt::LayerNormBackward(*be, y.p, gamma.p, mean.p, rstd.p, x.p, rows, h, z.p, dgamma.p, dbeta.p);
      be->Axpy(1.0f, z.p, x.p, rows * h);
      be->Copy(y.p, x.p, rows * h);
      be->BiasGrad(x.p, dbeta.p, rows, h);
      be->BiasGrad(qkv.p, bias.p, rows, ql);
      rt::LayerNormBackward(*be, y.p, gamma.p, mean.p, rstd.p, x.p, rows, h, z.p, dgamma.p, dbeta.p);
      be->Axpy(1.0f, z.p, y.p, rows * h);
    });
    s.what = m.name + " layer memory-bound ops tp" + std::to_string(tp) + " mbs" + std::to_string(mbs);
    out.push_back(s);
    Report(cfg, s.what + Fmt(": %.3f ms, %.2f GB/s (planner bytes)", s.seconds * 1e3,
                             s.planner_bytes / s.seconds / 1e9));
  }
  return out;
}

namespace {
// The linear-layer GEMMs a timing decorator saw, per planner key (m, n, k):
// runtime calls map back as planner/profiler/gemm_shapes.h describes
// (forward NT and dgrad NN keep m, n, k; wgrad TN computes the planner's
// transpose, so its m and n swap). Only keys among `ops`' GEMMs are kept.
std::vector<GemmPoint> InStepGemms(const rt::bench::ProfilingBackend& timing, const std::vector<Op>& ops) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> planner;
  for (const Op& op : ops)
    if (op.kind == OpKind::kGemm && op.batch == 1) planner.insert({op.m, op.n, op.k});
  std::map<std::tuple<int64_t, int64_t, int64_t>, rt::bench::OpStat> by_key;
  for (const auto& [shape, stat] : timing.gemm_times()) {
    std::tuple<int64_t, int64_t, int64_t> key{shape.m, shape.n, shape.k};
    if (shape.ta == Trans::kYes && shape.tb == Trans::kNo) key = {shape.n, shape.m, shape.k};
    else if (shape.ta == Trans::kYes) continue;
    if (!planner.count(key)) continue;
    by_key[key].calls += stat.calls;
    by_key[key].seconds += stat.seconds;
  }
  std::vector<GemmPoint> out;
  for (const auto& [key, stat] : by_key) {
    if (stat.calls <= 0) continue;
    GemmPoint g;
    std::tie(g.m, g.n, g.k) = key;
    g.seconds = stat.seconds / static_cast<double>(stat.calls);
    out.push_back(g);
  }
  return out;
}
}  // namespace

std::vector<GemmPoint> MedianOverSteps(const std::vector<std::vector<GemmPoint>>& steps) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<double>> by_shape;
  for (const std::vector<GemmPoint>& step : steps)
    for (const GemmPoint& g : step) by_shape[{g.m, g.n, g.k}].push_back(g.seconds);
  std::vector<GemmPoint> out;
  for (const auto& [key, seconds] : by_shape) {
    GemmPoint g;
    std::tie(g.m, g.n, g.k) = key;
    g.seconds = Median(seconds);
    out.push_back(g);
  }
  return out;
}

std::vector<ModelSample> MeasureModelSteps(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                           const std::vector<int>& mbs, double recompute_max_step_s,
                                           Precision precision) {
  std::vector<ModelSample> out;
  for (int b : mbs) {
    PlanSpec p = ProfilerStepPlan(m, seq, b, 1);
    p.precision = precision;
    ModelSample s;
    s.model = m;
    s.plan = p;
    const int e = 4;
    LayerOps emb = EmbeddingOps(m, p, e), layer = TransformerLayerOps(m, p, e), head = HeadOps(m, p, e);
    auto add = [&](const std::vector<Op>& v, int times, std::vector<Op>* to) {
      for (int i = 0; i < times; ++i)
        for (const Op& op : v)
          if (op.kind != OpKind::kCollective) to->push_back(op);
    };
    add(emb.forward, 1, &s.ops);
    add(layer.forward, m.num_layers, &s.ops);
    add(head.forward, 1, &s.ops);
    add(head.backward, 1, &s.ops);
    add(layer.backward, m.num_layers, &s.ops);
    add(emb.backward, 1, &s.ops);
    // The step runs on a timing decorator when the GEMMs are timed in situ.
    rt::bench::ProfilingBackend timing(*cfg.be, rt::bench::ProfilingBackend::kGemmsOnly);
    rt::Backend& be = cfg.time_gemms_in_step ? static_cast<rt::Backend&>(timing) : *cfg.be;
    std::vector<int32_t> tokens(static_cast<size_t>(seq) * b), targets(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 7919) % m.vocab);
      targets[i] = static_cast<int32_t>((i * 104729 + 1) % m.vocab);
    }
    rt::OptimizerOptions oo;
    oo.lr.total_steps = 1 << 30;
    // One model chunk and optimizer per recompute mode (the same seed).
    struct Trainer {
      rt::ModelChunk chunk;
      rt::Optimizer opt;
      Trainer(const ModelSpec& m, const PlanSpec& p, rt::Backend& be, const rt::OptimizerOptions& oo)
          : chunk(m, p, /*chunk=*/0, /*tp_rank=*/0, rt::ParallelComms{}, be, 1234),
            opt({&chunk.params()}, {true}, oo, rt::OptimizerComms{}) {}
    };
    Trainer plain(m, p, be, oo);
    s.params = plain.chunk.params().numel();
    // A whole training step as dtrun runs it on one rank: the optimizer
    // pass between steps leaves the caches as the next forward finds them.
    auto step = [&](Trainer& t) {
      float loss = 0;
      t.chunk.params().ZeroGrads();
      t.chunk.Forward(0, nullptr, tokens.data(), targets.data(), &loss);
      t.chunk.Backward(0, nullptr, 1.0f);
      t.opt.StartGradSync(0);
      t.opt.Step();
      cfg.be->Synchronize();
    };
    // Ranks start each step together and a step lasts as long as its
    // slowest rank (as in a synchronous job): median over steps of the max
    // over ranks, not the max of per-rank medians.
    auto timed = [&](Trainer& t) {
      Barrier(cfg.sync);
      const double t0 = NowSeconds();
      step(t);
      return AllMax(cfg.sync, NowSeconds() - t0);
    };
    double once = 0;
    for (int i = 0; i < std::max(1, cfg.warmup); ++i) once = timed(plain);
    // Full recompute beside it where the step is short enough (AllMax: every
    // rank takes the same decision).
    std::unique_ptr<Trainer> full;
    if (recompute_max_step_s > 0 && once <= recompute_max_step_s) {
      PlanSpec pf = p;
      pf.recompute = Recompute::kFull;
      // On the same backend as the plain step (the GEMM timer's cost alike);
      // the in-step GEMM times are read right after each plain step only.
      full = std::make_unique<Trainer>(m, pf, be, oo);
      add(TransformerLayerOps(m, pf, e).recompute, m.num_layers, &s.recompute_ops);
      for (int i = 0; i < std::max(1, cfg.warmup); ++i) timed(*full);
    }
    std::vector<double> times, full_times;
    // In-step GEMM times per step (mean per call within the step), so that
    // a shape's time is the median over steps: one call descheduled on a
    // shared VM (several ms) once made a shape's mean over all steps' calls
    // 4x its usual time, and a plan using it was priced 60% slow.
    std::vector<std::vector<GemmPoint>> gemm_steps;
    // 3 x --reps steps (at least 5), fewer for long steps: those beyond
    // 8 point budgets stop at 5 (a 0.6 s step of gpt-small-cpu at mbs 16
    // would otherwise take 9 s of the profile's minute for 15 repeats).
    const int reps = RepsForBudget(once, 8 * cfg.point_budget_s, 5, std::max(5, 3 * cfg.max_reps));
    // With full recompute beside it, a short step follows an untimed step of
    // its own kind, as every step of a dtrun job follows one of the same plan:
    // straight after the other trainer's step, gpt-tiny's 1 / 2 / 4 ms steps
    // measured 11 / 7 / 5% slower on a Zen 5 VM (their weights and activations
    // no longer in the caches) and its 8 ms step no slower (its data outgrows
    // the caches anyway), so steps above 10 ms skip the extra step.
    const bool warm_first = once <= 0.01;
    auto timed_warm = [&](Trainer& t) {
      if (warm_first) step(t);
      return timed(t);
    };
    for (int i = 0; i < reps; ++i) {
      if (full && i % 2 == 1) full_times.push_back(timed_warm(*full));
      if (full && warm_first) step(plain);
      timing.Reset();
      times.push_back(timed(plain));
      if (cfg.time_gemms_in_step) gemm_steps.push_back(InStepGemms(timing, s.ops));
      if (full && i % 2 == 0) full_times.push_back(timed_warm(*full));
    }
    std::sort(times.begin(), times.end());
    s.seconds = times[times.size() / 2];
    if (!full_times.empty()) {
      std::sort(full_times.begin(), full_times.end());
      s.full_recompute_seconds = full_times[full_times.size() / 2];
    }
    s.what = m.name + (precision == Precision::kBf16 ? " bf16" : "") + " training step mbs" + std::to_string(b);
    s.in_step_gemms = MedianOverSteps(gemm_steps);
    out.push_back(std::move(s));
    std::string line = out.back().what + Fmt(": %.3f ms (%.0f planner ops)", out.back().seconds * 1e3,
                                             static_cast<double>(out.back().ops.size()));
    if (out.back().full_recompute_seconds > 0)
      line += Fmt(", with full recompute %.3f ms", out.back().full_recompute_seconds * 1e3);
    Report(cfg, line);
  }
  return out;
}

std::vector<ConversionPoint> MeasureBf16Conversions(const MeasureConfig& cfg, const std::vector<int64_t>& elements) {
  std::vector<ConversionPoint> out;
  for (int64_t n : elements) {
    std::vector<float> src(static_cast<size_t>(n)), dst(src.size());
    std::vector<rt::bf16_t> mid(src.size());
    for (int64_t i = 0; i < n; ++i) src[i] = 1e-3f * static_cast<float>(i % 4099) - 2.0f;
    ConversionPoint c;
    c.elements = n;
    c.narrow_s = ConcurrentMedianSeconds(cfg, [&] { rt::NarrowToBf16(src.data(), mid.data(), n); }) / n;
    c.widen_s = ConcurrentMedianSeconds(cfg, [&] { rt::WidenFromBf16(mid.data(), dst.data(), n); }) / n;
    out.push_back(c);
    Report(cfg, Fmt("bf16 conversions of %.0f elements: narrow %.3f ns, widen %.3f ns per element",
                    static_cast<double>(n), c.narrow_s * 1e9, c.widen_s * 1e9));
  }
  return out;
}

double MeasureOptimizerStep(const MeasureConfig& cfg, int64_t params) {
  rt::ParamStore store;
  rt::Param p;
  p.name = "layers.0.mlp.fc1.weight";
  p.full_shape = {params / 1024, 1024};
  p.local_shape = p.full_shape;
  p.numel = (params / 1024) * 1024;
  store.Add(p);
  store.Finalize();
  for (int64_t i = 0; i < store.numel(); ++i) store.grads()[i] = 1e-3f;
  rt::AdamWShard adam(store, 0, store.numel());
  rt::AdamWConfig ac;
  int64_t step = 0;
  double t = ConcurrentMedianSeconds(cfg, [&] {
    double sq = rt::LocalGradSquares(store, 0, store.numel(), false);
    float scale = sq > 0 ? 1.0f : 0.0f;
    adam.Update(store, ac, ++step, 1e-4f, scale);
  });
  const double n = static_cast<double>(store.numel());
  Report(cfg, Fmt(n >= 1e6 ? "optimizer step (grad norm + AdamW) over %.1fM params: %.3f ms"
                           : "optimizer step (grad norm + AdamW) over %.0fK params: %.3f ms",
                  n >= 1e6 ? n / 1e6 : n / 1e3, t * 1e3));
  return t * params / static_cast<double>(store.numel());
}

}  // namespace dt
