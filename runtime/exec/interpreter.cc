#include "runtime/exec/interpreter.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {
constexpr int kAct = 0;   // activation, flows to chunk + 1
constexpr int kGrad = 1;  // gradient, flows to chunk - 1
}  // namespace

Interpreter::Interpreter(const PlanSpec& plan, ActionList actions, std::vector<ModelChunk*> chunks,
                         Optimizer* optimizer, Comm* pp, const DataLoader* data)
    : plan_(plan),
      actions_(std::move(actions)),
      chunks_(std::move(chunks)),
      optimizer_(optimizer),
      pp_(pp),
      data_(data) {
  DT_CHECK_EQ(static_cast<int>(chunks_.size()), plan_.vpp);
  DT_CHECK(optimizer_ != nullptr && data_ != nullptr);
  DT_CHECK(plan_.pp == 1 || (pp_ != nullptr && pp_->size() == plan_.pp)) << "pp comm missing";
  pp_rank_ = pp_ != nullptr ? pp_->rank() : 0;
  last_syncs_.assign(actions_.size(), false);
  for (size_t i = actions_.size(); i-- > 0;) {
    const ActionKind k = actions_[i].kind;
    if (k != ActionKind::kGradSync && k != ActionKind::kOptimizerStep && k != ActionKind::kParamSync) break;
    last_syncs_[i] = k == ActionKind::kGradSync;
  }
  deferred_.assign(chunks_.size(), false);
  if (plan_.vpp > 1) {
    for (size_t i = 0; i < chunks_.size(); ++i)
      for (const Param& p : chunks_[i]->params().params())
        if (p.tied) deferred_[i] = true;
  }
}

int Interpreter::Tag(int microbatch, int chunk, int direction) const {
  return (microbatch * plan_.num_chunks() + chunk) * 2 + direction;
}

ModelChunk* Interpreter::Local(int chunk) const {
  DT_CHECK(chunk >= 0 && chunk < plan_.num_chunks() && chunk % plan_.pp == pp_rank_)
      << "chunk " << chunk << " is not on pipeline rank " << pp_rank_;
  return chunks_[chunk / plan_.pp];
}

bool Interpreter::DeferGradSync(int local_chunk) const { return deferred_[local_chunk]; }

// pp == 1, vpp > 1: the embedding (chunk 0) and its LM-head copy (last chunk)
// are both here; each copy's grad becomes the sum, as the tied all-reduce
// would make it across ranks.
void Interpreter::SumLocalTiedGrads() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (plan_.pp != 1 || chunks_.size() < 2) return;
  std::map<std::string, std::vector<std::pair<ParamStore*, int>>> copies;
  for (ModelChunk* c : chunks_) {
    auto& ps = c->params().params();
    for (int i = 0; i < static_cast<int>(ps.size()); ++i)
      if (ps[i].tied) copies[ps[i].name].push_back({&c->params(), i});
  }
  for (auto& [name, list] : copies) {
    if (list.size() < 2) continue;
    const int64_t n = list[0].first->params()[list[0].second].numel;
    float* sum = list[0].first->grad(list[0].second);
    for (size_t k = 1; k < list.size(); ++k) {
      DT_CHECK_EQ(list[k].first->params()[list[k].second].numel, n) << name;
      const float* g = list[k].first->grad(list[k].second);
      for (int64_t j = 0; j < n; ++j) sum[j] += g[j];
    }
    for (size_t k = 1; k < list.size(); ++k) {
      float* g = list[k].first->grad(list[k].second);
      for (int64_t j = 0; j < n; ++j) g[j] = sum[j];
    }
  }
}

void Interpreter::PostRecv(int mb, int chunk, int direction) {
  const int tag = Tag(mb, chunk, direction);
  DT_CHECK(recvs_.find(tag) == recvs_.end()) << "receive posted twice, tag " << tag;
  const int producer = direction == kAct ? chunk - 1 : chunk + 1;
  const int peer = producer % plan_.pp;
  PendingRecv r;
  if (peer != pp_rank_) {
    r.buf = Tensor({Local(chunk)->activation_numel()});
    r.req = pp_->IRecv(r.buf.data(), static_cast<size_t>(r.buf.numel()), peer, tag);
  }
  recvs_.emplace(tag, std::move(r));
}

Tensor Interpreter::TakeRecv(int mb, int chunk, int direction) {
  const int tag = Tag(mb, chunk, direction);
  auto it = recvs_.find(tag);
  DT_CHECK(it != recvs_.end()) << "no receive posted for microbatch " << mb << " chunk " << chunk
                               << (direction == kAct ? " (activation)" : " (gradient)");
  Tensor t;
  if (it->second.req) {
    it->second.req->Wait();
    t = std::move(it->second.buf);
  } else {
    auto m = local_mail_.find(tag);
    DT_CHECK(m != local_mail_.end()) << "local message missing, tag " << tag;
    t = std::move(m->second);
    local_mail_.erase(m);
  }
  recvs_.erase(it);
  return t;
}

