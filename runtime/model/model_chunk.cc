#include "runtime/model/model_chunk.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/llama_layer.h"
#include "runtime/model/stash_precision.h"
#include "runtime/model/tp_ops.h"
#include "runtime/ops/cross_entropy.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/layernorm.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/rmsnorm.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

ModelChunk::ModelChunk(const ModelSpec& model, const PlanSpec& plan, int chunk, int tp_rank,
                       const ParallelComms& comms, Backend& backend, uint64_t seed)
    : model_(model), plan_(plan), chunk_(chunk), comms_(comms) {
  DT_CHECK(model.family == ModelFamily::kLlama || model.kv_heads == model.heads) << "GPT uses multi-head attention";
  DT_CHECK(plan.cp == 1 || (comms.cp != nullptr && comms.cp->size() == plan.cp)) << "cp comm size != plan.cp";
  DT_CHECK(chunk >= 0 && chunk < plan.num_chunks()) << "chunk " << chunk;
  if (plan_.layers_per_chunk.empty()) plan_.layers_per_chunk = EvenSplit(model.num_layers, plan.num_chunks());
  DT_CHECK_EQ(static_cast<int>(plan_.layers_per_chunk.size()), plan.num_chunks());
  const int tp = plan.tp;
  DT_CHECK(tp == 1 || (comms.tp != nullptr && comms.tp->size() == tp)) << "tp comm size != plan.tp";
  DT_CHECK(comms.tp == nullptr || comms.tp->rank() == tp_rank) << "tp_rank != comm rank";
  DT_CHECK_EQ(model.heads % tp, 0) << "heads % tp";
  DT_CHECK_EQ(model.ffn_hidden % tp, 0) << "ffn_hidden % tp";
  DT_CHECK(model.kv_heads % tp == 0 || tp % model.kv_heads == 0)
      << "kv_heads " << model.kv_heads << " vs tp " << tp << ": one must divide the other";
  is_first_ = chunk == 0;
  is_last_ = chunk == plan.num_chunks() - 1;

  const int64_t seq_full = plan.seq_length > 0 ? plan.seq_length : model.seq_length;
  DT_CHECK(seq_full > 0 && (!model.learned_positions() || seq_full <= model.max_position))
      << "seq_length " << seq_full << " vs max_position " << model.max_position;
  DT_CHECK(plan.cp == 1 || seq_full % (2 * plan.cp) == 0) << "context parallelism needs seq % (2 * cp) == 0";
  const int64_t seq = seq_full / plan.cp;
  ctx_.be = &backend;
  ctx_.tp = comms.tp;
  ctx_.tp_rank = tp_rank;
  ctx_.tp_size = tp;
  ctx_.sp = plan.sequence_parallel && tp > 1;
  DT_CHECK(!ctx_.sp || seq % tp == 0) << "sequence parallelism needs (seq / cp) % tp == 0";
  ctx_.cp = plan.cp > 1 ? comms.cp : nullptr;
  ctx_.cp_rank = plan.cp > 1 ? comms.cp->rank() : 0;
  ctx_.cp_size = plan.cp;
  ctx_.seq = seq;
  ctx_.batch = plan.micro_batch;
  ctx_.rows = seq * plan.micro_batch;
  ctx_.local_rows = ctx_.sp ? ctx_.rows / tp : ctx_.rows;
  ctx_.hidden = model.hidden;
  ctx_.heads_local = model.heads / tp;
  ctx_.head_dim = model.head_dim();
  ctx_.ffn_local = model.ffn_hidden / tp;
  ctx_.kv_heads = model.kv_heads;
  ctx_.kv_heads_local = model.kv_heads >= tp ? model.kv_heads / tp : 1;
  ctx_.rope_theta = model.rope_theta;
  ctx_.norm_eps = model.rms_norm_eps;
  ctx_.store = &store_;
  if (model.moe()) {
    DT_CHECK(model.family == ModelFamily::kLlama) << "MoE runs in the Llama family only";
    DT_CHECK_EQ(model.moe_ffn_hidden % tp, 0) << "moe_ffn_hidden % tp";
    DT_CHECK(plan.ep >= 1 && model.num_experts % plan.ep == 0) << "ep " << plan.ep << " vs experts";
    DT_CHECK(plan.ep == 1 || (comms.ep != nullptr && comms.ep->size() == plan.ep)) << "ep comm size != plan.ep";
    ctx_.num_experts = model.num_experts;
    ctx_.top_k = model.moe_top_k;
    ctx_.expert_ffn_local = model.moe_ffn_hidden / tp;
    ctx_.moe_capacity_factor = plan.moe_capacity_factor;
    ctx_.moe_pad_to_capacity = plan.moe_pad_to_capacity;
    // Each rank drops among its own copies: with a sequence split over TP or
    // CP that is not one rank's choice (the capability table refuses it).
    DT_CHECK(plan.moe_capacity_factor == 0 || (tp == 1 && plan.cp == 1)) << "expert capacity with tp or cp > 1";
    DT_CHECK_EQ(model.shared_ffn_hidden % tp, 0) << "shared_ffn_hidden % tp";
    ctx_.shared_ffn_local = model.shared_ffn_hidden / tp;
    ctx_.shared_expert_gate = model.shared_expert_gate && model.shared_ffn_hidden > 0;
    ctx_.ep = plan.ep > 1 ? comms.ep : nullptr;
    ctx_.ep_rank = plan.ep > 1 ? comms.ep->rank() : 0;
    ctx_.ep_size = plan.ep;
  }

  const int64_t h = model.hidden, v = model.vocab;
  vocab_start_ = ShardBegin(v, tp_rank, tp);
  vocab_local_ = ShardBegin(v, tp_rank + 1, tp) - vocab_start_;
  const bool tied_across = model.tied_embeddings && plan.num_chunks() > 1;
  // Units (the ZeRO-2/3 granularity): a tied tensor is alone in its unit so
  // both copies have the same shard layout.
  int word_unit = -1;
  if (is_first_) {
    word_unit = store_.BeginUnit("embedding.word");
    word_ = DeclareParam(&ctx_, "embedding.word.weight", {v, h}, ShardKind::kSplitDim0, false, tied_across);
    embed_units_ = {word_unit};
    if (model.learned_positions()) {
      embed_units_.push_back(store_.BeginUnit("embedding.position"));
      pos_ = DeclareParam(&ctx_, "embedding.position.weight", {model.max_position, h}, ShardKind::kReplicated, false);
    }
  }
  const int first = plan_.ChunkFirstLayer(chunk);
  for (int l = 0; l < plan_.layers_per_chunk[chunk]; ++l) {
    layer_units_.push_back(store_.BeginUnit("layers." + std::to_string(first + l)));
    if (model.family == ModelFamily::kLlama)
      layers_.push_back(std::make_unique<LlamaLayer>(&ctx_, first + l, model.num_layers, model.DenseLayer(first + l)));
    else
      layers_.push_back(std::make_unique<GptLayer>(&ctx_, first + l, model.num_layers));
  }
  if (is_last_) {
    if (model.family == ModelFamily::kLlama) {  // RMSNorm: weight only
      head_units_ = {store_.BeginUnit("final_norm")};
      lnf_w_ = DeclareParam(&ctx_, "final_norm.weight", {h}, ShardKind::kReplicated, true);
    } else {
      head_units_ = {store_.BeginUnit("final_ln")};
      lnf_w_ = DeclareParam(&ctx_, "final_ln.weight", {h}, ShardKind::kReplicated, true);
      lnf_b_ = DeclareParam(&ctx_, "final_ln.bias", {h}, ShardKind::kReplicated, true);
    }
    if (!model.tied_embeddings) {
      head_units_.push_back(store_.BeginUnit("lm_head"));
      head_w_ = DeclareParam(&ctx_, "lm_head.weight", {v, h}, ShardKind::kSplitDim0, false);
    } else if (is_first_) {
      head_w_ = word_;
      head_units_.push_back(word_unit);
    } else {  // a copy of the embedding, kept equal by summing grads over `tied`
      head_units_.push_back(store_.BeginUnit("lm_head"));
      head_w_ = DeclareParam(&ctx_, "embedding.word.weight", {v, h}, ShardKind::kSplitDim0, false, true);
    }
  }
  store_.Finalize();
  InitParams(seed);
  const bool bf16 = plan.precision == Precision::kBf16, fp32_grads = plan.grad_bytes == 4;
  if (plan.zero_stage >= 2 && comms.dp != nullptr && comms.dp->size() > 1) {
    using P = ShardedParams::Precision;
    zero_ = std::make_unique<ShardedParams>(&store_, comms.dp, plan.zero_stage,
                                            1.0f / static_cast<float>(comms.dp->size()),
                                            !bf16 ? P::kFp32 : fp32_grads ? P::kBf16Fp32Grads : P::kBf16);
  }
  if (bf16) {
    ctx_.bf16 = true;
    if (!zero_) bf16_ = std::make_unique<Bf16Params>(&store_, fp32_grads);  // else the sharding keeps bf16
  }
}

