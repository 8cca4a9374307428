#include "runtime/bench/step_runner.h"

#include <chrono>
#include <cmath>
#include <random>

#include "base/check.h"
#include "runtime/model/model_chunk.h"
#include "runtime/optim/optimizer.h"

namespace dt::rt::bench {

ModelSpec BenchModel(const BenchConfig& c) {
  ModelSpec m;
  m.name = "gpt2-small-stack";
  m.family = ModelFamily::kGpt;
  m.num_layers = c.layers;
  m.hidden = c.hidden;
  m.heads = c.heads;
  m.kv_heads = c.heads;
  m.ffn_hidden = c.ffn;
  m.vocab = c.vocab;
  m.seq_length = c.seq;
  m.max_position = c.seq;
  m.tied_embeddings = true;
  return m;
}

PlanSpec BenchPlan(const BenchConfig& c, int dp) {
  PlanSpec p;
  p.dp = dp;
  p.micro_batch = c.micro_batch;
  p.num_microbatches = 1;
  p.seq_length = c.seq;
  p.recompute = Recompute::kNone;
  p.flash_attention = false;
  p.layers_per_chunk = {c.layers};
  return p;
}

std::vector<StepSample> RunSteps(const BenchConfig& c, Backend& be, Comm* dp, int warmup,
                                 int steps, ProfilingBackend* profiler) {
  const int dp_size = dp != nullptr ? dp->size() : 1;
  const ModelSpec model = BenchModel(c);
  const PlanSpec plan = BenchPlan(c, dp_size);
  ParallelComms comms;
  comms.dp = dp;
  ModelChunk chunk(model, plan, /*chunk=*/0, /*tp_rank=*/0, comms, be, c.seed);

  OptimizerOptions opts;
  opts.bucket_bytes = plan.dp_bucket_bytes;
  opts.lr.total_steps = warmup + steps;
  OptimizerComms ocomms;
  ocomms.dp = dp;
  Optimizer opt({&chunk.params()}, {true}, opts, ocomms);

  // Same tokens on every DP rank: the work per rank is what matters here.
  std::vector<int32_t> tokens(c.tokens_per_step()), targets(tokens.size());
  std::mt19937 gen(static_cast<uint32_t>(c.seed));
  std::uniform_int_distribution<int32_t> id(0, c.vocab - 1);
  for (auto& t : tokens) t = id(gen);
  for (size_t i = 0; i < tokens.size(); ++i) targets[i] = tokens[(i + 1) % tokens.size()];

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::vector<StepSample> out;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup && profiler != nullptr) profiler->Reset();
    chunk.params().ZeroGrads();
    if (dp != nullptr) dp->Barrier();
    const auto t0 = Clock::now();
    float loss = 0.0f;
    chunk.Forward(0, nullptr, tokens.data(), targets.data(), &loss);
    chunk.Backward(0, nullptr, 1.0f);
    const auto t1 = Clock::now();
    opt.StartGradSync(0);
    opt.Step();
    const auto t2 = Clock::now();
    DT_CHECK(std::isfinite(loss)) << "non-finite loss at bench step " << s;
    if (s >= warmup) out.push_back({seconds(t0, t1), seconds(t1, t2)});
  }
  return out;
}

}  // namespace dt::rt::bench
