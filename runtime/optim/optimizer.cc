#include "runtime/optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "runtime/model/bf16_params.h"
#include "runtime/optim/grad_norm.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

Optimizer::Optimizer(std::vector<ParamStore*> chunks, std::vector<bool> counts_tied,
                     const OptimizerOptions& opts, const OptimizerComms& comms)
    : opts_(opts), comms_(comms) {
  DT_CHECK_EQ(chunks.size(), counts_tied.size());
  DT_CHECK(opts.zero_stage >= 0 && opts.zero_stage <= 3) << "zero_stage " << opts.zero_stage;
  const int dp = comms.dp ? comms.dp->size() : 1;
  const float scale = opts.grad_scale != 0.0f ? opts.grad_scale : 1.0f / static_cast<float>(dp);
  const bool split_experts = comms.ep != nullptr && comms.ep->size() > 1;
  for (size_t i = 0; i < chunks.size(); ++i) {
    DT_CHECK(chunks[i] != nullptr && chunks[i]->finalized()) << "chunk " << i << " not finalized";
    DT_CHECK(!split_experts || opts.zero_stage == 0) << "ZeRO with expert parallelism is not implemented";
    Chunk c;
    c.store = chunks[i];
    c.counts_tied = counts_tied[i];
    if (opts.zero_stage >= 2 && dp > 1) {
      c.zero = c.store->sharding();
      DT_CHECK(c.zero != nullptr && c.zero->stage() == opts.zero_stage && c.zero->dp()->size() == dp)
          << "ZeRO-" << opts.zero_stage << " needs chunk " << i << "'s store sharded over the same DP group";
      c.zero_adam = std::make_unique<ShardedAdamW>(c.zero);
    } else if (opts.zero_stage >= 1) {
      c.shard = std::make_unique<ZeroShard>(comms.dp, c.store->numel(), scale, c.store->bf16() != nullptr);
      c.adam = std::make_unique<AdamWShard>(*c.store, c.shard->range().begin, c.shard->range().end);
    } else {
      c.sync = std::make_unique<GradSync>(comms.dp, opts.bucket_bytes, scale, split_experts, comms.expert_dp);
      c.adam = std::make_unique<AdamWShard>(*c.store, 0, c.store->numel());
    }
    // bf16: the optimizer took its fp32 master range; the flat fp32 values go.
    if (c.store->bf16() != nullptr) c.store->DropValues();
    chunks_.push_back(std::move(c));
  }
}

void Optimizer::StartGradSync(int local_chunk) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  DT_CHECK(!c.sync_started) << "StartGradSync twice for chunk " << local_chunk;
  if (comms_.tied != nullptr && comms_.tied->size() > 1) {
    auto& ps = c.store->params();
    for (int i = 0; i < static_cast<int>(ps.size()); ++i) {
      if (!ps[i].tied) continue;
      if (Bf16Params* b = c.store->bf16()) {
        comms_.tied->AllReduceBf16(b->grads() + ps[i].offset, static_cast<size_t>(ps[i].numel));
      } else if (c.zero_adam) {
        int64_t n = 0;
        float* g = c.zero_adam->TiedGradSlot(i, &n);
        comms_.tied->AllReduce(g, static_cast<size_t>(n));
      } else {
        comms_.tied->AllReduce(c.store->grads() + ps[i].offset, static_cast<size_t>(ps[i].numel));
      }
    }
  }
  if (c.zero_adam) {
    // ZeRO-2/3: already reduce-scattered unit by unit during the backward.
  } else if (c.shard) {
    c.shard->ReduceScatterGrads(*c.store);
  } else {
    c.sync->Start(*c.store);
  }
  c.sync_started = true;
}

void Optimizer::FinishGradSync(Chunk& c) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (c.sync && c.sync->pending()) c.sync->Finish();
}