void ModelChunk::BeginUse(const std::vector<int>& units, bool backward) {
  if (bf16_) {
    for (int u : units) {
      bf16_->Gather(u);
      if (backward) bf16_->BeginGrads(u);
    }
    return;
  }
  if (!zero_) return;
  for (int u : units) {
    zero_->Gather(u);
    if (backward) zero_->BeginGrads(u);
  }
}

void ModelChunk::EndUse(const std::vector<int>& units, bool backward) {
  if (!zero_ && !bf16_) return;
  for (int u : units) {
    if (zero_) zero_->Release(u);
    if (bf16_) bf16_->Release(u);
    if (!backward) continue;
    const ParamUnit& pu = store_.units()[u];
    FlushSpGrads(&ctx_, pu.first_param, pu.end_param);
    if (zero_) zero_->ReduceGrads(u);
    if (bf16_) bf16_->EndGrads(u);
  }
}

void ModelChunk::InitParams(uint64_t seed) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const auto& ps = store_.params();
  auto normal = [&](int i) { InitNormal(ps[i], seed, 0.02f, store_.value(i)); };
  if (word_ >= 0) normal(word_);
  if (pos_ >= 0) normal(pos_);
  for (auto& l : layers_) l->Init(seed);
  if (lnf_w_ >= 0) {
    InitConstant(ps[lnf_w_], 1.0f, store_.value(lnf_w_));
    if (lnf_b_ >= 0) InitConstant(ps[lnf_b_], 0.0f, store_.value(lnf_b_));
  }
  if (head_w_ >= 0 && head_w_ != word_) normal(head_w_);
}

