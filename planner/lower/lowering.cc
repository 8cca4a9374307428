#include "planner/lower/lowering.h"

#include <algorithm>
#include <string>

namespace dt {

const std::vector<std::string>& CategoryNames() {
  static const std::vector<std::string> names = {"compute", "recompute", "tp-comm",
                                                 "p2p",     "dp-comm",   "optimizer"};
  return names;
}

namespace {

// Dense (microbatch, chunk) -> task table.
class Table {
 public:
  Table(int m, int chunks) : chunks_(chunks), v_(static_cast<size_t>(m) * chunks, -1) {}
  sim::TaskId& at(int mb, int chunk) { return v_[static_cast<size_t>(mb) * chunks_ + chunk]; }

 private:
  int chunks_;
  std::vector<sim::TaskId> v_;
};

std::string Label(const char* what, int mb, int chunk) {
  return std::string(what) + std::to_string(mb) + "." + std::to_string(chunk);
}

}  // namespace

Lowered LowerSchedule(const std::vector<ActionList>& schedule, const PlanSpec& p,
                      const PlanCosts& costs, bool trace, sim::Engine* e) {
  e->Clear();
  e->EnableTrace(trace);
  const int pp = p.pp, nch = p.num_chunks(), m = p.num_microbatches;
  // A pipeline send's time on its stream: where the receiver copies the
  // message (PlanCosts::receiver_copies) the send only posts it.
  const double send_s = costs.receiver_copies ? 0.0 : costs.p2p;
  size_t actions = 0;
  for (const auto& l : schedule) actions += l.size();
  // Most actions lower to at most 4 tasks (a ZeRO-3 gather, recompute,
  // the computation, its TP collectives); reserving them up front avoids
  // copying the arrays as they grow (the untouched rest costs no memory).
  e->Reserve(actions * 4 + 16, actions * 2 + 16);

  Lowered out;
  std::vector<sim::StreamId> fwd_link(pp), bwd_link(pp);
  for (int s = 0; s < pp; ++s) {
    // The representative rank of the stage (tp = cp = dp = 0) names the
    // trace process; all dp*tp*cp ranks of the stage run the same list.
    std::string proc = "rank " + std::to_string(s * p.tp * p.cp * p.dp) + " (pp stage " +
                       std::to_string(s) + ", stands for " + std::to_string(p.tp * p.cp * p.dp) + " ranks)";
    if (p.order != "tp-cp-dp-pp") proc = "pp stage " + std::to_string(s);
    out.compute.push_back(e->AddStream(proc, "compute"));
    out.dp.push_back(e->AddStream(proc, "dp-comm"));
    fwd_link[s] = e->AddStream(proc, "p2p-fwd");
    bwd_link[s] = e->AddStream(proc, "p2p-bwd");
  }
  out.optimizer.assign(pp, -1);
  out.dp_end.assign(pp, -1);
  out.waits.resize(pp);
  for (auto& w : out.waits) w.reserve(2 * static_cast<size_t>(m) * (nch / pp) + 2);  // per stage: a wait per receive

  Table fwd_first(m, nch), bwd_first(m, nch), fwd_last(m, nch), bwd_last(m, nch);
  Table act_xfer(m, nch), grad_xfer(m, nch);
  // The last backward microbatch of each chunk: its backward is split into
  // DP buckets so gradient reduction overlaps the rest of that backward.
  std::vector<int> last_bwd(nch, -1);
  for (const auto& list : schedule)
    for (const Action& a : list)
      if (a.kind == ActionKind::kBackward) last_bwd[a.chunk] = a.microbatch;

  const bool names = trace;
  auto nm = [&](const char* what, int mb, int ch) { return names ? Label(what, mb, ch) : std::string(); };
  for (int s = 0; s < pp; ++s) {
    const sim::StreamId cs = out.compute[s], ds = out.dp[s];
    std::vector<sim::TaskId> grad_tasks;  // this stage's gradient reductions
    sim::TaskId stage_last_bwd = -1;      // the stage's latest backward so far
    std::vector<std::vector<sim::TaskId>> pieces(nch);  // bucket pieces of the last backward
    // Combined 1F1B (PlanSpec::moe_a2a_overlap): a forward whose next
    // compute action is a backward (of another microbatch: the schedule runs
    // one more warmup forward) runs with it layer by layer; the pair's EP
    // all-to-alls cost PairedEpExposed instead of both in full.
    const ActionList& list = schedule[s];
    std::vector<int> pair_fwd_chunk(list.size(), -1);  // at a paired backward: its forward's chunk
    std::vector<bool> fwd_paired(list.size(), false);  // at a paired forward
    if (p.moe_a2a_overlap) {
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].kind != ActionKind::kForward) continue;
        size_t j = i + 1;
        while (j < list.size() && list[j].kind != ActionKind::kForward && list[j].kind != ActionKind::kBackward) ++j;
        if (j < list.size() && list[j].kind == ActionKind::kBackward && list[j].microbatch != list[i].microbatch) {
          pair_fwd_chunk[j] = list[i].chunk;
          fwd_paired[i] = true;
        }
      }
    }
    for (size_t ai = 0; ai < list.size(); ++ai) {
      const Action& a = list[ai];
      const int mb = a.microbatch, ch = a.chunk;
      switch (a.kind) {
        case ActionKind::kForward: {
          const ChunkCost& k = costs.chunks[ch];
          // ZeRO-3: the runtime gathers each unit right before its use and
          // waits for it (blocking): the gathers sit on the compute stream.
          sim::TaskId first = -1;
          // dtrun on CPU: the activation is copied in by this rank's core.
          if (costs.receiver_copies && ch > 0) first = e->AddTask(cs, costs.p2p, kCatP2p, nm("recvA", mb, ch));
          if (k.zero3_gather > 0) {
            const sim::TaskId g = e->AddTask(cs, k.zero3_gather, kCatDpComm, nm("AG", mb, ch));
            if (first < 0) first = g;
          }
          sim::TaskId t = e->AddTask(cs, k.fwd_compute, kCatCompute, nm("F", mb, ch));
          fwd_first.at(mb, ch) = first >= 0 ? first : t;
          // A paired forward's all-to-alls are priced with its backward.
          const double comm = fwd_paired[ai] ? k.fwd_comm - k.ep_fwd : k.fwd_comm;
          if (comm > 0) t = e->AddTask(cs, comm, kCatTpComm, nm("tpF", mb, ch));
          fwd_last.at(mb, ch) = t;
          break;
        }
        case ActionKind::kBackward: {
          const ChunkCost& k = costs.chunks[ch];
          sim::TaskId first = -1, t = -1;
          // dtrun on CPU: the gradient is copied in by this rank's core.
          if (costs.receiver_copies && ch + 1 < nch) t = first = e->AddTask(cs, costs.p2p, kCatP2p, nm("recvG", mb, ch));
          // ZeRO-3 gathers (blocking, as in the forward), then recompute
          // (counted apart from the backward proper).
          if (k.zero3_gather > 0) {
            t = e->AddTask(cs, k.zero3_gather, kCatDpComm, nm("AG", mb, ch));
            if (first < 0) first = t;
          }
          if (k.recompute > 0) {
            t = e->AddTask(cs, k.recompute, kCatRecompute, nm("R", mb, ch));
            if (first < 0) first = t;
          }
          const double rest = std::max(0.0, k.bwd_compute - k.recompute);
          const bool split = (mb == last_bwd[ch]);
          const int nb = split ? costs.num_buckets_last : 1;
          double bwd_comm = k.bwd_comm;
          if (pair_fwd_chunk[ai] >= 0) {  // combined 1F1B: the pair's exposed all-to-alls
            bwd_comm -= k.ep_bwd;
            const double ep = PairedEpExposed(costs, pair_fwd_chunk[ai], ch);
            if (ep > 0) {
              t = e->AddTask(cs, ep, kCatTpComm, nm("EP", mb, ch));
              if (first < 0) first = t;
            }
          }
          for (int i = 0; i < nb; ++i) {
            t = e->AddTask(cs, rest / nb, kCatCompute, nm("B", mb, ch));
            if (first < 0) first = t;
            if (bwd_comm > 0) t = e->AddTask(cs, bwd_comm / nb, kCatTpComm, nm("tpB", mb, ch));
            if (split) pieces[ch].push_back(t);
          }
          // ZeRO-2/3: each unit's gradient is reduce-scattered right after its
          // backward, blocking (the runtime's ShardedParams::ReduceGrads).
          if (k.grad_sync_per_microbatch > 0)
            t = e->AddTask(cs, k.grad_sync_per_microbatch, kCatDpComm, nm("RS", mb, ch));
          bwd_first.at(mb, ch) = first;
          bwd_last.at(mb, ch) = t;
          stage_last_bwd = t;
          break;
        }
        case ActionKind::kSendAct: {
          // A blocking send occupies the sender's compute stream (PlanCosts::blocking_sends).
          sim::TaskId x = e->AddTask(costs.blocking_sends ? cs : fwd_link[s], send_s, kCatP2p, nm("act", mb, ch));
          e->AddDep(fwd_last.at(mb, ch), x);
          act_xfer.at(mb, ch) = x;
          break;
        }
        case ActionKind::kSendGrad: {
          sim::TaskId x = e->AddTask(costs.blocking_sends ? cs : bwd_link[s], send_s, kCatP2p, nm("grad", mb, ch));
          e->AddDep(bwd_last.at(mb, ch), x);
          grad_xfer.at(mb, ch) = x;
          break;
        }
        case ActionKind::kRecvAct:
        case ActionKind::kRecvGrad:
          break;  // dependencies are added once every sender exists (below)
        case ActionKind::kGradSync: {
          const ChunkCost& k = costs.chunks[ch];
          if (k.grad_sync <= 0) break;
          const auto& pc = pieces[ch];
          const int nb = std::max<int>(1, static_cast<int>(pc.size()));
          for (int i = 0; i < nb; ++i) {
            sim::TaskId g = e->AddTask(ds, k.grad_sync / nb, kCatDpComm, names ? "GS" + std::to_string(ch) : std::string());
            if (!pc.empty()) e->AddDep(pc[i], g);
            // Not overlapped (PlanSpec::overlap_grad_reduce): the schedule puts
            // every GradSync after the stage's last backward; wait for it.
            if (!p.overlap_grad_reduce && stage_last_bwd >= 0) e->AddDep(stage_last_bwd, g);
            grad_tasks.push_back(g);
          }
          break;
        }
        case ActionKind::kOptimizerStep: {
          sim::TaskId o = e->AddTask(cs, costs.optimizer[s], kCatOptimizer, names ? "OPT" : "");
          for (sim::TaskId g : grad_tasks) e->AddDep(g, o);
          out.waits[s].push_back({o, grad_tasks.empty() ? -1 : grad_tasks.back(), false});
          out.optimizer[s] = o;
          break;
        }
        case ActionKind::kParamSync: {
          const ChunkCost& k = costs.chunks[ch];
          if (k.param_sync <= 0) break;
          sim::TaskId g = e->AddTask(ds, k.param_sync, kCatDpComm, names ? "PS" + std::to_string(ch) : std::string());
          if (out.optimizer[s] >= 0) e->AddDep(out.optimizer[s], g);
          out.dp_end[s] = g;
          break;
        }
      }
    }
  }
  // Cross-stage dependencies: receives wait for the matching send.
  for (int mb = 0; mb < m; ++mb) {
    for (int ch = 0; ch < nch; ++ch) {
      if (ch > 0 && act_xfer.at(mb, ch - 1) >= 0 && fwd_first.at(mb, ch) >= 0) {
        e->AddDep(act_xfer.at(mb, ch - 1), fwd_first.at(mb, ch));
        out.waits[ch % pp].push_back({fwd_first.at(mb, ch), act_xfer.at(mb, ch - 1), true});
      }
      if (ch + 1 < nch && grad_xfer.at(mb, ch + 1) >= 0 && bwd_first.at(mb, ch) >= 0) {
        e->AddDep(grad_xfer.at(mb, ch + 1), bwd_first.at(mb, ch));
        out.waits[ch % pp].push_back({bwd_first.at(mb, ch), grad_xfer.at(mb, ch + 1), true});
      }
    }
  }
  return out;
}