void Interpreter::Send(Tensor t, int mb, int to_chunk, int direction) {
  DT_CHECK(!t.empty()) << "nothing to send for microbatch " << mb << " chunk " << to_chunk;
  const int tag = Tag(mb, to_chunk, direction);
  const int peer = to_chunk % plan_.pp;
  if (peer == pp_rank_) {
    DT_CHECK(local_mail_.find(tag) == local_mail_.end()) << "local message twice, tag " << tag;
    local_mail_.emplace(tag, std::move(t));
    return;
  }
  PendingSend s;
  s.buf = std::move(t);
  s.req = pp_->ISend(s.buf.data(), static_cast<size_t>(s.buf.numel()), peer, tag);
  sends_.push_back(std::move(s));
}

StepOutcome Interpreter::RunStep(int64_t step) {
  StepOutcome out;
  for (ModelChunk* c : chunks_) c->params().ZeroGrads();
  const float loss_scale = 1.0f / static_cast<float>(plan_.num_microbatches);
  // Outputs produced by F / B, waiting for their SendAct / SendGrad.
  std::map<int, Tensor> produced;  // by Tag(mb, producing chunk, direction)
  for (size_t ai = 0; ai < actions_.size(); ++ai) {
    const Action& a = actions_[ai];
    // Free the buffers of sends that have completed (as a framework frees a
    // sent tensor once its request is done), so they do not pile up.
    sends_.erase(std::remove_if(sends_.begin(), sends_.end(), [](PendingSend& s) { return s.req->Test(); }),
                 sends_.end());
    switch (a.kind) {
      case ActionKind::kRecvAct:
        PostRecv(a.microbatch, a.chunk, kAct);
        break;
      case ActionKind::kRecvGrad:
        PostRecv(a.microbatch, a.chunk, kGrad);
        break;
      case ActionKind::kForward: {
        ModelChunk* c = Local(a.chunk);
        Tensor input;
        const int32_t* tokens = nullptr;
        const int32_t* targets = nullptr;
        if (c->is_first() || c->is_last()) {
          data_->Microbatch(step, a.microbatch, &tokens_, &targets_);
          tokens = tokens_.data();
          targets = targets_.data();
        }
        if (!c->is_first()) input = TakeRecv(a.microbatch, a.chunk, kAct);
        std::vector<int64_t> samples;  // dropout masks' keys: global sample indices
        DT_CHECK(data_ != nullptr || !c->dropout_on()) << "dropout without a data loader";
        if (c->dropout_on())
          for (int64_t b = 0; b < plan_.micro_batch; ++b)
            samples.push_back(data_->GlobalSampleIndex(step, a.microbatch, b));
        float loss = 0.0f;
        Tensor y = c->Forward(a.microbatch, c->is_first() ? nullptr : &input, tokens, targets, &loss,
                              samples.empty() ? nullptr : samples.data());
        if (c->is_last()) {
          out.loss_sum += loss;
          ++out.num_losses;
        } else {
          produced[Tag(a.microbatch, a.chunk, kAct)] = std::move(y);
        }
        break;
      }
      case ActionKind::kBackward: {
        ModelChunk* c = Local(a.chunk);
        Tensor grad_out;
        if (!c->is_last()) grad_out = TakeRecv(a.microbatch, a.chunk, kGrad);
        Tensor dx = c->Backward(a.microbatch, c->is_last() ? nullptr : &grad_out, loss_scale);
        if (!c->is_first()) produced[Tag(a.microbatch, a.chunk, kGrad)] = std::move(dx);
        break;
      }
      case ActionKind::kSendAct:
      case ActionKind::kSendGrad: {
        const int dir = a.kind == ActionKind::kSendAct ? kAct : kGrad;
        auto it = produced.find(Tag(a.microbatch, a.chunk, dir));
        DT_CHECK(it != produced.end()) << "send before its producer: " << ToString(a);
        Tensor t = std::move(it->second);
        produced.erase(it);
        Send(std::move(t), a.microbatch, dir == kAct ? a.chunk + 1 : a.chunk - 1, dir);
        break;
      }
      case ActionKind::kGradSync: {
        Local(a.chunk);  // checks the chunk is on this rank
        const int local = a.chunk / plan_.pp;
        if (!DeferGradSync(local)) optimizer_->StartGradSync(local, /*blocking=*/last_syncs_[ai]);
        break;
      }
      case ActionKind::kOptimizerStep:
        SumLocalTiedGrads();
        out.optimizer = optimizer_->Step();
        break;
      case ActionKind::kParamSync:
        optimizer_->ParamSync(a.chunk / plan_.pp);
        break;
    }
  }
  for (PendingSend& s : sends_) s.req->Wait();
  sends_.clear();
  DT_CHECK(produced.empty()) << produced.size() << " outputs were never sent";
  DT_CHECK(recvs_.empty() && local_mail_.empty()) << "unconsumed messages at step end";
  return out;
}

}  // namespace dt::rt
