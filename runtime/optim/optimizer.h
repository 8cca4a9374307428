// Optimizer: everything between "backward finished" and "parameters ready for
// the next step" for one rank's model chunks: tied-gradient sum, DP gradient
// sync (bucketed all-reduce, or ZeRO-1 reduce-scatter), global-norm clipping,
// the learning-rate schedule, AdamW, and the ZeRO-1/2 parameter all-gather.
//
// ZeRO-2/3: a chunk whose store is sharded (ParamStore::sharding(), set up by
// the ModelChunk for zero_stage >= 2 and a DP group of size > 1) has its
// gradients reduce-scattered unit by unit during every microbatch's backward
// (runtime/model/sharded_params.h); here StartGradSync only sums tied
// gradient shards, Step runs AdamW on the shard (sharded_adamw.h) and
// ParamSync all-gathers the updated values (ZeRO-2) or does nothing (ZeRO-3:
// the next use gathers them). With a DP group of size 1, stages 2 and 3 run
// as stage 1 (nothing to shard).
//
// The interpreter maps schedule actions to calls:
//   kGradSync(chunk c)   -> StartGradSync(c)   (non-blocking for ZeRO-0; blocking
//                           where only syncs and the step follow it)
//   kOptimizerStep       -> Step()             (finishes pending syncs first)
//   kParamSync(chunk c)  -> ParamSync(c)       (ZeRO-1/2 all-gather; else no-op)
// `chunks[i]` is this rank's local chunk i (model chunk i*pp + pp_rank).
// counts_tied[i] is true for the chunk whose tied Params count in the norm:
// model chunk 0 (pipeline rank 0, local chunk 0).
// Comms (null = group of size 1): dp is the group gradients are averaged and
// ZeRO-sharded over (Groups::dp, or Groups::dp_cp when cp > 1); tp, pp are
// Groups::tp, Groups::pp; tied is Groups::tied (sums tied Params' grads
// between the first and last pipeline stage at StartGradSync of the chunk
// holding them — a blocking collective between those two ranks).
// MoE (expert Params, Param::expert): ep is Groups::ep, expert_dp
// Groups::expert_dp. ZeRO-0 reduces expert gradients over expert_dp and the
// rest over dp (grad_sync.h); the norm sums the expert squares over ep too.
// ZeRO-1 with ep > 1 (Megatron's distributed optimizer with expert
// parallelism) keeps two shards per chunk: the dense Params' spans over dp
// and the expert Params' spans over expert_dp (zero_shard.h), each with its
// Adam states; the norm's squares of both are summed over dp (= ep x
// expert_dp). ZeRO-2/3 with ep > 1 is not implemented (aborts; the planner
// refuses ZeRO-2/3 with experts).
// bf16: ZeRO-0/1 stores keep bf16 values (Bf16Params) and the AdamWShards
// hold the fp32 master; ZeRO-2/3 stores are bf16 ShardedParams and the
// ShardedAdamW holds the master slots (sharded_adamw.h).
// grad_scale multiplies the summed gradients (default 1/dp->size(): mean).
// Every rank computes the same global norm as a 1-rank run (grad_norm.h).
// Not thread-safe; collectives follow the Comm contract (same order on all
// members).
#pragma once

#include <memory>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/grad_sync.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/sharded_adamw.h"
#include "runtime/optim/zero_shard.h"

namespace dt::rt {

struct OptimizerOptions {
  AdamWConfig adam;
  LrSchedule lr;
  int zero_stage = 0;                   // 0..3 (2/3 need sharded stores, see above)
  int64_t bucket_bytes = 40LL << 20;    // PlanSpec::dp_bucket_bytes
  float grad_scale = 0.0f;              // 0: 1 / dp size
  bool bf16_moments = false;            // PlanSpec::adam_moment_bytes == 2 (adam_moments.h)
};

struct OptimizerComms {
  Comm* dp = nullptr;
  Comm* tp = nullptr;
  Comm* pp = nullptr;
  Comm* tied = nullptr;
  Comm* ep = nullptr;         // MoE: the expert-parallel group
  Comm* expert_dp = nullptr;  // MoE: the expert-data-parallel group
};

struct StepStats {
  double grad_norm = 0.0;  // before clipping, over the full model
  double lr = 0.0;
  float clip_coef = 1.0f;  // multiplier applied to gradients (<= 1)
  // The global gradient norm was not finite (inf or NaN): no parameter or
  // moment was updated and the step count did not advance, so the model is
  // as the previous step left it (every rank decides alike: the norm is global).
  bool skipped = false;
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamStore*> chunks, std::vector<bool> counts_tied,
            const OptimizerOptions& opts, const OptimizerComms& comms);

  // blocking: ZeRO-0's bucket all-reduces complete before return (nothing
  // is left to overlap them with; grad_sync.h says why that is faster).
  void StartGradSync(int local_chunk, bool blocking = false);
  StepStats Step();
  void ParamSync(int local_chunk);

  // Steps taken so far (the next Step uses Adam t = step_count() + 1 and
  // learning rate lr.At(step_count())). Settable for checkpoint resume.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t s) { step_count_ = s; }

  // Checkpoint support. Adam m and v of local chunk c as full flat arrays in
  // the chunk's ParamStore layout (store.numel() elements each). With ZeRO-1
  // this all-gathers over dp (collective); otherwise a copy.
  void GatherMoments(int local_chunk, std::vector<float>* m, std::vector<float>* v);
  // Inverse: takes this rank's range out of full flat m and v arrays.
  void LoadMoments(int local_chunk, const float* m, const float* v);
  // bf16 stores (ParamStore::bf16(), or bf16 ZeRO-2/3 sharding), whose flat
  // fp32 values are dropped: the fp32 master weights of local chunk c as a
  // full flat array in store layout (collective over dp with ZeRO-1/2/3,
  // like GatherMoments). They are
  // what a checkpoint saves as the parameters: the bf16 model copy is their
  // rounding, so nothing is lost.
  void GatherMaster(int local_chunk, std::vector<float>* values);
  // Inverse: takes this rank's master range out of full flat values and
  // rounds all of them into the bf16 model copy (every rank holds the whole
  // bf16 copy), as the update after the saved step left it.
  void LoadMaster(int local_chunk, const float* values);


 private:
  // A ZeRO-1 shard and the Adam states of its owned store pieces; ZeRO-0:
  // no shard, one piece over the whole store.
  struct Part {
    std::unique_ptr<ZeroShard> shard;
    std::vector<std::unique_ptr<AdamWShard>> adams;
  };
  struct Chunk {
    ParamStore* store;
    bool counts_tied;
    std::unique_ptr<GradSync> sync;  // ZeRO-0
    std::vector<Part> parts;         // ZeRO-0 / ZeRO-1 (two with ep > 1: dense, experts)
    ShardedParams* zero = nullptr;            // ZeRO-2/3 (owned by the model chunk)
    std::unique_ptr<ShardedAdamW> zero_adam;  // ZeRO-2/3
    bool sync_started = false;
  };
  void FinishGradSync(Chunk& c);
  // Full flat arrays (store layout) from per-piece arrays of the ZeRO-0 /
  // ZeRO-1 Adam shards: `read` writes a piece's m, v or master (end - begin
  // floats) to its second argument.
  void GatherPieces(Chunk& c, void (*read)(AdamWShard&, float*), std::vector<float>* full);
  OptimizerOptions opts_;
  OptimizerComms comms_;
  std::vector<Chunk> chunks_;
  int64_t step_count_ = 0;
};

}  // namespace dt::rt
