// The dtplan subcommands. Each takes parsed options and returns the process
// exit code: 0 success, 2 bad input or no feasible plan (message printed to
// stderr as one line naming the field and the fix), 1 internal failure.
// CLI11 and JSON exceptions never escape: main() catches them at the edge.
#pragma once

#include <optional>
#include <string>

#include "planner/search/constraints.h"

namespace dt::cli {

struct CommonOptions {
  std::string model;
  int nodes = 1;
  int gpus = 8;
  std::string device = "gpu";
  std::string profile;  // empty: A100-SXM4-80GB for gpu, cpu-generic for cpu
  int threads = 0;
  bool json = false;
};

struct PlanOptions {
  CommonOptions common;
  int64_t global_batch = 0;  // 0: 8 sequences per device
  int seq_length = 0;        // 0: the model's
  int top = 5;
  std::optional<int> dp, tp, pp, cp, vpp, mbs, zero;
  std::string schedule, recompute;
  std::optional<bool> sp;
  std::string attention;  // flash | unfused; default flash on gpu, unfused on cpu
  std::string out = "plan.json";
  std::string trace;
};

struct SimulateOptions {
  CommonOptions common;
  std::string plan;
  std::string trace;
};

struct ValidateOptions {
  std::string cases;
  std::string profile;  // overrides the per-case hardware
  int threads = 0;
  bool json = false;
  // --execute: run plans with dtrun and compare (closed loop).
  bool execute = false;
  CommonOptions common;      // --model, --nodes, --gpus, --device (with --execute)
  int64_t global_batch = 0;  // 0: 8 per device
  int top = 8;               // plans to run, spread over the ranking (best always included)
  int steps = 6;
  std::optional<int> zero;   // fix the ZeRO stage of the plans run
  std::string dtrun;         // default: next to dtplan
  std::string work_dir;      // default: a fresh temp dir
  std::string argv0;
};

int RunPlan(const PlanOptions& o);
int RunSimulate(const SimulateOptions& o);
int RunValidate(const ValidateOptions& o);
int RunValidateExecute(const ValidateOptions& o);

// Prints "dtplan: error: <message>" to stderr and returns 2.
int Fail(const std::string& message);

}  // namespace dt::cli
