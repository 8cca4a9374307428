#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "runtime/model/bf16_params.h"
#include "runtime/optim/adam_moments.h"
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
    DT_CHECK(!split_experts || opts.zero_stage <= 1) << "ZeRO-2/3 with expert parallelism is not implemented";
    Chunk c;
    c.store = chunks[i];
    c.counts_tied = counts_tied[i];
    if (opts.zero_stage >= 2 && dp > 1) {
      c.zero = c.store->sharding();
      DT_CHECK(c.zero != nullptr && c.zero->stage() == opts.zero_stage && c.zero->dp()->size() == dp)
          << "ZeRO-" << opts.zero_stage << " needs chunk " << i << "'s store sharded over the same DP group";
      c.zero_adam = std::make_unique<ShardedAdamW>(c.zero, opts.bf16_moments);
      if (c.zero->bf16()) c.zero->DropFp32Values();  // the master slots are taken
    } else if (opts.zero_stage >= 1) {
      const bool bf16 = c.store->bf16() != nullptr, bf16_grads = c.store->bf16_grads();
      auto add_part = [&](Comm* group, std::vector<StoreSpan> spans) {
        Part part;
        part.shard = std::make_unique<ZeroShard>(group, std::move(spans), scale, bf16, bf16_grads);
        for (const StoreSpan& piece : part.shard->owned())
          part.adams.push_back(
              std::make_unique<AdamWShard>(*c.store, piece.offset, piece.offset + piece.size, opts.bf16_moments));
        c.parts.push_back(std::move(part));
      };
      if (split_experts) {  // dense spans over dp, expert spans over expert_dp
        std::vector<StoreSpan> dense, experts;
        for (const Param& p : c.store->params()) {
          std::vector<StoreSpan>& to = p.expert ? experts : dense;
          if (!to.empty() && to.back().offset + to.back().size == p.offset) to.back().size += p.numel;
          else to.push_back({p.offset, p.numel});
        }
        add_part(comms.dp, std::move(dense));
        add_part(comms.expert_dp, std::move(experts));
      } else {
        add_part(comms.dp, {{0, c.store->numel()}});
      }
    } else {
      c.sync = std::make_unique<GradSync>(comms.dp, opts.bucket_bytes, scale, split_experts, comms.expert_dp);
      Part whole;
      whole.adams.push_back(std::make_unique<AdamWShard>(*c.store, 0, c.store->numel(), opts.bf16_moments));
      c.parts.push_back(std::move(whole));
    }
    // bf16: the optimizer took its fp32 master range; the flat fp32 values go.
    if (c.store->bf16() != nullptr) c.store->DropValues();
    chunks_.push_back(std::move(c));
  }
}

void Optimizer::StartGradSync(int local_chunk, bool blocking) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  DT_CHECK(!c.sync_started) << "StartGradSync twice for chunk " << local_chunk;
  if (comms_.tied != nullptr && comms_.tied->size() > 1) {
    auto& ps = c.store->params();
    for (int i = 0; i < static_cast<int>(ps.size()); ++i) {
      if (!ps[i].tied) continue;
      if (c.store->bf16_grads()) {
        comms_.tied->AllReduceBf16(c.store->bf16()->grads() + ps[i].offset, static_cast<size_t>(ps[i].numel));
      } else if (c.zero_adam && c.zero->bf16_grads()) {
        int64_t n = 0;
        bf16_t* g = c.zero_adam->TiedGradSlot16(i, &n);
        comms_.tied->AllReduceBf16(g, static_cast<size_t>(n));
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
  } else if (c.sync) {
    c.sync->Start(*c.store, blocking);
  } else {
    for (Part& part : c.parts) part.shard->ReduceScatterGrads(*c.store);
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
    if (!chunks_[i].sync_started) StartGradSync(static_cast<int>(i), /*blocking=*/true);  // waited right here
    FinishGradSync(chunks_[i]);
  }
  double local = 0.0, local_experts = 0.0;
  const bool split_experts = comms_.ep != nullptr && comms_.ep->size() > 1;
  for (Chunk& c : chunks_) {
    if (c.zero_adam) {
      local += c.zero_adam->LocalGradSquares(c.counts_tied);
      continue;
    }
    for (Part& part : c.parts)
      for (const auto& a : part.adams) {
        if (split_experts && c.sync) {  // ZeRO-0: the EP ranks hold distinct experts, whole
          local += LocalGradSquares(*c.store, a->begin(), a->end(), c.counts_tied, ParamSubset::kNonExperts);
          local_experts += LocalGradSquares(*c.store, a->begin(), a->end(), c.counts_tied, ParamSubset::kExperts);
        } else {  // ZeRO-1: every share once over dp (the expert shares over expert_dp x ep = dp)
          local += LocalGradSquares(*c.store, a->begin(), a->end(), c.counts_tied);
        }
      }
  }
  if (split_experts && opts_.zero_stage == 0) local += SumAcross(comms_.ep, local_experts);
  double total = SumAcross(comms_.tp, local);
  total = SumAcross(comms_.pp, total);
  if (opts_.zero_stage >= 1) total = SumAcross(comms_.dp, total);
  StepStats st;
  st.grad_norm = std::sqrt(total);
  st.lr = opts_.lr.At(step_count_);
  if (!std::isfinite(st.grad_norm)) {  // a diverged step: keep the previous model
    st.skipped = true;
    for (Chunk& c : chunks_) c.sync_started = false;
    return st;
  }
  if (opts_.adam.max_grad_norm > 0 && st.grad_norm > opts_.adam.max_grad_norm)
    st.clip_coef = static_cast<float>(opts_.adam.max_grad_norm / (st.grad_norm + 1e-6));
  ++step_count_;
  for (Chunk& c : chunks_) {
    if (c.zero_adam) c.zero_adam->Update(opts_.adam, step_count_, static_cast<float>(st.lr), st.clip_coef);
    for (Part& part : c.parts)
      for (const auto& a : part.adams)
        a->Update(*c.store, opts_.adam, step_count_, static_cast<float>(st.lr), st.clip_coef);
    c.sync_started = false;
  }
  return st;
}

void Optimizer::ParamSync(int local_chunk) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero) {
    c.zero->AllGatherValues();
    return;
  }
  for (Part& part : c.parts)
    if (part.shard) part.shard->AllGatherValues(*c.store);
}

