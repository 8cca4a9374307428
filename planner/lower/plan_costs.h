// PlanCosts: the time of every piece of work a plan's action lists contain,
// priced from the layer op lists (planner/cost/layer_ops.h) and the
// hardware profile. Shared by the lower bound and the lowering.
//
// Times are seconds for one microbatch on one rank (forward/backward), or
// for the whole step (gradient / parameter sync, optimizer). Collectives on
// the TP and CP groups block the compute stream as in Megatron-LM and are
// kept apart so the breakdown can show them. Pure; thread-safe.
#pragma once

#include <vector>

#include "planner/profile/profile.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct ChunkCost {
  int layers = 0;
  double fwd_compute = 0, fwd_comm = 0;  // one microbatch
  double bwd_compute = 0, bwd_comm = 0;  // one microbatch, recompute included
  double recompute = 0;                  // the recompute kernels inside bwd_compute (its collectives are in bwd_comm)
  double host_wait = 0;                  // of fwd_compute + bwd_compute: the device waiting for the host's launches
  double grad_bytes = 0;                 // gradient bytes this rank reduces for the chunk
  double grad_sync = 0;                  // all-reduce (ZeRO 0) or reduce-scatter (ZeRO >= 1), whole chunk
  double grad_sync_per_microbatch = 0;   // ZeRO-2/3: the per-unit reduce-scatters of one backward (blocking)
  double param_sync = 0;                 // ZeRO 1/2: all-gather of updated parameters (ZeRO-2: per unit)
  double zero3_gather = 0;               // ZeRO-3: the per-unit all-gathers of one fwd, or of one bwd (blocking)
  int num_unit_uses = 0;                 // ZeRO-2/3: unit uses per fwd / bwd (collectives in the above)
  // moe_a2a_overlap plans only (0 otherwise): the layers with an
  // expert-parallel MoE block (not the MTP modules') and their EP
  // all-to-alls, which are inside fwd_comm / bwd_comm.
  int moe_layers = 0;
  double ep_fwd = 0, ep_bwd = 0;
};

// Combined 1F1B (PlanSpec::moe_a2a_overlap), per MoE layer: the EP
// all-to-all time of one forward and of one backward, and what stays
// exposed when a forward runs layer by layer with an independent backward.
// Megatron-LM's pairing: the forward's attention with the backward's
// combine, its dispatch with the backward's expert compute, its expert
// compute with the backward's dispatch, its combine with the backward's
// attention; each pair takes the longer of the two.
struct EpOverlapCost {
  double fwd_layer = 0, bwd_layer = 0;
  double pair_exposed_layer = 0;
};

struct PlanCosts {
  std::vector<ChunkCost> chunks;       // indexed by model chunk
  double p2p = 0;                      // one activation (or its gradient) between stages
  // The sender's compute stream waits for each pipeline send (BlockingSends).
  bool blocking_sends = false;
  // dtrun on CPU ranks: a pipeline message is copied by the receiving rank's
  // core (Open MPI's shared-memory transport reads it from the sender's
  // memory when the receiver waits), so each receive holds the receiver's
  // compute stream for `p2p` and the sender's link carries nothing.
  bool receiver_copies = false;
  std::vector<double> optimizer;       // optimizer step per pipeline stage
  int num_buckets_last = 1;            // DP buckets per chunk (overlap granularity)
  bool outside_profile = false;        // some point lay outside a measured profile's range
  EpOverlapCost ep_overlap;            // filled for MoE plans with ep > 1 and moe_a2a_overlap
};

// Whether a plan's pipeline sends block the sending stage: framework (GPU)
// plans without interleaving (Megatron-LM's 1F1B and DeepSpeed's pipeline
// engine wait on every send before the next compute) and interleaved ones
// without PlanSpec::overlap_p2p_comm. dtrun (CPU plans) sends with
// MPI_Isend and never blocks.
bool BlockingSends(const PlanSpec& p, const HardwareProfile& hw);

// Exposed EP all-to-all time of the forward of chunk `fwd_chunk` paired with
// the backward of chunk `bwd_chunk` under combined 1F1B: layer pairs at
// pair_exposed_layer, unpaired layers' all-to-alls in full.
double PairedEpExposed(const PlanCosts& c, int fwd_chunk, int bwd_chunk);

// `track_outside` false skips the checks behind PlanCosts::outside_profile
// (left false), which only a reported prediction needs: the search's lower
// bounds of every candidate do not.
PlanCosts ComputePlanCosts(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                           const HardwareProfile& hw, bool track_outside = true);

// Prices every communication at zero (SimulateOptions::free_communication,
// a test hook): pipeline transfers, TP / CP / EP collectives, DP
// reductions and parameter gathers.
void MakeCommunicationFree(PlanCosts* costs);

}  // namespace dt
