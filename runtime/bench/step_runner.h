// StepRunner for the runtime benchmark: one pipeline stage holding a whole
// GPT-2-small-shaped model chunk (tp = pp = 1) trained with the runtime's
// own ModelChunk (forward + backward) and Optimizer (DP gradient all-reduce
// through GradSync when `dp` has more than one rank, global-norm clipping,
// AdamW), one microbatch per step. Tokens are fixed pseudo-random ids.
//
// Timing: wall time of forward+backward and of the optimizer step (which
// includes the DP all-reduce), per step. When `dp` is given, ranks start
// every step together (a barrier outside the timed region). Collective over
// `dp`. Not thread-safe; aborts on misuse (DT_CHECK).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"
#include "runtime/backend/backend.h"
#include "runtime/bench/profiling_backend.h"
#include "runtime/comm/comm.h"

namespace dt::rt::bench {

struct BenchConfig {
  int layers = 2;
  int hidden = 768, heads = 12, ffn = 3072;  // GPT-2 small
  int seq = 256;
  int micro_batch = 4;
  int vocab = 1024;  // small, so the LM head does not dominate
  uint64_t seed = 1234;
  int64_t tokens_per_step() const { return int64_t(seq) * micro_batch; }
  // FLOPs of the LM head GEMMs per step (forward + both backward GEMMs).
  double head_flops() const { return 6.0 * tokens_per_step() * hidden * double(vocab); }
};

ModelSpec BenchModel(const BenchConfig& c);
PlanSpec BenchPlan(const BenchConfig& c, int dp);

struct StepSample {
  double fwd_bwd_s = 0.0;  // ModelChunk Forward + Backward
  double optim_s = 0.0;    // Optimizer StartGradSync + Step (incl. DP all-reduce)
  double total() const { return fwd_bwd_s + optim_s; }
};

// Runs `warmup` untimed and then `steps` timed training steps on `be`. If
// `profiler` is non-null it must be `be` (or wrap the backend `be` wraps)
// and is Reset after the warm-up, so it holds exactly the timed steps.
std::vector<StepSample> RunSteps(const BenchConfig& c, Backend& be, Comm* dp, int warmup,
                                 int steps, ProfilingBackend* profiler);

}  // namespace dt::rt::bench
