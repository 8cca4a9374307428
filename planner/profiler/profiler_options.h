// Options of dtplan-profile / `dtplan profile`, parsed from argv into plain
// data. Parsing fails with InvalidArgument naming the flag and the fix;
// --help yields a Status of code kNotFound carrying the usage text (the
// caller prints it and exits 0). No I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dt {

struct ProfilerOptions {
  std::string device = "cpu";               // cpu | cuda
  std::vector<std::string> models;          // model files whose plan shapes to measure
  std::string out = "profiles/local-cpu.json";
  std::string name;                         // profile name (default: stem of out)
  bool quick = false;                       // small sweep, for tests (< 1 min)
  int ranks = 0;                            // launcher only; checked against the world size
  int seq_length = 0;                       // 0: each model's own
  std::vector<int> micro_batches;           // microbatch sizes of the plans
  int max_tp = 0;                           // largest TP split (0: ranks per node)
  double max_gemm_flops = 0;                // per-call cap on measured GEMMs
  int64_t max_message_bytes = 0;            // largest collective message
  int reps = 0;                             // timed repetitions per point (median)
  int warmup = 1;                           // untimed calls before timing
  bool progress = true;                     // progress lines on rank 0's stderr
  // A CPU profile written by this profiler: re-measure only its end checks
  // (the whole-model training steps of step_checks of at most 15 ms, or the cheapest),
  // print how fast this machine runs them now against then (one JSON line
  // on rank 0's stdout) and write nothing. `validate --execute
  // --speed-check` runs it beside every plan (docs/validation.md).
  std::string speed_check;
};

// Fills defaults that depend on --quick (models, microbatches, caps, reps).
void ApplyProfilerDefaults(ProfilerOptions* o);

StatusOr<ProfilerOptions> ParseProfilerArgs(const std::vector<std::string>& args);

std::string ProfilerUsage();

}  // namespace dt