namespace {
// Calls fn(local index, global position, length) for each maximal run of
// consecutive global positions among local indices [begin, end).
template <class Fn>
void ForEachPositionRun(const LayerContext& ctx, int64_t begin, int64_t end, Fn fn) {
  int64_t t = begin;
  while (t < end) {
    const int64_t pos = ctx.Position(t);
    int64_t len = 1;
    while (t + len < end && ctx.Position(t + len) == pos + len) ++len;
    fn(t, pos, len);
    t += len;
  }
}
}  // namespace

std::vector<int32_t> ModelChunk::SeqMajor(const int32_t* bm) const {
  std::vector<int32_t> out(ctx_.rows);
  const int64_t seq_full = ctx_.seq * ctx_.cp_size;
  for (int64_t t = 0; t < ctx_.seq; ++t)
    for (int64_t b = 0; b < ctx_.batch; ++b) {
      const int32_t tok = bm[b * seq_full + ctx_.Position(t)];
      DT_CHECK(tok >= 0 && tok < model_.vocab) << "token " << tok << " outside vocab " << model_.vocab;
      out[t * ctx_.batch + b] = tok;
    }
  return out;
}

void ModelChunk::EnableDropout(float rate, uint64_t seed) {
  DT_CHECK(model_.family == ModelFamily::kGpt && model_.uses_dropout() && plan_.dropout)
      << "dropout enabled for model '" << model_.name << "' and a plan that do not train with it";
  DT_CHECK(rate >= 0.0f && rate < 1.0f) << "dropout rate " << rate;
  ctx_.dropout.rate = rate;
  ctx_.dropout.seed = seed;
}

