// Action: one step of a pipeline rank's work in a training step. The single
// schedule format shared by the simulator (which costs it) and the runtime
// (which executes it).
//
// A schedule is one ActionList per pipeline rank (all TP/CP/DP ranks of a
// pipeline rank run the same list). Actions run in list order on the rank's
// compute stream, except communication actions which are issued in order
// and complete asynchronously; a consumer waits for its data:
//   kRecvAct before kForward of the same (microbatch, chunk), kRecvGrad
//   before kBackward, kGradSync before kOptimizerStep.
// Inside a kForward / kBackward the model's layers run with their tensor- and
// context-parallel collectives (see planner/cost/layer_ops.h for the exact
// per-layer sequence both sides follow).
//
// `chunk` is the *model* chunk index (0 .. pp*vpp-1), so chunk c runs on
// pipeline rank c % pp; a send of chunk c's output goes to chunk c+1.
#pragma once

#include <string>
#include <vector>

namespace dt {

enum class ActionKind {
  kForward,       // forward of (microbatch, chunk)
  kBackward,      // backward of (microbatch, chunk); recompute happens inside
  kSendAct,       // send chunk's output activation of microbatch to chunk+1
  kRecvAct,       // receive chunk-1's output as input of (microbatch, chunk)
  kSendGrad,      // send grad of chunk's input to chunk-1
  kRecvGrad,      // receive grad of chunk's output from chunk+1
  kGradSync,      // DP(+CP) gradient reduction of `chunk` (all-reduce, or reduce-scatter for ZeRO>=1)
  kOptimizerStep, // optimizer update of this rank's (shard of) parameters
  kParamSync,     // ZeRO>=1: all-gather updated parameters of `chunk`
};

const char* ToString(ActionKind k);

struct Action {
  ActionKind kind;
  int microbatch = -1;  // -1 for per-step actions (GradSync, OptimizerStep, ParamSync)
  int chunk = -1;       // model chunk; -1 for OptimizerStep
  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk;
  }
};

using ActionList = std::vector<Action>;

// "F3.1" = forward of microbatch 3 on chunk 1; "SA3.1", "RG2.0", "GS1", "OPT".
std::string ToString(const Action& a);

}  // namespace dt
