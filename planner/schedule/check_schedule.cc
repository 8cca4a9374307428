#include "planner/schedule/check_schedule.h"

#include <string>

namespace dt {
namespace {

// Kinds that carry a (microbatch, chunk) pair, in the order their absence is reported.
constexpr ActionKind kPairKinds[] = {ActionKind::kForward,  ActionKind::kBackward,
                                     ActionKind::kRecvAct,  ActionKind::kSendAct,
                                     ActionKind::kRecvGrad, ActionKind::kSendGrad};

int PairKindIndex(ActionKind k) {
  for (int i = 0; i < 6; ++i)
    if (kPairKinds[i] == k) return i;
  return -1;
}

std::string Where(int rank, int index, const Action& a) {
  return "schedule rank " + std::to_string(rank) + " action " + std::to_string(index) + " (" +
         ToString(a) + "): ";
}

class Checker {
 public:
  Checker(const std::vector<ActionList>& s, const PlanSpec& p)
      : s_(s),
        p_(p),
        m_(p.num_microbatches),
        chunks_(p.num_chunks()),
        pos_(6 * static_cast<size_t>(m_) * chunks_, -1),
        backwards_(chunks_, 0),
        grad_sync_(chunks_, -1),
        param_sync_(chunks_, -1) {}

  Status Run() {
    if (static_cast<int>(s_.size()) != p_.pp)
      return InvalidArgument("schedule: has " + std::to_string(s_.size()) +
                             " action lists but pp = " + std::to_string(p_.pp) +
                             "; give one list per pipeline rank");
    for (int r = 0; r < p_.pp; ++r) DT_RETURN_IF_ERROR(CheckRank(r));
    return CheckDeadlock();
  }

  // Index of `kind`(mb, c) on its rank, or -1.
  int& Pos(ActionKind kind, int mb, int c) {
    return pos_[(static_cast<size_t>(PairKindIndex(kind)) * m_ + mb) * chunks_ + c];
  }

 private:
  // Whether (mb, c) needs an action of pair kind k: no RA/SG on chunk 0, no SA/RG on the last.
  bool Required(ActionKind k, int c) const {
    if (k == ActionKind::kRecvAct || k == ActionKind::kSendGrad) return c > 0;
    if (k == ActionKind::kSendAct || k == ActionKind::kRecvGrad) return c < chunks_ - 1;
    return true;
  }

  bool OnRank(int c, int rank) const { return c >= 0 && c < chunks_ && c % p_.pp == rank; }

  Status CheckFields(int r, int i, const Action& a) {
    auto bad = [&](const std::string& s) { return InvalidArgument(Where(r, i, a) + s); };
    const int last = chunks_ - 1;
    if (PairKindIndex(a.kind) >= 0) {
      if (a.microbatch < 0 || a.microbatch >= m_)
        return bad("microbatch must be in [0, " + std::to_string(m_) + ")");
      if (!OnRank(a.chunk, r))
        return bad("chunk must be a model chunk of this rank (chunk % pp == " + std::to_string(r) +
                   ", < " + std::to_string(chunks_) + ")");
      if (a.kind == ActionKind::kRecvAct && a.chunk == 0)
        return bad("chunk 0 receives no activation; remove it");
      if (a.kind == ActionKind::kSendGrad && a.chunk == 0)
        return bad("chunk 0 sends no input gradient; remove it");
      if (a.kind == ActionKind::kSendAct && a.chunk == last)
        return bad("the last chunk sends no activation; remove it");
      if (a.kind == ActionKind::kRecvGrad && a.chunk == last)
        return bad("the last chunk receives no output gradient; remove it");
      return Status::Ok();
    }
    switch (a.kind) {
      case ActionKind::kGradSync:
      case ActionKind::kParamSync:
        if (a.microbatch != -1) return bad("microbatch must be -1 for a per-step action");
        if (!OnRank(a.chunk, r)) return bad("chunk must be a model chunk of this rank");
        if (a.kind == ActionKind::kParamSync && p_.zero_stage < 1)
          return bad("ParamSync needs zero_stage >= 1; remove it");
        return Status::Ok();
      case ActionKind::kOptimizerStep:
        if (a.microbatch != -1 || a.chunk != -1)
          return bad("OptimizerStep takes microbatch -1 and chunk -1");
        return Status::Ok();
      default:
        return bad("unknown action kind");
    }
  }

