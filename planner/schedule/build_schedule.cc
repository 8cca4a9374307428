#include "planner/schedule/build_schedule.h"

#include <algorithm>
#include <string>

namespace dt {
namespace {

Status CheckPlan(const PlanSpec& p) {
  auto num = [](int v) { return std::to_string(v); };
  if (p.pp < 1) return InvalidArgument("schedule: 'pp' must be >= 1, is " + num(p.pp));
  if (p.vpp < 1) return InvalidArgument("schedule: 'vpp' must be >= 1, is " + num(p.vpp));
  if (p.num_microbatches < 1)
    return InvalidArgument("schedule: 'num_microbatches' must be >= 1, is " +
                           num(p.num_microbatches));
  if (p.zero_stage < 0 || p.zero_stage > 3)
    return InvalidArgument("schedule: 'zero_stage' must be 0, 1, 2 or 3, is " + num(p.zero_stage));
  if (p.schedule != Schedule::kInterleaved && p.vpp != 1)
    return InvalidArgument("schedule: vpp=" + num(p.vpp) +
                           " needs schedule \"interleaved\"; set vpp to 1 or change the schedule");
  if (p.schedule == Schedule::kInterleaved) {
    if (p.pp < 2)
      return InvalidArgument("schedule: the interleaved schedule needs pp >= 2; use 1f1b for pp=1");
    if (p.num_microbatches % p.pp != 0)
      return InvalidArgument("schedule: the interleaved schedule needs 'num_microbatches' (" +
                             num(p.num_microbatches) + ") divisible by pp (" + num(p.pp) + ")");
  }
  return Status::Ok();
}

// Model chunk and microbatch of the k-th forward (or backward) on `rank`.
// For vpp == 1 this is microbatch k on chunk `rank`; for vpp > 1 it is
// Megatron's interleaving: pp consecutive steps per local chunk, chunks in
// ascending order for forwards and descending order for backwards.
Action StepAt(const PlanSpec& p, int rank, int k, bool forward) {
  const int group = p.pp * p.vpp;
  int local = (k % group) / p.pp;
  if (!forward) local = p.vpp - 1 - local;
  const int microbatch = (k / group) * p.pp + k % p.pp;
  return Action{forward ? ActionKind::kForward : ActionKind::kBackward, microbatch,
                local * p.pp + rank};
}

// Appends one compute action with the receive it consumes and the send it
// produces, then GradSync after the chunk's last backward (with
// overlap_grad_reduce off, BuildRank appends them after the last backward
// of the rank instead).
class RankEmitter {
 public:
  RankEmitter(const PlanSpec& p, ActionList* out)
      : p_(p), out_(out), last_chunk_(p.num_chunks() - 1), backwards_(p.num_chunks(), 0) {}

  void Emit(const Action& a) {
    const int mb = a.microbatch, c = a.chunk;
    if (a.kind == ActionKind::kForward) {
      if (c > 0) out_->push_back({ActionKind::kRecvAct, mb, c});
      out_->push_back(a);
      if (c < last_chunk_) out_->push_back({ActionKind::kSendAct, mb, c});
      return;
    }
    if (c < last_chunk_) out_->push_back({ActionKind::kRecvGrad, mb, c});
    out_->push_back(a);
    if (c > 0) out_->push_back({ActionKind::kSendGrad, mb, c});
    if (++backwards_[c] == p_.num_microbatches && p_.overlap_grad_reduce)
      out_->push_back({ActionKind::kGradSync, -1, c});
  }

 private:
  const PlanSpec& p_;
  ActionList* out_;
  int last_chunk_;
  std::vector<int> backwards_;  // per model chunk
};

ActionList BuildRank(const PlanSpec& p, int rank) {
  const int total = p.num_microbatches * p.vpp;
  const int warmup = WarmupForwards(p, rank);
  ActionList out;
  out.reserve(3 * 2 * total + 2 * p.vpp + 1);
  RankEmitter emit(p, &out);
  for (int k = 0; k < warmup; ++k) emit.Emit(StepAt(p, rank, k, true));
  for (int i = 0; i < total - warmup; ++i) {
    emit.Emit(StepAt(p, rank, warmup + i, true));
    emit.Emit(StepAt(p, rank, i, false));
  }
  for (int k = total - warmup; k < total; ++k) emit.Emit(StepAt(p, rank, k, false));
  if (!p.overlap_grad_reduce)  // after the whole backward, last chunk first (the order backwards end)
    for (int local = p.vpp - 1; local >= 0; --local)
      out.push_back({ActionKind::kGradSync, -1, local * p.pp + rank});
  out.push_back({ActionKind::kOptimizerStep, -1, -1});
  if (p.zero_stage >= 1)
    for (int local = 0; local < p.vpp; ++local)
      out.push_back({ActionKind::kParamSync, -1, local * p.pp + rank});
  return out;
}

}  // namespace

int WarmupForwards(const PlanSpec& p, int pipeline_rank) {
  const int total = p.num_microbatches * p.vpp;
  const int extra = p.moe_a2a_overlap ? 1 : 0;  // combined 1F1B (Megatron-LM: one more warmup forward)
  if (p.pp == 1) return std::min(extra, total);
  switch (p.schedule) {
    case Schedule::kGpipe:
      return total;
    case Schedule::k1F1B:
      return std::min(p.pp - pipeline_rank - 1 + extra, total);
    case Schedule::kInterleaved:
      return std::min(2 * (p.pp - pipeline_rank - 1) + (p.vpp - 1) * p.pp + extra, total);
  }
  DT_CHECK(false) << "unknown schedule";
  return 0;
}

StatusOr<std::vector<ActionList>> BuildSchedule(const PlanSpec& p) {
  DT_RETURN_IF_ERROR(CheckPlan(p));
  std::vector<ActionList> s;
  s.reserve(p.pp);
  for (int r = 0; r < p.pp; ++r) s.push_back(BuildRank(p, r));
  return s;
}

}  // namespace dt
