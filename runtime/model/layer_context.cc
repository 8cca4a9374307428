#include "runtime/model/layer_context.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/tp_ops.h"

namespace dt::rt {

namespace {

int AddParam(LayerContext* ctx, const std::string& name, std::vector<int64_t> full_shape, ShardKind shard,
             bool sp_partial, bool tied, int shard_rank, int shard_count, int replicas) {
  Param p;
  p.name = name;
  p.full_shape = full_shape;
  p.local_shape = full_shape;
  p.shard = shard;
  p.tp_rank = shard_rank;
  p.tp_size = shard_count;
  p.tied = tied;
  p.tp_replicas = replicas;
  p.replica = ctx->tp_rank % replicas;
  if (shard != ShardKind::kReplicated) {
    const size_t d = shard == ShardKind::kSplitDim0 ? 0 : 1;
    DT_CHECK_LT(d, full_shape.size()) << name;
    p.local_shape[d] = ShardBegin(full_shape[d], shard_rank + 1, shard_count) -
                       ShardBegin(full_shape[d], shard_rank, shard_count);
  }
  int64_t numel = 1;
  for (int64_t x : p.local_shape) numel *= x;
  const int idx = ctx->store->Add(std::move(p));
  DT_CHECK_EQ(static_cast<size_t>(idx), ctx->sp_offset.size()) << "params declared outside DeclareParam";
  if (sp_partial && ctx->sp) {
    ctx->sp_offset.push_back(static_cast<int64_t>(ctx->sp_grads.size()));
    ctx->sp_grads.resize(ctx->sp_grads.size() + numel, 0.0f);
  } else {
    ctx->sp_offset.push_back(-1);
  }
  return idx;
}

}  // namespace

int DeclareParam(LayerContext* ctx, const std::string& name, std::vector<int64_t> full_shape,
                 ShardKind shard, bool sp_partial, bool tied) {
  return AddParam(ctx, name, std::move(full_shape), shard, sp_partial, tied, ctx->tp_rank, ctx->tp_size, 1);
}

int DeclareReplicatedShardParam(LayerContext* ctx, const std::string& name, std::vector<int64_t> full_shape,
                                int shards) {
  const int tp = ctx->tp_size;
  if (shards >= tp) {
    DT_CHECK_EQ(shards % tp, 0) << name << ": " << shards << " shards over tp=" << tp;
    return DeclareParam(ctx, name, std::move(full_shape), ShardKind::kSplitDim0, false);
  }
  DT_CHECK_EQ(tp % shards, 0) << name << ": tp=" << tp << " is not a multiple of " << shards << " shards";
  const int replicas = tp / shards;
  return AddParam(ctx, name, std::move(full_shape), ShardKind::kSplitDim0, false, false, ctx->tp_rank / replicas,
                  shards, replicas);
}

Tensor GatherSeq(LayerContext* ctx, const Tensor& local) {
  if (!ctx->sp) return local.Reshaped(local.shape());
  Tensor full({ctx->rows, ctx->hidden});
  SpAllGather(ctx->tp, local.data(), ctx->local_rows, ctx->hidden, full.data());
  return full;
}

Tensor ReduceSeq(LayerContext* ctx, Tensor* full) {
  if (ctx->sp) {
    Tensor local({ctx->local_rows, ctx->hidden});
    SpReduceScatter(ctx->tp, full->data(), ctx->local_rows, ctx->hidden, local.data());
    return local;
  }
  TpAllReduce(ctx->tp, full->data(), full->numel());
  return std::move(*full);
}

void FlushSpGrads(LayerContext* ctx) {
  if (!ctx->sp || ctx->sp_grads.empty()) return;
  FlushSpGrads(ctx, 0, static_cast<int>(ctx->sp_offset.size()));
}

void FlushSpGrads(LayerContext* ctx, int param_begin, int param_end) {
  if (!ctx->sp || ctx->sp_grads.empty()) return;
  // sp_offset is increasing in declaration order: the range's partial
  // grads are one contiguous run of sp_grads.
  int64_t lo = -1, hi = -1;
  for (int i = param_begin; i < param_end; ++i) {
    if (ctx->sp_offset[i] < 0) continue;
    if (lo < 0) lo = ctx->sp_offset[i];
    hi = ctx->sp_offset[i] + ctx->store->params()[i].numel;
  }
  if (lo < 0) return;
  TpAllReduce(ctx->tp, ctx->sp_grads.data() + lo, hi - lo);
  for (int i = param_begin; i < param_end; ++i) {
    if (ctx->sp_offset[i] < 0) continue;
    const Param& p = ctx->store->params()[i];
    float* g = ctx->store->grad(i);
    const float* s = ctx->sp_grads.data() + ctx->sp_offset[i];
    for (int64_t k = 0; k < p.numel; ++k) g[k] += s[k];
  }
  std::fill(ctx->sp_grads.begin() + lo, ctx->sp_grads.begin() + hi, 0.0f);
}

}  // namespace dt::rt