void Optimizer::GatherPieces(Chunk& c, void (*read)(AdamWShard&, float*), std::vector<float>* full) {
  const size_t n = static_cast<size_t>(c.store->numel());
  full->assign(n, 0.0f);
  for (Part& part : c.parts) {
    if (!part.shard) {  // ZeRO-0: one piece, the whole store
      read(*part.adams[0], full->data());
      continue;
    }
    // The owned pieces in order are the shard's share of its flat space.
    const ZeroShard& z = *part.shard;
    FloatVec share, flat(static_cast<size_t>(z.numel()));
    for (const auto& a : part.adams) {
      const size_t at = share.size();
      share.resize(at + static_cast<size_t>(a->end() - a->begin()));
      read(*a, share.data() + at);
    }
    share.resize(static_cast<size_t>(std::max<int64_t>(z.range().end - z.range().begin, 1)));
    part.shard->AllGatherShard(share.data(), flat.data());
    z.ScatterFlat(flat.data(), full->data());
  }
}

void Optimizer::GatherMoments(int local_chunk, std::vector<float>* m, std::vector<float>* v) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero_adam) {
    const size_t n = static_cast<size_t>(c.store->numel());
    m->assign(n, 0.0f);
    v->assign(n, 0.0f);
    AdamMoments& mo = c.zero_adam->moments();
    std::vector<float> shard(static_cast<size_t>(mo.size()));
    mo.ReadM(shard.data());
    c.zero->AllGatherShardArray(shard.data(), m->data());
    mo.ReadV(shard.data());
    c.zero->AllGatherShardArray(shard.data(), v->data());
    return;
  }
  GatherPieces(c, [](AdamWShard& a, float* out) { a.moments().ReadM(out); }, m);
  GatherPieces(c, [](AdamWShard& a, float* out) { a.moments().ReadV(out); }, v);
}

void Optimizer::GatherMaster(int local_chunk, std::vector<float>* values) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero_adam) {  // ZeRO-2/3: the master slots in shard layout
    DT_CHECK(c.zero->bf16()) << "GatherMaster: chunk " << local_chunk << " is fp32 (its values are the weights)";
    values->assign(static_cast<size_t>(c.store->numel()), 0.0f);
    c.zero->AllGatherShardArray(c.zero_adam->master().data(), values->data());
    return;
  }
  DT_CHECK(c.store->bf16() != nullptr) << "GatherMaster: chunk " << local_chunk
                                       << " is fp32 (its values are the weights)";
  GatherPieces(c, [](AdamWShard& a, float* out) { std::copy(a.master().begin(), a.master().end(), out); }, values);
}

void Optimizer::LoadMaster(int local_chunk, const float* values) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero_adam) {
    DT_CHECK(c.zero->bf16()) << "LoadMaster: chunk " << local_chunk << " is fp32 (its values are the weights)";
    c.zero->TakeShardArray(values, c.zero_adam->master().data());
    c.zero->SetValues16(values);
    return;
  }
  Bf16Params* b = c.store->bf16();
  DT_CHECK(b != nullptr) << "LoadMaster: chunk " << local_chunk << " is fp32 (its values are the weights)";
  for (Part& part : c.parts)
    for (const auto& a : part.adams)
      std::memcpy(a->master().data(), values + a->begin(), sizeof(float) * (a->end() - a->begin()));
  NarrowToBf16(values, b->values(), c.store->numel());
}

void Optimizer::LoadMoments(int local_chunk, const float* m, const float* v) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Chunk& c = chunks_.at(local_chunk);
  if (c.zero_adam) {
    AdamMoments& mo = c.zero_adam->moments();
    std::vector<float> ms(static_cast<size_t>(mo.size())), vs(ms.size());
    c.zero->TakeShardArray(m, ms.data());
    c.zero->TakeShardArray(v, vs.data());
    mo.Write(ms.data(), vs.data());
    return;
  }
  for (Part& part : c.parts)
    for (const auto& a : part.adams) a->moments().Write(m + a->begin(), v + a->begin());
}

}  // namespace dt::rt
