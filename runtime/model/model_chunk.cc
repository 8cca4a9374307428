#include "runtime/model/model_chunk.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/tp_ops.h"
#include "runtime/ops/cross_entropy.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/layernorm.h"
#include "runtime/ops/linear.h"

namespace dt::rt {

ModelChunk::ModelChunk(const ModelSpec& model, const PlanSpec& plan, int chunk, int tp_rank,
                       const ParallelComms& comms, Backend& backend, uint64_t seed)
    : model_(model), plan_(plan), chunk_(chunk), comms_(comms) {
  DT_CHECK(model.family == ModelFamily::kGpt) << "ModelChunk implements GPT only";
  DT_CHECK_EQ(model.kv_heads, model.heads) << "GPT uses multi-head attention";
  DT_CHECK(plan.cp == 1 || (comms.cp != nullptr && comms.cp->size() == plan.cp)) << "cp comm size != plan.cp";
  DT_CHECK(chunk >= 0 && chunk < plan.num_chunks()) << "chunk " << chunk;
  if (plan_.layers_per_chunk.empty()) plan_.layers_per_chunk = EvenSplit(model.num_layers, plan.num_chunks());
  DT_CHECK_EQ(static_cast<int>(plan_.layers_per_chunk.size()), plan.num_chunks());
  const int tp = plan.tp;
  DT_CHECK(tp == 1 || (comms.tp != nullptr && comms.tp->size() == tp)) << "tp comm size != plan.tp";
  DT_CHECK(comms.tp == nullptr || comms.tp->rank() == tp_rank) << "tp_rank != comm rank";
  DT_CHECK_EQ(model.heads % tp, 0) << "heads % tp";
  DT_CHECK_EQ(model.ffn_hidden % tp, 0) << "ffn_hidden % tp";
  is_first_ = chunk == 0;
  is_last_ = chunk == plan.num_chunks() - 1;

  const int64_t seq_full = plan.seq_length > 0 ? plan.seq_length : model.seq_length;
  DT_CHECK(seq_full > 0 && seq_full <= model.max_position)
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
  ctx_.store = &store_;

  const int64_t h = model.hidden, v = model.vocab;
  vocab_start_ = ShardBegin(v, tp_rank, tp);
  vocab_local_ = ShardBegin(v, tp_rank + 1, tp) - vocab_start_;
  const bool tied_across = model.tied_embeddings && plan.num_chunks() > 1;
  if (is_first_) {
    word_ = DeclareParam(&ctx_, "embedding.word.weight", {v, h}, ShardKind::kSplitDim0, false, tied_across);
    pos_ = DeclareParam(&ctx_, "embedding.position.weight", {model.max_position, h}, ShardKind::kReplicated, false);
  }
  const int first = plan_.ChunkFirstLayer(chunk);
  for (int l = 0; l < plan_.layers_per_chunk[chunk]; ++l)
    layers_.push_back(std::make_unique<GptLayer>(&ctx_, first + l, model.num_layers));
  if (is_last_) {
    lnf_w_ = DeclareParam(&ctx_, "final_ln.weight", {h}, ShardKind::kReplicated, true);
    lnf_b_ = DeclareParam(&ctx_, "final_ln.bias", {h}, ShardKind::kReplicated, true);
    if (!model.tied_embeddings) {
      head_w_ = DeclareParam(&ctx_, "lm_head.weight", {v, h}, ShardKind::kSplitDim0, false);
    } else if (is_first_) {
      head_w_ = word_;
    } else {  // a copy of the embedding, kept equal by summing grads over `tied`
      head_w_ = DeclareParam(&ctx_, "embedding.word.weight", {v, h}, ShardKind::kSplitDim0, false, true);
    }
  }
  store_.Finalize();
  InitParams(seed);
}

void ModelChunk::InitParams(uint64_t seed) {
  const auto& ps = store_.params();
  auto normal = [&](int i) { InitNormal(ps[i], seed, 0.02f, store_.value(i)); };
  if (word_ >= 0) normal(word_);
  if (pos_ >= 0) normal(pos_);
  for (auto& l : layers_) l->Init(seed);
  if (lnf_w_ >= 0) {
    InitConstant(ps[lnf_w_], 1.0f, store_.value(lnf_w_));
    InitConstant(ps[lnf_b_], 0.0f, store_.value(lnf_b_));
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

Tensor ModelChunk::EmbedForward(const int32_t* tokens, Stash* s) {
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
  ForEachPositionRun(ctx_, t0, t0 + seq_local, [&](int64_t t, int64_t pos, int64_t len) {
    PositionEmbeddingForward(store_.value(pos_) + pos * h, len, ctx_.batch, h, out.data() + (t - t0) * ctx_.batch * h);
  });
  return out;
}

void ModelChunk::EmbedBackward(const Tensor& dx, Stash* s) {
  // The full-sequence grad (gathered under SP) is identical on every TP
  // rank, so the replicated position grad needs no all-reduce.
  Tensor full = GatherSeq(&ctx_, dx);
  const int64_t h = ctx_.hidden;
  ForEachPositionRun(ctx_, 0, ctx_.seq, [&](int64_t t, int64_t pos, int64_t len) {
    PositionEmbeddingBackward(full.data() + t * ctx_.batch * h, len, ctx_.batch, h, ctx_.G(pos_) + pos * h);
  });
  EmbeddingBackward(full.data(), s->tokens.data(), ctx_.rows, vocab_start_, vocab_local_, ctx_.hidden,
                    ctx_.G(word_));
}

float ModelChunk::HeadForward(Tensor x, const int32_t* targets, HeadStash* s) {
  Backend& be = *ctx_.be;
  const int64_t rl = ctx_.local_rows, h = ctx_.hidden;
  s->x = std::move(x);
  s->targets = SeqMajor(targets);
  s->mean = Tensor({rl});
  s->rstd = Tensor({rl});
  s->lnf = Tensor({rl, h});
  LayerNormForward(be, s->x.data(), store_.value(lnf_w_), store_.value(lnf_b_), rl, h, s->lnf.data(),
                   s->mean.data(), s->rstd.data());
  Tensor full = GatherSeq(&ctx_, s->lnf);
  s->logits = Tensor({ctx_.rows, vocab_local_});
  LinearForward(be, full.data(), ctx_.rows, h, store_.value(head_w_), nullptr, vocab_local_, s->logits.data());
  s->lse = Tensor({ctx_.rows});
  return CrossEntropyForward(s->logits.data(), ctx_.rows, vocab_start_, vocab_local_, s->targets.data(),
                             ctx_.tp, s->lse.data());
}

Tensor ModelChunk::HeadBackward(HeadStash* s, float loss_scale) {
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
  LayerNormBackward(be, s->x.data(), store_.value(lnf_w_), s->mean.data(), s->rstd.data(), dln.data(), rl,
                    h, dx.data(), ctx_.G(lnf_w_), ctx_.G(lnf_b_));
  *s = HeadStash();
  return dx;
}

Tensor ModelChunk::Forward(int mb, const Tensor* input, const int32_t* tokens, const int32_t* targets,
                           float* loss) {
  DT_CHECK(stash_.find(mb) == stash_.end()) << "Forward of microbatch " << mb << " twice";
  Stash& s = stash_[mb];
  Tensor x;
  if (is_first_) {
    DT_CHECK(tokens != nullptr) << "first chunk needs tokens";
    x = EmbedForward(tokens, &s);
  } else {
    DT_CHECK(input != nullptr && input->numel() == activation_numel())
        << "chunk " << chunk_ << " input has " << (input ? input->numel() : 0) << " floats, expected "
        << activation_numel();
    x = input->Reshaped({ctx_.local_rows, ctx_.hidden}).Clone();
  }
  s.layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) x = layers_[l]->Forward(std::move(x), plan_.recompute, &s.layers[l]);
  if (!is_last_) return x;
  DT_CHECK(targets != nullptr) << "last chunk needs targets";
  float l = HeadForward(std::move(x), targets, &s.head);
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
  Tensor d;
  if (is_last_) {
    d = HeadBackward(&s.head, loss_scale);
  } else {
    DT_CHECK(grad_output != nullptr && grad_output->numel() == activation_numel())
        << "chunk " << chunk_ << " grad_output size";
    d = grad_output->Reshaped({ctx_.local_rows, ctx_.hidden});
  }
  for (size_t l = layers_.size(); l-- > 0;) d = layers_[l]->Backward(d, &s.layers[l]);
  if (is_first_) {
    EmbedBackward(d, &s);
    d = Tensor();
  } else if (!d.owning()) {
    d = d.Clone();
  }
  FlushSpGrads(&ctx_);
  stash_.erase(it);
  return d;
}

}  // namespace dt::rt
