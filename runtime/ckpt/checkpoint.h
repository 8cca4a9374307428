// Distributed checkpoint save/load in the plan-independent layout of
// ckpt_format.h: every Param is stored as its FULL tensor under
// "param/<name>", Adam moments as "adam_m/<name>" and "adam_v/<name>", and
// the training state (step, optimizer step, data position and seed, RNG
// state, model spec, saving plan) in the manifest's "meta".
//
// Save (collective over the world; every rank calls it):
//   1. callers pass, per local chunk, the ParamStore and optionally the Adam
//      moments as full flat arrays in the store's layout (Optimizer::
//      GatherMoments, which already undid the ZeRO-1 DP sharding);
//   2. ranks with dp = cp = 0 all-gather TP shards into full tensors (MoE
//      expert Params: the ranks of dp = 0's EP group, which then send them
//      to its dp = 0 member over Groups::ep);
//   3. the tp = 0 ranks of every pipeline stage send them to world rank 0
//      over the pp group; rank 0 keeps the first copy of each name (tied
//      Params appear on the first and last stage) and writes atomically;
//   4. rank 0's Status is shared: every rank returns OK or an error.
// Limit: rank 0 holds the whole model (and moments) in memory — fine for the
// small models the CPU runtime trains; a large model needs sharded writes.
// Load (no communication; every rank reads the files, so the checkpoint
// directory must be visible to all ranks): each Param (and moments, when
// requested) is sliced for whatever TP rank / store layout the loader runs,
// so a checkpoint saved under one plan loads under any other.
// Errors are Status values naming the file and tensor; corrupt or truncated
// data is kIoError (the CLI exits with code 2 for it).
#pragma once

#include <string>
#include <vector>

#include "base/json_fields.h"
#include "runtime/comm/groups.h"
#include "runtime/model/param_store.h"

namespace dt::rt {

struct TrainState {
  int64_t step = 0;            // completed steps; the directory is step-<step>
  int64_t optimizer_step = 0;  // Optimizer::step_count()
  int64_t data_position = 0;   // DataLoader::position()
  uint64_t data_seed = 0;
  std::string rng_state;       // opaque text (e.g. a streamed std::mt19937_64)
  json model = json::object(); // ToJson(ModelSpec) of the run
  json plan = json::object();  // ToJson(PlanSpec) of the saving run (informational)
};

struct ChunkState {
  ParamStore* store = nullptr;
  std::vector<float>* adam_m = nullptr;  // full flat, store.numel() floats; may be null
  std::vector<float>* adam_v = nullptr;
  // The parameters as a full flat fp32 array in the store's layout, for a
  // store that keeps no flat fp32 values (bf16: the optimizer's master
  // weights, Optimizer::GatherMaster / LoadMaster); null: store->values().
  std::vector<float>* values = nullptr;
};

Status SaveCheckpoint(const std::string& root, const TrainState& state,
                      const std::vector<ChunkState>& chunks, const Groups& groups);

// Fills every store's values, or `values` where given (and adam_m/adam_v,
// each resized to store.numel(), when non-null) and returns the training state. `path`: a step directory or
// a root with "latest". Refused (kIoError naming the entry): a missing
// param/ or requested adam_m/ / adam_v/ entry, a shape other than the
// model's, meta.step / optimizer_step / data_position negative or different
// from the manifest's step (plus everything ReadCheckpoint checks).
StatusOr<TrainState> LoadCheckpoint(const std::string& path, const std::vector<ChunkState>& chunks);

}  // namespace dt::rt
