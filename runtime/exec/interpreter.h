// Interpreter: executes one training step of one rank from its pipeline
// rank's ActionList (planner/schedule/build_schedule.h) — the same list the
// simulator costs.
//
// Action -> call:
//   kRecvAct / kRecvGrad   IRecv from the producer's pipeline rank (model chunk
//                          c lives on pipeline rank c % pp); the consumer
//                          kForward / kBackward waits on it.
//   kSendAct / kSendGrad   ISend of the producer's output; the buffer is kept
//                          alive until the send completes (all outstanding
//                          sends are waited for at the end of the step).
//   kForward / kBackward   ModelChunk::Forward / Backward of local chunk c / pp
//                          (loss_scale = 1 / num_microbatches).
//   kGradSync(c)           Optimizer::StartGradSync(c / pp)
//   kOptimizerStep         Optimizer::Step()
//   kParamSync(c)          Optimizer::ParamSync(c / pp)
// A message's tag encodes (microbatch, receiving chunk, direction), so the
// tags of one step are distinct. Peers that are this rank itself (pp = 1 with
// several chunks per rank) hand tensors over in memory instead of MPI.
//
// Tied embeddings with several chunks per rank (vpp > 1): the GradSync of a
// chunk holding tied params is deferred to kOptimizerStep (Step() starts it),
// because the tied all-reduce is a blocking collective between the first and
// last pipeline rank, and the last rank reaches its GradSync while the first
// one still waits for its gradients (a deadlock if issued in place). With
// pp = 1 both copies are on this rank and their grads are summed locally.
//
// Deterministic: the same action list, data and parameters give bit-identical
// results. Owns nothing it is given (chunks, optimizer, comm, data must
// outlive it). Not thread-safe. Misuse (missing receive, unknown chunk)
// aborts via DT_CHECK.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "planner/schedule/action.h"
#include "planner/spec/plan_spec.h"
#include "runtime/comm/comm.h"
#include "runtime/data/data_loader.h"
#include "runtime/model/model_chunk.h"
#include "runtime/optim/optimizer.h"

namespace dt::rt {

struct StepOutcome {
  double loss_sum = 0.0;  // sum of microbatch mean losses computed on this rank (last chunk)
  int num_losses = 0;     // microbatches whose loss this rank computed
  StepStats optimizer;    // from Optimizer::Step (zeros if the list has none)
};

class Interpreter {
 public:
  // chunks[i] is local chunk i (model chunk i * pp + pp_rank); pp may be null
  // when plan.pp == 1.
  Interpreter(const PlanSpec& plan, ActionList actions, std::vector<ModelChunk*> chunks,
              Optimizer* optimizer, Comm* pp, const DataLoader* data);

  // Runs every action of the list for training step `step` (the data step:
  // microbatches are data->Microbatch(step, mb, ...)). Zeroes gradients first.
  StepOutcome RunStep(int64_t step);

  const ActionList& actions() const { return actions_; }

 private:
  int Tag(int microbatch, int chunk, int direction) const;
  ModelChunk* Local(int chunk) const;
  bool DeferGradSync(int local_chunk) const;
  void SumLocalTiedGrads();
  void PostRecv(int mb, int chunk, int direction);
  Tensor TakeRecv(int mb, int chunk, int direction);
  void Send(Tensor t, int mb, int to_chunk, int direction);

  PlanSpec plan_;
  ActionList actions_;
  std::vector<ModelChunk*> chunks_;
  Optimizer* optimizer_;
  Comm* pp_;
  const DataLoader* data_;
  int pp_rank_ = 0;

  struct PendingRecv {
    Tensor buf;
    std::unique_ptr<Request> req;  // null: delivered locally
  };
  std::map<int, PendingRecv> recvs_;  // by tag
  std::map<int, Tensor> local_mail_;  // by tag (self-sends)
  struct PendingSend {
    Tensor buf;
    std::unique_ptr<Request> req;
  };
  std::vector<PendingSend> sends_;
  std::vector<bool> deferred_;  // per local chunk
  // Per action: a kGradSync that only syncs and the optimizer step follow,
  // so nothing could overlap it and it runs blocking (grad_sync.h).
  std::vector<bool> last_syncs_;
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace dt::rt
