// Parameters held by one GPU: one transformer layer's TP shard and the
// whole of a pipeline rank (its layers, plus the embedding on the first
// pipeline rank and final norm + LM head on the last), before any ZeRO
// sharding. Megatron-LM's layout: column/row-parallel matrices and the
// column-parallel biases split over TP, row-parallel biases and norms
// replicated, vocabulary split over TP (padded to a multiple of tp),
// learned position embeddings replicated; a tied embedding is copied onto
// the last pipeline rank when pp > 1. MoE layers: the router and a shared
// expert's gate replicated, the shared experts split over TP like a dense
// MLP, and E/ep routed experts per rank, each split over TP (expert tensor
// parallelism = tp). Pure functions; no failure modes.
#pragma once

#include <cstdint>

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// One layer of the model's kind: an MoE layer for MoE models (the dense
// leading layers: LayerParamsPerRank(DenseLayerModel(m), p)).
int64_t LayerParamsPerRank(const ModelSpec& m, const PlanSpec& p);
// The attention block's weights on a rank (MLA: down-projections and latent
// norms replicated over TP, up-projections and output split).
int64_t AttentionParamsPerRank(const ModelSpec& m, const PlanSpec& p);
// Dense leading layers (ModelSpec::first_dense_layers) in model chunk
// `chunk` / on pipeline rank `pipeline_rank`; 0 for dense models.
int DenseLayersInChunk(const ModelSpec& m, const PlanSpec& p, int chunk);
int DenseLayersOnStage(const ModelSpec& m, const PlanSpec& p, int pipeline_rank);
// Aborts (DT_CHECK) unless 0 <= pipeline_rank < p.pp.
int64_t StageParamsPerRank(const ModelSpec& m, const PlanSpec& p, int pipeline_rank);
// The routed-expert part of the above (0 for a dense model): the
// parameters replicated over the expert-data-parallel group (dp*cp/ep)
// instead of the dp*cp group, so ZeRO shards them ep times less.
int64_t ExpertLayerParamsPerRank(const ModelSpec& m, const PlanSpec& p);
int64_t StageExpertParamsPerRank(const ModelSpec& m, const PlanSpec& p, int pipeline_rank);
// The weights of one layer's linear GEMMs on a rank (QKV, output projection,
// MLP; no biases, norms or router): what an FP8 plan also keeps as FP8 copies.
int64_t LinearWeightParamsPerRank(const ModelSpec& m, const PlanSpec& p);
// Multi-token prediction (ModelSpec::mtp_layers) on the last pipeline rank:
// per module one layer, eh_proj (2h x h, columns split over TP) and three
// replicated norms; plus, when pp > 1 and the embedding is untied, the
// last rank's copy of the word embedding the modules look tokens up in
// (tied: the head's copy is that embedding). Included in StageParamsPerRank
// (and its routed experts in StageExpertParamsPerRank) of the last rank.
int64_t MtpParamsPerRank(const ModelSpec& m, const PlanSpec& p);

}  // namespace dt
