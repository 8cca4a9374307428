// Ring attention: causal multi-head self-attention of a context-parallel
// rank's local queries against the whole sequence, whose K/V blocks travel
// around the CP group (Megatron-LM's "P2P" context parallelism; Liu et al.
// 2023, Ring Attention). Layouts as attention.h: qkv [seq, batch, heads, 3,
// head_dim], out [seq, batch, heads, head_dim], where seq (AttentionDims::
// seq) is the LOCAL sequence: the positions cp_layout.h assigns to this rank.
//
// Forward, cp steps: at step i the rank holds the K/V block of CP rank
// src = (rank - i) mod cp (step 0: its own), sends it to rank + 1 and
// receives the next one from rank - 1 while it computes on the current one
// (ISend/IRecv, so transfer overlaps compute): cp - 1 transfers of
// 2 * seq * batch * heads * head_dim floats. Each block's scores
// (seq x seq per head) are masked by GLOBAL positions (key position >
// query position is masked) and merged exactly into the output with a
// running row max and sum (online softmax); lse = max + log(sum) per query
// row is written for the backward.
// Backward, cp steps again: the K/V blocks travel the same way (cp - 1
// transfers) and each block's dK/dV contribution is added to an
// accumulator that follows its block one hop behind and finally returns to
// the owner (cp - 1 transfers of the same size), which adds it to its own.
// Probabilities come from `probs` if the forward kept them, else they are
// recomputed per block from Q K^T and lse (selective recompute).
//
// Memory: no s x s matrix of the full sequence exists. probs, when kept,
// are cp blocks of [batch, heads, seq, seq] (ProbsNumel * cp: the local
// queries against every key, 1/cp of the 1-rank matrix). Temporaries
// (runtime allocator): forward 2 K/V blocks, per-row max and sum (and, when
// probs are kept, each step's row max), and 1-2 per-head seq x seq scratch
// matrices; backward 2 K/V blocks, up to 3 dK/dV
// blocks, per-row D = rowsum(dO * O) and 2 per-head scratch matrices.
//
// Attention dropout (drop.on(), attention.h): each block's probabilities
// are masked by the global (sample, head, query position, key position)
// keys, so the mask equals the one-rank mask; the row sums of the online
// softmax use the undropped values, the PV product the dropped ones.
// When probs are kept, masks and dropped (RingProbsNumel each) are kept
// with them; otherwise (null) each block's mask is redrawn in backward.
// Backward uses D = rowsum(dO * O), which holds with dropout too.
//
// cp == nullptr or size 1: one block, the rank's own (equal to attention.h
// up to rounding). Host-memory op (CPU backend); every member of `cp`
// calls it in the same order. Pointers owned by the caller; dqkv is
// overwritten. Not thread-safe. Misuse aborts.
#pragma once

#include "runtime/backend/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/ops/attention.h"

namespace dt::rt {

inline int CpSizeOf(const Comm* cp) { return cp != nullptr ? cp->size() : 1; }
// Floats of the kept probabilities: cp blocks of [batch, heads, seq, seq].
inline int64_t RingProbsNumel(const AttentionDims& d, int cp_size) { return d.ProbsNumel() * cp_size; }
inline int64_t RingLseNumel(const AttentionDims& d) { return d.batch * d.heads * d.seq; }

// probs: null (not kept) or RingProbsNumel floats; lse: RingLseNumel floats.
void RingAttentionForward(Backend& be, Comm* cp, const AttentionDims& d, const float* qkv, float* probs,
                          float* lse, float* out, const AttentionDropout& drop = {}, uint8_t* masks = nullptr,
                          float* dropped = nullptr);
// out: the forward's output (for D = rowsum(dO * O)); probs may be null.
void RingAttentionBackward(Backend& be, Comm* cp, const AttentionDims& d, const float* qkv, const float* probs,
                           const float* lse, const float* out, const float* dout, float* dqkv,
                           const AttentionDropout& drop = {}, const uint8_t* masks = nullptr,
                           const float* dropped = nullptr);

}  // namespace dt::rt
