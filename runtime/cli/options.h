// DtrunOptions: everything dtrun's command line sets (see docs/runtime.md).
// Parsed by ParseDtrunArgs in dtrun.cc; consumed by RunTraining (trainer.h).
#pragma once

#include <cstdint>
#include <string>

namespace dt::rt {

struct DtrunOptions {
  std::string plan_path;
  int64_t steps = 20;             // total training steps (also the LR schedule length)
  int64_t stop_at = -1;           // stop after this many completed steps (-1: steps)
  std::string data_path;          // empty: synthetic Markov source
  uint64_t seed = 1234;           // model init and data order
  double lr = 3e-3;               // peak learning rate
  double min_lr = -1.0;           // -1: 10% of lr
  int64_t warmup_steps = -1;      // -1: 10, or --steps if fewer
  double weight_decay = 0.1;
  double clip = 1.0;              // global-norm clip; <= 0 disables
  double dropout = -1.0;          // dropout rate of a plan with dropout; -1: 0.1 (Megatron's default)
  std::string metrics_path;       // JSON lines per step per rank
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;   // 0: only at the end
  int keep_checkpoints = 0;       // after each save keep the newest N step dirs (0: all)
  bool resume = false;
  double timeout_s = 120.0;       // JobWatchdog, per phase (--timeout, alias --step-timeout); <= 0 disables
  bool quiet = false;             // no per-step lines
  // Fault drills (hidden flags; runtime/cli/fault_drill.h).
  int debug_kill_rank = -1;       // this world rank SIGKILLs itself ...
  int64_t debug_kill_step = -1;   // ... during this (1-based) step (or the save of it; -1: any)
  std::string debug_kill_phase;   // ... on entering this phase (startup, resume, step, save, shutdown)
  int debug_stall_rank = -1;      // this world rank SIGSTOPs itself ...
  std::string debug_stall_phase;  // ... on entering this phase
  int64_t debug_stall_step = -1;  // ... at this step (-1: any)
};

}  // namespace dt::rt