Tensor ModelChunk::EmbedForward(const int32_t* tokens, Stash* s) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const int64_t h = ctx_.hidden;
  s->tokens = SeqMajor(tokens);
  Tensor partial({ctx_.rows, h});
  EmbeddingForward(store_.value(word_), vocab_start_, vocab_local_, h, s->tokens.data(), ctx_.rows,
                   partial.data());
  Tensor out = ReduceSeq(&ctx_, &partial);  // vocab-parallel sum (to this rank's sequence shard)
  // Learned positions at the global positions of this rank's rows (its SP
  // shard of its CP-local sequence).
  const int64_t seq_local = ctx_.local_rows / ctx_.batch;
  const int64_t t0 = ctx_.sp ? ctx_.tp_rank * seq_local : 0;
  if (pos_ >= 0)
    ForEachPositionRun(ctx_, t0, t0 + seq_local, [&](int64_t t, int64_t pos, int64_t len) {
      PositionEmbeddingForward(store_.value(pos_) + pos * h, len, ctx_.batch, h, out.data() + (t - t0) * ctx_.batch * h);
    });
  if (ctx_.dropout.on()) {
    s->embed_mask = DropoutMask(out.numel());
    DrawTokenMask(ctx_.dropout, DropoutSite::kEmbedding, -1, ctx_.samples, ctx_.ShardPositions(), ctx_.local_rows, h,
                  s->embed_mask.data());
    ApplyMask(out.data(), s->embed_mask.data(), ctx_.dropout.scale(), out.numel(), out.data());
  }
  return out;
}

void ModelChunk::EmbedBackward(const Tensor& dx, Stash* s) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  // The full-sequence grad (gathered under SP) is identical on every TP
  // rank, so the replicated position grad needs no all-reduce.
  Tensor dropped;
  if (!s->embed_mask.empty()) {
    dropped = Tensor::Uninitialized(dx.shape());
    ApplyMask(dx.data(), s->embed_mask.data(), ctx_.dropout.scale(), dx.numel(), dropped.data());
    s->embed_mask = DropoutMask();
  }
  Tensor full = GatherSeq(&ctx_, dropped.empty() ? dx : dropped);
  const int64_t h = ctx_.hidden;
  if (pos_ >= 0)
    ForEachPositionRun(ctx_, 0, ctx_.seq, [&](int64_t t, int64_t pos, int64_t len) {
      PositionEmbeddingBackward(full.data() + t * ctx_.batch * h, len, ctx_.batch, h, ctx_.G(pos_) + pos * h);
    });
  EmbeddingBackward(full.data(), s->tokens.data(), ctx_.rows, vocab_start_, vocab_local_, ctx_.hidden,
                    ctx_.G(word_));
}

float ModelChunk::HeadForward(Tensor x, const int32_t* targets, HeadStash* s) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Backend& be = *ctx_.be;
  const int64_t rl = ctx_.local_rows, h = ctx_.hidden;
  s->x = std::move(x);
  s->targets = SeqMajor(targets);
  s->mean = Tensor({rl});
  s->rstd = Tensor({rl});
  s->lnf = Tensor({rl, h});
  if (lnf_b_ >= 0) {
    LayerNormForward(be, s->x.data(), store_.value(lnf_w_), store_.value(lnf_b_), rl, h, s->lnf.data(),
                     s->mean.data(), s->rstd.data());
  } else {
    RmsNormForward(be, s->x.data(), store_.value(lnf_w_), rl, h, static_cast<float>(ctx_.norm_eps), s->lnf.data(),
                   s->rstd.data());
  }
  Tensor full = GatherSeq(&ctx_, s->lnf);
  s->logits = Tensor({ctx_.rows, vocab_local_});
  LinearForward(be, full.data(), ctx_.rows, h, store_.value(head_w_), nullptr, vocab_local_, s->logits.data());
  s->lse = Tensor({ctx_.rows});
  return CrossEntropyForward(s->logits.data(), ctx_.rows, vocab_start_, vocab_local_, s->targets.data(),
                             ctx_.tp, s->lse.data());
}

Tensor ModelChunk::HeadBackward(HeadStash* s, float loss_scale) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  Backend& be = *ctx_.be;
  const int64_t rl = ctx_.local_rows, h = ctx_.hidden;
  Tensor dlogits({ctx_.rows, vocab_local_});
  CrossEntropyBackward(s->logits.data(), ctx_.rows, vocab_start_, vocab_local_, s->targets.data(),
                       s->lse.data(), loss_scale, dlogits.data());
  s->logits = Tensor();
  Tensor dfull({ctx_.rows, h});
  {
    Tensor full = GatherSeq(&ctx_, s->lnf);
    LinearBackward(be, full.data(), ctx_.rows, h, store_.value(head_w_), vocab_local_, dlogits.data(),
                   dfull.data(), ctx_.G(head_w_), nullptr);
  }
  Tensor dln = ReduceSeq(&ctx_, &dfull);
  Tensor dx({rl, h});
  if (lnf_b_ >= 0) {
    LayerNormBackward(be, s->x.data(), store_.value(lnf_w_), s->mean.data(), s->rstd.data(), dln.data(), rl,
                      h, dx.data(), ctx_.G(lnf_w_), ctx_.G(lnf_b_));
  } else {
    RmsNormBackward(be, s->x.data(), store_.value(lnf_w_), s->rstd.data(), dln.data(), rl, h, dx.data(),
                    ctx_.G(lnf_w_));
  }
  *s = HeadStash();
  return dx;
}