  Status CheckOrder(int r, int i, const Action& a) {
    auto bad = [&](const std::string& s) { return InvalidArgument(Where(r, i, a) + s); };
    const int mb = a.microbatch, c = a.chunk, last = chunks_ - 1;
    auto name = [&](ActionKind k, int cc) { return ToString(Action{k, mb, cc}); };
    switch (a.kind) {
      case ActionKind::kForward:
        if (c > 0 && Pos(ActionKind::kRecvAct, mb, c) < 0)
          return bad("not preceded by its receive " + name(ActionKind::kRecvAct, c));
        break;
      case ActionKind::kBackward:
        if (Pos(ActionKind::kForward, mb, c) < 0)
          return bad("backward before its forward " + name(ActionKind::kForward, c));
        if (c < last && Pos(ActionKind::kRecvGrad, mb, c) < 0)
          return bad("not preceded by its receive " + name(ActionKind::kRecvGrad, c));
        if (grad_sync_[c] >= 0) return bad("after GradSync of its chunk");
        ++backwards_[c];
        break;
      case ActionKind::kSendAct:
        if (Pos(ActionKind::kForward, mb, c) < 0)
          return bad("send before its forward " + name(ActionKind::kForward, c));
        break;
      case ActionKind::kSendGrad:
        if (Pos(ActionKind::kBackward, mb, c) < 0)
          return bad("send before its backward " + name(ActionKind::kBackward, c));
        break;
      case ActionKind::kGradSync:
        if (grad_sync_[c] >= 0) return bad("duplicate GradSync of chunk " + std::to_string(c));
        if (backwards_[c] != m_)
          return bad("GradSync before the chunk's last backward (" + std::to_string(backwards_[c]) +
                     " of " + std::to_string(m_) + " done)");
        grad_sync_[c] = i;
        break;
      case ActionKind::kOptimizerStep:
        if (optimizer_ >= 0) return bad("duplicate OptimizerStep");
        for (int cc = r; cc < chunks_; cc += p_.pp)
          if (grad_sync_[cc] < 0) return bad("before GradSync of chunk " + std::to_string(cc));
        optimizer_ = i;
        break;
      case ActionKind::kParamSync:
        if (param_sync_[c] >= 0) return bad("duplicate ParamSync of chunk " + std::to_string(c));
        if (optimizer_ < 0) return bad("ParamSync before OptimizerStep");
        param_sync_[c] = i;
        break;
      default:
        break;
    }
    if (PairKindIndex(a.kind) >= 0) {
      int& pos = Pos(a.kind, mb, c);
      if (pos >= 0) return bad("duplicate; first at action " + std::to_string(pos));
      pos = i;
    }
    return Status::Ok();
  }

  Status CheckRank(int r) {
    const ActionList& list = s_[r];
    optimizer_ = -1;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      DT_RETURN_IF_ERROR(CheckFields(r, i, list[i]));
      DT_RETURN_IF_ERROR(CheckOrder(r, i, list[i]));
    }
    const std::string end = "schedule rank " + std::to_string(r) + " (end, after " +
                            std::to_string(list.size()) + " actions): missing ";
    for (int c = r; c < chunks_; c += p_.pp) {
      for (int mb = 0; mb < m_; ++mb) {
        for (ActionKind k : kPairKinds) {
          if (Required(k, c) && Pos(k, mb, c) < 0)
            return InvalidArgument(end + ToString(Action{k, mb, c}));
        }
      }
      if (grad_sync_[c] < 0)
        return InvalidArgument(end + ToString(Action{ActionKind::kGradSync, -1, c}));
    }
    if (optimizer_ < 0) return InvalidArgument(end + "OPT");
    if (p_.zero_stage >= 1)
      for (int c = r; c < chunks_; c += p_.pp)
        if (param_sync_[c] < 0)
          return InvalidArgument(end + ToString(Action{ActionKind::kParamSync, -1, c}) +
                                 " (zero_stage >= 1)");
    return Status::Ok();
  }

  // The send a receive waits for: SA(mb,c-1) for RA(mb,c), SG(mb,c+1) for RG(mb,c).
  Action MatchingSend(const Action& recv) const {
    if (recv.kind == ActionKind::kRecvAct)
      return {ActionKind::kSendAct, recv.microbatch, recv.chunk - 1};
    return {ActionKind::kSendGrad, recv.microbatch, recv.chunk + 1};
  }

  // Lock-step execution: each rank advances while its next action can
  // proceed; sends never block, a receive waits until its send was issued.
  Status CheckDeadlock() {
    std::vector<int> pc(p_.pp, 0);
    auto done = [&](int r) { return pc[r] == static_cast<int>(s_[r].size()); };
    auto blocked = [&](int r) {
      const Action& a = s_[r][pc[r]];
      if (a.kind != ActionKind::kRecvAct && a.kind != ActionKind::kRecvGrad) return false;
      const Action send = MatchingSend(a);
      return pc[send.chunk % p_.pp] <= Pos(send.kind, send.microbatch, send.chunk);
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < p_.pp; ++r) {
        while (!done(r) && !blocked(r)) {
          ++pc[r];
          progress = true;
        }
      }
    }
    for (int r = 0; r < p_.pp; ++r) {
      if (done(r)) continue;
      const Action send = MatchingSend(s_[r][pc[r]]);
      const int peer = send.chunk % p_.pp;
      const int send_index = Pos(send.kind, send.microbatch, send.chunk);
      std::string msg =
          Where(r, pc[r], s_[r][pc[r]]) + "deadlock: waits for " + ToString(send) + " at rank " +
          std::to_string(peer) + " action " + std::to_string(send_index) + ", but rank " +
          std::to_string(peer) + " is blocked at action " + std::to_string(pc[peer]) + " (" +
          ToString(s_[peer][pc[peer]]) + "); move the receive later or the send earlier";
      return InvalidArgument(msg);
    }
    return Status::Ok();
  }

  const std::vector<ActionList>& s_;
  const PlanSpec& p_;
  int m_, chunks_;
  std::vector<int> pos_;
  std::vector<int> backwards_, grad_sync_, param_sync_;
  int optimizer_ = -1;
};

}  // namespace

Status CheckSchedule(const std::vector<ActionList>& s, const PlanSpec& p) {
  if (p.pp < 1 || p.vpp < 1 || p.num_microbatches < 1)
    return InvalidArgument("schedule: plan needs pp, vpp and num_microbatches >= 1");
  return Checker(s, p).Run();
}

}  // namespace dt
