// TP communication overlap (PlanSpec::tp_comm_overlap, Megatron-LM's
// --tp-comm-overlap): what each sequence-parallel collective of a layer's op
// list still adds to the compute stream when Transformer Engine's
// userbuffers run it under the GEMM next to it, with TE's default methods
// (transformer_engine/pytorch/module/base.py, initialize_ub):
//   ring exchange (all-gather + the GEMM that consumes it: qkv and fc1
//     forward, proj and fc2 dgrad): the GEMM in tp chunks, each computing on
//     the shard in hand while the next arrives over tp - 1 p2p steps:
//     g_c + (tp - 1) max(g_c, c / (tp - 1));
//   pipeline (proj and fc2 forward + the reduce-scatter of their output):
//     4 chunks on the SMs the 16 communication SMs leave, each chunk's
//     reduce-scatter under the next chunk: g_c' + 3 max(g_c', c/4) + c/4;
//   bulk (backward: the all-gather of the stored input under the qkv / fc1
//     dgrad, the reduce-scatter of the input gradient under the wgrad):
//     max(g', c), g' the GEMMs on the SMs 16 communication SMs leave.
// g: the paired GEMMs' time, g_c = g / chunks (each chunk at the whole
// GEMM's efficiency: an approximation, smaller GEMMs run less efficiently,
// so the overlap is if anything priced too well), c: the collective in
// line. 16 of 132 SMs is TE's default on H100, taken as the same share on
// every GPU (an approximation). A collective with no GEMM of
// its pair in the list (MoE and MLA blocks: TE does not overlap them) is
// charged in full. Pure; thread-safe.
#pragma once

#include <vector>

#include "planner/cost/layer_ops.h"
#include "planner/profile/profile.h"

namespace dt {

// charged[i] on entry: op i's in-line time (collectives; anything for other
// ops). On return the overlapped collectives' entries hold what they add
// beyond their GEMMs' time, >= 0 (the GEMMs themselves stay priced in line).
void ChargeOverlappedTpComm(const std::vector<Op>& ops, int tp, const HardwareProfile& hw,
                            std::vector<double>* charged);

}  // namespace dt