TimeBreakdown ReadBreakdown(const Lowered& l, const sim::Engine& e) {
  const int pp = static_cast<int>(l.compute.size());
  // The critical stage: the one with the most work on its compute stream.
  int crit = 0;
  for (int s = 1; s < pp; ++s)
    if (e.BusyTime(l.compute[s]) > e.BusyTime(l.compute[crit]) + 1e-15) crit = s;
  const sim::StreamId cs = l.compute[crit];
  TimeBreakdown b;
  b.compute = e.BusyTime(cs, kCatCompute) + e.BusyTime(cs, kCatRecompute);
  b.tp_exposed = e.BusyTime(cs, kCatTpComm);
  b.optimizer = e.BusyTime(cs, kCatOptimizer);
  b.dp_exposed = e.BusyTime(cs, kCatDpComm);  // blocking ZeRO-2/3 collectives
  b.pp_exposed = e.BusyTime(cs, kCatP2p);     // blocking pipeline sends
  // Idle gaps on the compute stream that a transfer or a sync explains.
  for (const auto& w : l.waits[crit]) {
    if (w.dep < 0) continue;
    double gap = e.start(w.task) - e.end(w.dep);
    if (gap > 1e-12) continue;  // the dependency was not the binding one
    // Time the task waited after the stream became free.
    double prev_end = 0;
    // The stream predecessor's end bounds the wait from below.
    for (sim::TaskId t = w.task - 1; t >= 0; --t) {
      if (e.stream_of(t) == cs) { prev_end = e.end(t); break; }
    }
    double wait = std::max(0.0, e.start(w.task) - prev_end);
    double charged = std::min(wait, e.duration(w.dep));
    if (w.is_p2p) b.pp_exposed += charged;
    else b.dp_exposed += charged;
  }
  // DP work after the optimizer (ZeRO parameter all-gather) is exposed; the
  // rest of the tail (other stages still finishing) is pipeline skew.
  const double opt_end = l.optimizer[crit] >= 0 ? e.end(l.optimizer[crit]) : 0;
  b.dp_exposed += std::max(0.0, l.dp_end[crit] >= 0 ? e.end(l.dp_end[crit]) - opt_end : 0.0);
  const double accounted = b.compute + b.tp_exposed + b.optimizer + b.pp_exposed + b.dp_exposed;
  b.bubble = std::max(0.0, e.makespan() - accounted);
  return b;
}

}  // namespace dt