Tensor ModelChunk::Forward(int mb, const Tensor* input, const int32_t* tokens, const int32_t* targets,
                           float* loss, const int64_t* samples) {
  DT_CHECK(stash_.find(mb) == stash_.end()) << "Forward of microbatch " << mb << " twice";
  Stash& s = stash_[mb];
  if (ctx_.dropout.on()) {
    DT_CHECK(samples != nullptr) << "dropout needs the microbatch's global sample indices";
    s.samples.assign(samples, samples + ctx_.batch);
    ctx_.samples = s.samples;
  }
  Tensor x;
  if (is_first_) {
    DT_CHECK(tokens != nullptr) << "first chunk needs tokens";
    BeginUse(embed_units_, false);
    x = EmbedForward(tokens, &s);
    EndUse(embed_units_, false);
  } else {
    DT_CHECK(input != nullptr && input->numel() == activation_numel())
        << "chunk " << chunk_ << " input has " << (input ? input->numel() : 0) << " floats, expected "
        << activation_numel();
    x = input->Reshaped({ctx_.local_rows, ctx_.hidden}).Clone();
  }
  s.layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    BeginUse({layer_units_[l]}, false);
    // Full recompute of the first recompute_num_layers layers only (0: all).
    const Recompute mode = plan_.recompute == Recompute::kFull && plan_.recompute_num_layers > 0 &&
                                   static_cast<int>(l) >= plan_.recompute_num_layers
                               ? Recompute::kNone
                               : plan_.recompute;
    x = layers_[l]->Forward(std::move(x), mode, &s.layers[l]);
    EndUse({layer_units_[l]}, false);
    NarrowStash(ctx_, &s.layers[l]);
  }
  if (!is_last_) return x;
  DT_CHECK(targets != nullptr) << "last chunk needs targets";
  BeginUse(head_units_, false);
  float l = HeadForward(std::move(x), targets, &s.head);
  EndUse(head_units_, false);
  NarrowTensor(ctx_, &s.head.x);
  NarrowTensor(ctx_, &s.head.lnf);
  if (ctx_.cp != nullptr) {  // mean of the CP ranks' local means (equal token counts)
    comms_.cp->AllReduce(&l, 1);
    l /= static_cast<float>(ctx_.cp_size);
  }
  if (loss != nullptr) *loss = l;
  Tensor out({1});
  out[0] = l;
  return out;
}

Tensor ModelChunk::Backward(int mb, const Tensor* grad_output, float loss_scale) {
  auto it = stash_.find(mb);
  DT_CHECK(it != stash_.end()) << "Backward of microbatch " << mb << " without Forward";
  Stash& s = it->second;
  if (ctx_.dropout.on()) ctx_.samples = s.samples;  // full recompute redraws the forward's masks
  Tensor d;
  if (is_last_) {
    WidenTensor(&s.head.x);
    WidenTensor(&s.head.lnf);
    BeginUse(head_units_, true);
    d = HeadBackward(&s.head, loss_scale);
    EndUse(head_units_, true);
  } else {
    DT_CHECK(grad_output != nullptr && grad_output->numel() == activation_numel())
        << "chunk " << chunk_ << " grad_output size";
    d = grad_output->Reshaped({ctx_.local_rows, ctx_.hidden});
  }
  for (size_t l = layers_.size(); l-- > 0;) {
    WidenStash(&s.layers[l]);
    BeginUse({layer_units_[l]}, true);
    d = layers_[l]->Backward(d, &s.layers[l]);
    EndUse({layer_units_[l]}, true);
  }
  if (is_first_) {
    BeginUse(embed_units_, true);
    EmbedBackward(d, &s);
    EndUse(embed_units_, true);
    d = Tensor();
  } else if (!d.owning()) {
    d = d.Clone();
  }
  if (!zero_ && !bf16_) FlushSpGrads(&ctx_);  // ZeRO-2/3 and bf16 flushed unit by unit
  stash_.erase(it);
  return d;
}

}  // namespace dt::rt