StepStats Optimizer::Step() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (!chunks_[i].sync_started) StartGradSync(static_cast<int>(i));
    FinishGradSync(chunks_[i]);
  }
  double local = 0.0, local_experts = 0.0;
  const bool split_experts = comms_.ep != nullptr && comms_.ep->size() > 1;
  for (Chunk& c : chunks_) {
    if (c.zero_adam) {
      local += c.zero_adam->LocalGradSquares(c.counts_tied);
    } else if (split_experts) {  // the EP ranks hold distinct experts
      local += LocalGradSquares(*c.store, c.adam->begin(), c.adam->end(), c.counts_tied, ParamSubset::kNonExperts);
      local_experts += LocalGradSquares(*c.store, c.adam->begin(), c.adam->end(), c.counts_tied, ParamSubset::kExperts);
    } else {
      local += LocalGradSquares(*c.store, c.adam->begin(), c.adam->end(), c.counts_tied);
    }
  }
  if (split_experts) local += SumAcross(comms_.ep, local_experts);
  double total = SumAcross(comms_.tp, local);
  total = SumAcross(comms_.pp, total);
  if (opts_.zero_stage >= 1) total = SumAcross(comms_.dp, total);
  StepStats st;
  st.grad_norm = std::sqrt(total);
  st.lr = opts_.lr.At(step_count_);
  if (opts_.adam.max_grad_norm > 0 && st.grad_norm > opts_.adam.max_grad_norm)
    st.clip_coef = static_cast<float>(opts_.adam.max_grad_norm / (st.grad_norm + 1e-6));
  ++step_count_;
  for (Chunk& c : chunks_) {
    if (c.zero_adam)
      c.zero_adam->Update(opts_.adam, step_count_, static_cast<float>(st.lr), st.clip_coef);
    else
      c.adam->Update(*c.store, opts_.adam, step_count_, static_cast<float>(st.lr), st.clip_coef);
    c.sync_started = false;
  }
  return st;
}

void Optimizer::ParamSync(int local_chunk) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero) c.zero->AllGatherValues();
  else if (c.shard) c.shard->AllGatherValues(*c.store);
}

void Optimizer::GatherMoments(int local_chunk, std::vector<float>* m, std::vector<float>* v) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  const size_t n = static_cast<size_t>(c.store->numel());
  m->assign(n, 0.0f);
  v->assign(n, 0.0f);
  if (c.zero_adam) {
    c.zero->AllGatherShardArray(c.zero_adam->m().data(), m->data());
    c.zero->AllGatherShardArray(c.zero_adam->v().data(), v->data());
  } else if (c.shard) {
    c.shard->AllGatherShard(c.adam->m().data(), m->data());
    c.shard->AllGatherShard(c.adam->v().data(), v->data());
  } else {
    std::memcpy(m->data(), c.adam->m().data(), n * sizeof(float));
    std::memcpy(v->data(), c.adam->v().data(), n * sizeof(float));
  }
}

void Optimizer::LoadMoments(int local_chunk, const float* m, const float* v) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero_adam) {
    c.zero->TakeShardArray(m, c.zero_adam->m().data());
    c.zero->TakeShardArray(v, c.zero_adam->v().data());
    return;
  }
  const int64_t b = c.adam->begin(), e = c.adam->end();
  std::memcpy(c.adam->m().data(), m + b, sizeof(float) * (e - b));
  std::memcpy(c.adam->v().data(), v + b, sizeof(float) * (e - b));
}

int64_t Optimizer::owned_begin(int local_chunk) const {
  DT_CHECK(chunks_.at(local_chunk).adam != nullptr) << "owned range of a ZeRO-2/3 chunk is per unit";
  return chunks_.at(local_chunk).adam->begin();
}
int64_t Optimizer::owned_end(int local_chunk) const {
  DT_CHECK(chunks_.at(local_chunk).adam != nullptr) << "owned range of a ZeRO-2/3 chunk is per unit";
  return chunks_.at(local_chunk).adam->end();
}

}  // namespace dt::rt
