#include "planner/lower/plan_costs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/outside_profile.h"
#include "planner/lower/group_topology.h"
#include "planner/lower/memory_params_for.h"
#include "planner/lower/tp_overlap.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/param_count.h"
#include "planner/memory/zero_units.h"

namespace dt {
namespace {

struct OpListCost {
  double compute = 0;  // kernels
  double comm = 0;     // exposed TP/CP collectives
  // A layer's list in its steady state without a synchronisation: how much
  // its launches exceed its device work (counted in compute) or fall short
  // of it. ShareHostLead pools them over a layer's lists.
  double host_excess = 0, host_slack = 0;
  double host_wait = 0;  // of compute: the device waiting for launches
};

// One host runs a layer's forward, recompute and backward: the lead it
// builds in a list whose device work exceeds its launches carries into the
// next, so the layer's unsynchronised lists are host-bound only by what
// their launches exceed their device work together. What remains is
// shared among the host-bound lists in proportion to their excess. (An
// approximation: it takes the host's lead as unbounded, where CUDA's
// launch queue holds about a thousand kernels, a few layers' worth.)
void ShareHostLead(std::initializer_list<OpListCost*> lists) {
  double excess = 0, slack = 0;
  for (const OpListCost* l : lists) {
    excess += l->host_excess;
    slack += l->host_slack;
  }
  if (excess <= 0) return;
  const double kept = std::max(0.0, excess - slack) / excess;
  for (OpListCost* l : lists) {
    if (l->host_excess > 0) {
      l->compute -= l->host_excess * (1.0 - kept);
      l->host_excess *= kept;
      l->host_wait = l->host_excess;
    }
    l->host_slack = 0;
  }
}

// The SMs an MoE all-to-all's kernels occupy while they run: 20 of an
// H800's 132 in DeepSeek-V3's training (DeepSeek-V3 technical report,
// Sec. 3.2.2) and DeepEP's default (deep_ep/buffer.py, Buffer.num_sms = 20);
// NCCL's all-to-all is taken at the same share (an estimate), and so are
// the NCCL collectives of an MoE block overlapped with its shared experts.
constexpr double kAllToAllSmShare = 20.0 / 132.0;

// Prices an op list. TP collectives block the compute stream (Megatron
// issues them synchronously); CP ring exchanges overlap the attention core
// they feed, so only their excess over attention compute is exposed.
// The host launches the list's ops in order, compute.host_overhead_s each,
// and the device runs them as they arrive (kernel launches are
// asynchronous): op i starts at max(its launch, the end of op i - 1). So a
// list of large kernels hides the launches of its small ones, and a list of
// small kernels runs at the host's pace. The list starts with host and
// device in step (a pessimistic start: the host may in fact run ahead from
// the list before). Time the device waits for launches counts as compute.
// The ops of an overlap window (Op::overlap_window: the routed path on the
// compute stream, the shared experts on a side stream) take, together, the
// longest of four bounds: each stream's ops in sequence, the collectives
// one after another (they share the links), and the kernels one after
// another with the SMs the collectives hold meanwhile (kAllToAllSmShare):
// the best two streams can do when neither waits for the other inside the
// window. What exceeds the window's kernels counts as communication.
// An eager MoE block (GPU plans on a profile with compute.moe_host) adds
// its measured host time to the launch clock, op by op (Op::moe_host_share),
// and its dispatcher's synchronisation (Op::host_sync) stops the host until
// the device has run everything launched so far: after it the device waits
// for each launch until the host is ahead again. `per_layer`: the list is
// one layer's, run back to back for every layer of a chunk; on a profile
// whose host runs ahead (compute.host_runs_ahead), and for one with an MoE
// block, it is priced in that steady state instead of from a start in
// step: without a synchronisation its period is the longer of its device
// work and its launches (OpListCost::host_excess / host_slack then let
// ShareHostLead pool a layer's lists), with one it is a second pass, which
// starts where the first left host and device.
OpListCost Price(const std::vector<Op>& ops, const PlanSpec& p, const ClusterSpec& c,
                 const HardwareProfile& hw, bool* outside, bool per_layer = false) {
  OpListCost r;
  double attention = 0, cp_comm = 0;
  const double launch = hw.compute.host_overhead_s;
  const MoeHostProfile& mh = hw.compute.moe_host;
  const bool moe_host = mh.available() && hw.device.kind != "cpu";
  // The host time of launching one op: compute.host_overhead_s, except for
  // what a measured host time covers otherwise: an eager MoE block's ops
  // (compute.moe_host, measured for the block as a whole) and the FP8
  // scaling kernels Transformer Engine launches inside the GEMM's own module
  // call (their device time is priced; no framework call of their own).
  auto launch_of = [&](const Op& op) {
    if (moe_host && op.moe_host != Op::MoeHostPart::kNone) return 0.0;
    if (op.fp8_scaling) return 0.0;
    return launch;
  };
  double host = 0, device = 0;  // the launch clock and the device clock
  double waited = 0;            // the device idle for launches
  auto run = [&](double t, double l) {
    host += l;
    waited += std::max(0.0, host - device);
    device = std::max(host, device) + t;
  };
  auto moe_host_time = [&](const Op& op) {
    switch (op.moe_host) {
      case Op::MoeHostPart::kRouter: return p.moe_router_cuda_graph ? 0.0 : op.moe_host_share * mh.router_s;
      case Op::MoeHostPart::kDispatch: return op.moe_host_share * mh.dispatch_s;
      case Op::MoeHostPart::kBackward: return op.moe_host_share * mh.backward_s;
      case Op::MoeHostPart::kNone: break;
    }
    return 0.0;
  };
  bool moe_ops = false;  // a layer's list holds an MoE block's ops (only asked for per_layer)
  if (moe_host && per_layer && !hw.compute.host_runs_ahead)
    for (const Op& op : ops) moe_ops |= op.moe_host != Op::MoeHostPart::kNone;
  bool sync_pending = false;  // a synchronising op inside the open overlap window
  // Collectives' in-line times, kept op by op only where the TP overlap
  // needs them (no allocation on the search's common path).
  std::vector<double> comm;
  if (p.tp_comm_overlap) comm.assign(ops.size(), 0.0);
  struct Window {
    int id = 0;
    double launches = 0;                            // the window's host time
    double kernels[2] = {0, 0}, colls[2] = {0, 0};  // [compute stream, side stream]
  } w;
  auto close_window = [&] {
    if (w.id != 0) {
      const double k = w.kernels[0] + w.kernels[1], c = w.colls[0] + w.colls[1];
      const double t = std::max({w.kernels[0] + w.colls[0], w.kernels[1] + w.colls[1], c, k + kAllToAllSmShare * c});
      host += w.launches;
      waited += std::max(0.0, host - device);
      device = std::max(host, device) + t;
      r.comm += t - k;
      w = Window{};
    }
    if (sync_pending) host = std::max(host, device);
    sync_pending = false;
  };
  auto run_list = [&] {
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.overlap_window != w.id) close_window();
      if (moe_host) host += moe_host_time(op);
      const bool sync = moe_host && op.host_sync;
      // A collective's placement and in-line time, once.
      const bool coll = op.kind == OpKind::kCollective;
      const GroupTopology g = coll ? TopologyOf(p, op.group, c.gpus_per_node) : GroupTopology{};
      if (outside != nullptr)  // null: the caller does not report it (lower bounds)
        *outside |= OpOutsideProfile(op, g.per_node, g.spans_nodes, hw);
      const double coll_t = coll ? OpCollectiveTime(op, g.per_node, g.spans_nodes, hw) : 0.0;
      if (op.overlap_window != 0) {
        const double t = coll ? coll_t : OpDeviceTime(op, hw);
        sync_pending |= sync;
        if (t <= 0) continue;
        w.id = op.overlap_window;
        w.launches += launch_of(op);
        (op.kind == OpKind::kCollective ? w.colls : w.kernels)[op.side_stream ? 1 : 0] += t;
        continue;
      }
      if (op.kind != OpKind::kCollective) {
        const double t = OpDeviceTime(op, hw);
        if (t > 0) run(t, launch_of(op));
        if (sync) host = std::max(host, device);
        if (t > 0 && op.kind == OpKind::kAttention) attention += t;
        continue;
      }
      const double t = coll_t;
      if (t <= 0) {
        if (sync) host = std::max(host, device);
        continue;
      }
      // Collectives off the compute stream's clock (under their GEMMs, or
      // under the attention core for CP) still take their launch.
      if (p.tp_comm_overlap) {
        host += launch_of(op);
        comm[i] = t;
      } else if (op.group == GroupKind::kCp) {
        host += launch_of(op);
        cp_comm += t;
      } else {
        run(t, launch_of(op));
        r.comm += t;
      }
      if (sync) host = std::max(host, device);
    }
    close_window();
  };
  // Communication off the compute stream's clock that still stalls it: the
  // TP collectives' excess over the GEMMs they run under (--tp-comm-overlap,
  // tp_overlap.h) and the CP exchanges' excess over the attention core.
  auto off_clock_comm = [&] {
    double x = 0;
    if (p.tp_comm_overlap) {
      ChargeOverlappedTpComm(ops, p.tp, hw, &comm);
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].kind != OpKind::kCollective) continue;
        if (ops[i].group == GroupKind::kCp) cp_comm += comm[i];
        else x += comm[i];
      }
    }
    return x + std::max(0.0, cp_comm - attention);
  };
  const bool steady = per_layer && (moe_ops || hw.compute.host_runs_ahead);
  bool syncs = false;  // the list synchronises the host with the device
  if (steady && moe_host)
    for (const Op& op : ops) syncs |= op.host_sync;
  if (steady && !syncs) {
    // Nothing stops the host, so layer after layer its lead grows by what a
    // layer's device work exceeds its launches: the steady period is the
    // longer of the two (device-bound or host-bound), priced by one pass
    // with the host far ahead (the device never waits) that also sums the
    // launches.
    constexpr double kFarAhead = 1e3;  // seconds; far beyond any layer's launches
    host = -kFarAhead;
    run_list();
    const double launches = host + kFarAhead;
    const double busy = device + off_clock_comm();
    r.comm += busy - device;
    r.compute = std::max(busy, launches) - r.comm;
    r.host_excess = std::max(0.0, launches - busy);
    r.host_slack = std::max(0.0, busy - launches);
    r.host_wait = r.host_excess;
    return r;
  }
  run_list();
  double pass_start = 0;  // the device clock where the priced pass starts
  if (steady) {  // with a synchronisation: the next layer's pass, from where this one left host and device
    pass_start = device;
    r = OpListCost{};
    attention = cp_comm = 0;
    waited = 0;
    if (p.tp_comm_overlap) comm.assign(ops.size(), 0.0);
    run_list();
  }
  r.compute = device - pass_start - r.comm;
  r.host_wait = waited;
  r.comm += off_clock_comm();
  return r;
}

// One layer's forward, backward and recompute, each at its steady state
// (per_layer), sharing one host lead (ShareHostLead).
struct LayerCost {
  OpListCost f, b, r;
};
LayerCost PriceLayer(const LayerOps& l, const PlanSpec& p, const ClusterSpec& c, const HardwareProfile& hw,
                     bool* outside) {
  LayerCost x{Price(l.forward, p, c, hw, outside, /*per_layer=*/true),
              Price(l.backward, p, c, hw, outside, /*per_layer=*/true),
              Price(l.recompute, p, c, hw, outside, /*per_layer=*/true)};
  ShareHostLead({&x.f, &x.b, &x.r});
  return x;
}

// Combined 1F1B costs of one MoE layer (see EpOverlapCost): its forward
// and backward op lists split at their two EP all-to-alls, each part priced
// as the compute stream runs it.
EpOverlapCost EpOverlapOfLayer(const LayerOps& layer, const PlanSpec& p, const ClusterSpec& c,
                               const HardwareProfile& hw, bool* outside) {
  struct Split {
    std::vector<double> stream;  // the parts between the all-to-alls
    std::vector<double> wgrad;   // of which the routed experts' weight gradients
    std::vector<double> ep;      // the all-to-alls
  };
  auto is_expert_wgrad = [](const Op& op) {
    return std::strcmp(op.name, "expert_fc1_wgrad") == 0 || std::strcmp(op.name, "expert_fc2_wgrad") == 0;
  };
  auto split = [&](const std::vector<Op>& ops) {
    Split s;
    std::vector<Op> part, wgrad;
    auto close = [&] {
      const OpListCost k = Price(part, p, c, hw, outside);
      s.stream.push_back(k.compute + k.comm);
      const OpListCost w = Price(wgrad, p, c, hw, outside);
      s.wgrad.push_back(w.compute);
      part.clear();
      wgrad.clear();
    };
    for (const Op& op : ops) {
      if (op.kind == OpKind::kCollective && op.group == GroupKind::kEp) {
        close();
        const GroupTopology g = TopologyOf(p, op.group, c.gpus_per_node);
        double t = OpCollectiveTime(op, g.per_node, g.spans_nodes, hw);
        if (t > 0) t = std::max(t, hw.compute.host_overhead_s);
        s.ep.push_back(t);
      } else {
        part.push_back(op);
        if (is_expert_wgrad(op)) wgrad.push_back(op);
      }
    }
    close();
    return s;
  };
  EpOverlapCost r;
  const Split f = split(layer.forward), b = split(layer.backward);
  if (f.ep.size() != 2 || b.ep.size() != 2) return r;  // no EP block (ep 1)
  r.fwd_layer = f.ep[0] + f.ep[1];
  r.bwd_layer = b.ep[0] + b.ep[1];
  // Forward: attention | dispatch | experts | combine | rest. Backward (in
  // reverse): rest | combine | experts | dispatch | attention. While an
  // all-to-all runs, its kernels hold kAllToAllSmShare of the SMs, so the
  // compute beside it runs that much slower: compute w beside an
  // all-to-all of c takes max(c, w + share * c).
  auto slot = [](double w, double c) { return std::max(c, w + kAllToAllSmShare * c); };
  // The middle of the pair: the forward's dispatch a beside the backward's
  // experts, then the forward's experts x beside the backward's dispatch b.
  const double a = f.ep[0], b_disp = b.ep[1], x = f.stream[1], experts_bwd = b.stream[1];
  double paired = slot(f.stream[0], b.ep[0]) + slot(experts_bwd, a) + slot(x, b_disp) + slot(b.stream[2], f.ep[1]) +
                  f.stream[2] + b.stream[0];
  if (p.delay_wgrad_compute) {
    // --delay-wgrad-compute: the backward's expert weight gradients w run
    // after its data gradients d, so its dispatch starts once d and the
    // forward's dispatch are done, and w runs beside the two all-to-alls,
    // before the forward's experts (Megatron-LM's combined 1F1B layer
    // schedule): the longest of the all-to-alls back to back, the
    // backward's dispatch after d, the compute stream with the SMs the
    // all-to-alls hold, and the forward's experts after its dispatch and w.
    const double w = b.wgrad[1], d = std::max(0.0, experts_bwd - w);
    const double middle = std::max({a + b_disp, std::max(a, d) + b_disp, d + w + x + kAllToAllSmShare * (a + b_disp),
                                    std::max(d + w, a) + x});
    paired = slot(f.stream[0], b.ep[0]) + middle + slot(b.stream[2], f.ep[1]) + f.stream[2] + b.stream[0];
  }
  double streams = 0;
  for (double v : f.stream) streams += v;
  for (double v : b.stream) streams += v;
  r.pair_exposed_layer = std::max(0.0, paired - streams);
  return r;
}

}  // namespace

double PairedEpExposed(const PlanCosts& c, int fwd_chunk, int bwd_chunk) {
  const int lf = c.chunks[fwd_chunk].moe_layers, lb = c.chunks[bwd_chunk].moe_layers;
  const int pairs = std::min(lf, lb);
  const EpOverlapCost& e = c.ep_overlap;
  return pairs * e.pair_exposed_layer + (lf - pairs) * e.fwd_layer + (lb - pairs) * e.bwd_layer;
}

namespace {
// The CPU runtime's bf16 storage (runtime/model/bf16_params.h,
// stash_precision.h) streams memory a GPU framework does not: every use of
// a unit (embedding, layer, head) widens its bf16 values into an fp32 copy
// (2 B read + 4 B written per parameter); its backward also zero-fills an
// fp32 gradient buffer (4 B) and adds it into the bf16 gradients (4 B read,
// 2 B read and written), unless the plan keeps fp32 main gradients
// (grad_bytes 4: the backward adds into them itself). Under ZeRO-2/3 the
// fp32 gradient buffer is the sharding's own (priced as in fp32); bf16
// gradients add its narrowing in place before the bf16 reduce-scatter (4 B
// read, 2 B written; runtime/model/sharded_params.h). A layer's stash is
// narrowed after its forward and widened before its backward (6 B per
// element each way). Full recompute repeats the layer's widening and stash
// conversions. Times per microbatch for chunk `ch`.
// A profile that timed the runtime's conversions (compute.bf16
// narrow_s_per_element / widen_s_per_element, seconds per element against
// elements per call on one buffer) prices each pass at its measured rate for
// the data the pass converts: where that fits in the caches (the stash of a
// small model), the conversions run from them, several times faster than the
// memory-bound rate (on a Zen 5 VM 70-200 GB/s for buffers up to 4 MB
// against 12 GB/s priced before, which priced gpt-tiny's bf16 steps 25-50%
// slow). Which size decides: a layer's stash for its narrowing (just
// written by the layer's forward), the chunk's whole stash for its widening
// and the chunk's parameters for theirs (what was touched since); each
// unit's gradient accumulation at the unit's size. Without those curves,
// memory-bound ops at the bytes above.
struct Bf16StorageCost {
  double fwd = 0, bwd = 0, recompute = 0;
};

// Seconds per element of a conversion pass over `working_set` elements.
double ConvertSecondsPerElement(const Curve& c, double working_set) {
  return Interpolate(c, std::max(1.0, working_set), Scale::kLog, Scale::kLog).value;
}

Bf16StorageCost MeasuredBf16StorageCost(const ModelSpec& m, const PlanSpec& p, int ch, const HardwareProfile& hw,
                                        int grad_bytes) {
  const Bf16InputsCompute& b = hw.compute.bf16;
  auto narrow = [&](double n) { return ConvertSecondsPerElement(b.narrow_s_per_element, n); };
  auto widen = [&](double n) { return ConvertSecondsPerElement(b.widen_s_per_element, n); };
  const ChunkUnits cu = ZeroChunkUnits(m, p, ch);
  double uses = 0, params = 0;
  for (int64_t u : cu.uses) uses += static_cast<double>(u);
  for (int64_t u : cu.units) params += static_cast<double>(u);
  const double layers = p.layers_per_chunk[ch];
  const double recomputed = p.RecomputedLayers(ch);
  const double stash = StoredBytesPerLayer(m, p, 2, layers > 0 ? recomputed / layers : 1.0) / 2.0 * layers;
  const double layer_stash = layers > 0 ? stash / layers : stash;
  Bf16StorageCost c;
  c.fwd = uses * widen(params) + stash * narrow(layer_stash);
  if (p.recompute == Recompute::kFull && recomputed > 0) {
    const double act = ActivationBytesPerLayerFor(m, p, 2, Recompute::kNone) / 2.0;
    c.recompute = recomputed * (static_cast<double>(cu.layer) * widen(params) + act * (narrow(act) + widen(act)));
  }
  const bool sharded = p.zero_stage >= 2 && p.dp * p.cp > 1;
  const double unit = static_cast<double>(std::max<int64_t>(cu.layer, 1));
  double grads = 0;
  if (grad_bytes == 4) grads = 0;                         // the backward adds into fp32 main gradients
  else if (sharded) grads = uses * narrow(unit);           // in-place narrowing before the reduce-scatter
  else grads = OpTime(MemoryOp("bf16_grad_buffer_zero_fill", 4.0 * uses), hw) + uses * (narrow(unit) + widen(unit));
  c.bwd = uses * widen(params) + grads + stash * widen(stash) + c.recompute;
  return c;
}
Bf16StorageCost CpuBf16StorageCost(const ModelSpec& m, const PlanSpec& p, int ch, const HardwareProfile& hw,
                                   int grad_bytes) {
  if (hw.compute.bf16.has_conversions()) return MeasuredBf16StorageCost(m, p, ch, hw, grad_bytes);
  const ChunkUnits cu = ZeroChunkUnits(m, p, ch);
  double uses = 0;
  for (int64_t u : cu.uses) uses += static_cast<double>(u);
  const double layers = p.layers_per_chunk[ch];
  const double recomputed = p.RecomputedLayers(ch);  // full recompute: all, or the first N
  const double stash = StoredBytesPerLayer(m, p, 2, layers > 0 ? recomputed / layers : 1.0) / 2.0 * layers;  // stored elements
  Bf16StorageCost c;
  c.fwd = OpTime(MemoryOp("bf16_widen_units_narrow_stash", 6.0 * uses + 6.0 * stash), hw);
  double rc_bytes = 0;
  if (p.recompute == Recompute::kFull)
    rc_bytes = 6.0 * static_cast<double>(cu.layer) * recomputed +
               12.0 * ActivationBytesPerLayerFor(m, p, 2, Recompute::kNone) / 2.0 * recomputed;
  c.recompute = rc_bytes > 0 ? OpTime(MemoryOp("bf16_recompute_widen_and_stash", rc_bytes), hw) : 0.0;
  const bool sharded = p.zero_stage >= 2 && p.dp * p.cp > 1;
  const double grad_buffer = grad_bytes == 4 ? 0.0 : sharded ? 6.0 : 12.0;  // bytes per parameter use
  c.bwd = OpTime(MemoryOp("bf16_widen_units_grad_buffers_widen_stash", (6.0 + grad_buffer) * uses + 6.0 * stash), hw) +
          c.recompute;
  return c;
}

// Which runtime executes the plan, decided once from the device kind: GPU
// plans run in a framework (Megatron-LM's attention kernels, the gradient
// reduction in buckets under the last backward), CPU plans in dtrun (its
// own kernels, each chunk's reduction at its GradSync action after the
// chunk's last backward, runtime/exec/interpreter.cc).
enum class Executor { kFramework, kDtrun };
Executor ExecutorOf(const HardwareProfile& hw) { return hw.device.kind == "cpu" ? Executor::kDtrun : Executor::kFramework; }
}  // namespace

bool BlockingSends(const PlanSpec& p, const HardwareProfile& hw) {
  if (ExecutorOf(hw) == Executor::kDtrun) return false;
  return p.schedule != Schedule::kInterleaved || !p.overlap_p2p_comm;
}

void MakeCommunicationFree(PlanCosts* costs) {
  costs->p2p = 0;
  for (auto& k : costs->chunks) {
    k.fwd_comm = k.bwd_comm = k.grad_sync = k.grad_sync_per_microbatch = 0;
    k.param_sync = k.zero3_gather = 0;
  }
}

PlanCosts ComputePlanCosts(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                           const HardwareProfile& hw, bool track_outside) {
  const int e = hw.device.bytes_per_element();
  const MemoryParams mp = MemoryParamsFor(hw, p);
  const Executor executor = ExecutorOf(hw);
  PlanCosts pc;
  bool* const outside = track_outside ? &pc.outside_profile : nullptr;
  const AttentionKernels kernels =
      executor == Executor::kFramework ? AttentionKernels::kMegatron : AttentionKernels::kRuntime;
  LayerOps layer = TransformerLayerOps(m, p, e, /*windowed=*/false, kernels);
  LayerCost full = PriceLayer(layer, p, c, hw, outside);
  OpListCost &lf = full.f, &lb = full.b, &lr = full.r;
  // Sliding-window layers (ModelSpec::WindowedLayer) differ only in the
  // attention core: what one costs more (less) than a full layer.
  const bool windows = m.WindowApplies(p.seq_length);
  const LayerOps wl = windows ? TransformerLayerOps(m, p, e, /*windowed=*/true, kernels) : LayerOps{};
  OpListCost wf, wb, wr;
  if (windows) {
    auto diff = [](OpListCost a, const OpListCost& b) {
      a.compute -= b.compute;
      a.comm -= b.comm;
      a.host_wait -= b.host_wait;
      return a;
    };
    const LayerCost w = PriceLayer(wl, p, c, hw, outside);
    wf = diff(w.f, lf);
    wb = diff(w.b, lb);
    wr = diff(w.r, lr);
  }
  if (m.moe() && p.ep > 1 && p.moe_a2a_overlap) {
    pc.ep_overlap = EpOverlapOfLayer(layer, p, c, hw, outside);
    if (windows) {
      // Windowed MoE layers hide less behind their shorter attention: the
      // per-layer exposure is the mean over the model's layers (a chunk
      // with an uneven share of windowed layers is off by that difference).
      const EpOverlapCost w = EpOverlapOfLayer(wl, p, c, hw, outside);
      const double share = static_cast<double>(m.WindowedLayers(0, m.num_layers)) / m.num_layers;
      pc.ep_overlap.pair_exposed_layer += share * (w.pair_exposed_layer - pc.ep_overlap.pair_exposed_layer);
    }
  }
  // MoE models with dense leading layers (DeepSeek's first_k_dense_replace):
  // those layers priced as the dense model of the same attention.
  const ModelSpec dense_model = DenseLayerModel(m);
  const LayerOps dl = m.has_dense_layers() ? TransformerLayerOps(dense_model, p, e, /*windowed=*/false, kernels)
                                            : LayerOps{};
  LayerCost dense = m.has_dense_layers() ? PriceLayer(dl, p, c, hw, outside) : LayerCost{};
  OpListCost &df = dense.f, &db = dense.b, &dr = dense.r;
  LayerOps emb = EmbeddingOps(m, p, e), head = HeadOps(m, p, e);
  OpListCost ef = Price(emb.forward, p, c, hw, outside),
             eb = Price(emb.backward, p, c, hw, outside);
  OpListCost hf = Price(head.forward, p, c, hw, outside),
             hb = Price(head.backward, p, c, hw, outside);
  // Multi-token prediction modules (empty op lists without them): after the
  // head on the last chunk; their layer's recompute runs in its backward.
  const LayerOps mtp = MtpOps(m, p, e, emb, layer, head);
  OpListCost mf = Price(mtp.forward, p, c, hw, outside),
             mb = Price(mtp.backward, p, c, hw, outside),
             mr = Price(mtp.recompute, p, c, hw, outside);
  // A full recompute in situ (compute.recompute_cost_ratio, measured on CPUs
  // by `dtplan profile`; 1 elsewhere): its kernels' time, not its collectives'.
  // Never below its FLOPs at the device's peak (a physical bound).
  if (p.recompute == Recompute::kFull && hw.compute.recompute_cost_ratio != 1.0) {
    const double ratio = hw.compute.recompute_cost_ratio;
    auto scaled = [&](double compute, const std::vector<Op>& ops) {
      return std::max(compute * ratio, hw.device.peak_flops > 0 ? SumFlops(ops) / hw.device.peak_flops : 0.0);
    };
    // wr is a difference (windowed - full layer): the windowed layer's own
    // recompute is scaled and floored, then the difference taken again.
    const double windowed = windows ? scaled(lr.compute + wr.compute, wl.recompute) : 0.0;
    lr.compute = scaled(lr.compute, layer.recompute);
    if (windows) wr.compute = windowed - lr.compute;
    if (m.has_dense_layers())
      dr.compute = scaled(dr.compute, dl.recompute);
    mr.compute = scaled(mr.compute, mtp.recompute);
  }

  // A pipeline whose sends block synchronises the host with the device at
  // every message (Megatron-Core's batched p2p calls torch.cuda.synchronize()
  // after each exchange: ModelParallelConfig.batch_p2p_sync, on by default,
  // applies wherever the p2p overlap is off), so each chunk's forward and
  // backward starts with host and device in step rather than at the layers'
  // steady state. What that costs once per chunk and microbatch: the list
  // the chunk starts with, priced from a start in step, less its steady
  // price. A backward starts with its last layer: with that layer's full
  // recompute when every layer of the chunk is recomputed, else with its
  // backward proper (Megatron's block method recomputes the first layers).
  struct ColdStart {
    double fwd = 0, recompute_first = 0, backward_first = 0;
  } cold, dense_cold;
  if (hw.compute.host_runs_ahead && p.pp > 1 && BlockingSends(p, hw)) {
    auto total = [](const OpListCost& x) { return x.compute + x.comm; };
    auto in_step = [&](const std::vector<Op>& ops, const OpListCost& steady) {
      return std::max(0.0, total(Price(ops, p, c, hw, nullptr)) - total(steady));
    };
    auto starts = [&](const LayerOps& l, const OpListCost& f, const OpListCost& b, const OpListCost& r) {
      ColdStart x;
      x.fwd = in_step(l.forward, f);
      x.backward_first = in_step(l.backward, b);
      x.recompute_first = l.recompute.empty() ? x.backward_first : in_step(l.recompute, r);
      return x;
    };
    cold = starts(layer, lf, lb, lr);
    if (m.has_dense_layers())
      dense_cold = starts(dl, df, db, dr);
  }

  const GroupTopology grad = GradGroupTopology(p, c.gpus_per_node);
  const GroupTopology egrad = ExpertGradGroupTopology(p, c.gpus_per_node);
  const GroupTopology pipe = TopologyOf(p, GroupKind::kPp, c.gpus_per_node);
  const int64_t layer_params = LayerParamsPerRank(m, p);
  const int64_t dense_layer_params = m.has_dense_layers() ? LayerParamsPerRank(dense_model, p) : 0;
  // --fp8-param-gather: the linear weights (not the experts', counted apart)
  // are all-gathered in FP8, 1 byte each instead of weight_bytes.
  const double gather_linear =
      p.fp8_param_gather ? static_cast<double>(LinearWeightParamsPerRank(m, p) - ExpertLayerParamsPerRank(m, p)) : 0.0;
  const double gather_dense_linear = p.fp8_param_gather && m.has_dense_layers()
                                         ? static_cast<double>(LinearWeightParamsPerRank(dense_model, p))
                                         : 0.0;
  const double expert_gather_bytes = p.fp8_param_gather ? 1.0 : mp.weight_bytes;
  auto stage_layer_params = [&](int s) {
    const int dense = DenseLayersOnStage(m, p, s);
    return (p.StageLayers(s) - dense) * layer_params + dense * dense_layer_params;
  };
  // Embedding / head parameters: what a stage holds beyond its layers.
  const int64_t first_extra = StageParamsPerRank(m, p, 0) - stage_layer_params(0);
  const int64_t last_extra = p.pp > 1 ? StageParamsPerRank(m, p, p.pp - 1) - stage_layer_params(p.pp - 1) : 0;

  const int nchunks = p.num_chunks();
  pc.chunks.resize(nchunks);
  for (int ch = 0; ch < nchunks; ++ch) {
    ChunkCost& k = pc.chunks[ch];
    k.layers = p.layers_per_chunk[ch];
    const double D = DenseLayersInChunk(m, p, ch);  // dense-MLP layers (DeepSeek's leading, Llama 4's interleaved)
    const double L = k.layers - D;                  // layers of the model's own kind
    k.fwd_compute = L * lf.compute + D * df.compute;
    k.fwd_comm = L * lf.comm + D * df.comm;
    // Full recompute of only the first recompute_num_layers layers of the
    // chunk (Megatron's block method): that share of each kind's recompute
    // (exact for a chunk of one layer kind; with dense leading or windowed
    // layers, which come first, an approximation).
    const double fr = p.recompute == Recompute::kFull && k.layers > 0
                          ? static_cast<double>(p.RecomputedLayers(ch)) / k.layers : 1.0;
    k.bwd_compute = L * (lb.compute + fr * lr.compute) + D * (db.compute + fr * dr.compute);
    k.bwd_comm = L * (lb.comm + fr * lr.comm) + D * (db.comm + fr * dr.comm);
    k.recompute = fr * (L * lr.compute + D * dr.compute);
    k.host_wait = L * (lf.host_wait + lb.host_wait + fr * lr.host_wait) + D * (df.host_wait + db.host_wait + fr * dr.host_wait);
    if (k.layers > 0) {  // forward from the chunk's first layer (dense ones come first), backward from its last
      const double f = D > 0 ? dense_cold.fwd : cold.fwd;
      const ColdStart& last = D == k.layers ? dense_cold : cold;
      const bool all_recomputed = p.recompute == Recompute::kFull && p.RecomputedLayers(ch) == k.layers;
      const double b = all_recomputed ? last.recompute_first : last.backward_first;
      k.fwd_compute += f;
      k.bwd_compute += b;
      k.host_wait += f + b;  // a start in step: what the device waits for the host
    }
    if (windows) {
      const double W = m.WindowedLayers(p.ChunkFirstLayer(ch), k.layers);
      k.fwd_compute += W * wf.compute;
      k.host_wait += W * (wf.host_wait + wb.host_wait + fr * wr.host_wait);
      k.fwd_comm += W * wf.comm;
      k.bwd_compute += W * (wb.compute + fr * wr.compute);
      k.bwd_comm += W * (wb.comm + fr * wr.comm);
      k.recompute += fr * W * wr.compute;
    }
    if (mp.unit_working_bytes > 0) {  // CPU bf16 storage (memory_params_for.h)
      const Bf16StorageCost b = CpuBf16StorageCost(m, p, ch, hw, mp.grad_bytes);
      k.fwd_compute += b.fwd;
      k.bwd_compute += b.bwd;
      k.recompute += b.recompute;
    }
    k.moe_layers = pc.ep_overlap.fwd_layer > 0 ? static_cast<int>(L) : 0;
    k.ep_fwd = k.moe_layers * pc.ep_overlap.fwd_layer;
    k.ep_bwd = k.moe_layers * pc.ep_overlap.bwd_layer;
    double params = L * layer_params + D * dense_layer_params;
    if (ch == 0) {
      k.fwd_compute += ef.compute; k.fwd_comm += ef.comm;
      k.host_wait += ef.host_wait + eb.host_wait;
      k.bwd_compute += eb.compute; k.bwd_comm += eb.comm;
      params += first_extra;
    }
    if (ch == nchunks - 1) {
      k.fwd_compute += hf.compute; k.fwd_comm += hf.comm;
      k.host_wait += hf.host_wait + hb.host_wait + mf.host_wait + mb.host_wait + mr.host_wait;
      k.bwd_compute += hb.compute; k.bwd_comm += hb.comm;
      k.fwd_compute += mf.compute; k.fwd_comm += mf.comm;
      k.bwd_compute += mb.compute + mr.compute; k.bwd_comm += mb.comm + mr.comm;
      k.recompute += mr.compute;
      params += last_extra;  // includes the MTP modules (MtpParamsPerRank)
    }
    // MoE: the routed experts' gradients are reduced over the expert-data-
    // parallel group (dp*cp/ep), the rest over dp*cp (both before the
    // parameter all-gather of ZeRO-1, in sequence on the DP stream).
    const double mtp_layers = ch == nchunks - 1 ? m.mtp_layers : 0;
    const double expert_params = (L + mtp_layers) * static_cast<double>(ExpertLayerParamsPerRank(m, p));
    params -= expert_params;
    k.grad_bytes = (params + expert_params) * mp.grad_bytes;
    if (expert_params > 0 && egrad.size > 1) {
      auto ecoll = [&](CollKind kind, double bytes) {
        if (track_outside) pc.outside_profile |= CollectiveOutsideProfile(kind, bytes, egrad.size, egrad.per_node, egrad.spans_nodes, hw);
        return CollectiveTime(kind, bytes, egrad.size, egrad.per_node, egrad.spans_nodes, hw);
      };
      if (p.zero_stage == 0) {
        k.grad_sync += ecoll(CollKind::kAllReduce, expert_params * mp.grad_bytes);
      } else {  // distributed optimizer (ZeRO-2/3 with experts: refused by Validate)
        k.grad_sync += ecoll(CollKind::kReduceScatter, expert_params * mp.grad_bytes);
        k.param_sync += ecoll(CollKind::kAllGather, expert_params * expert_gather_bytes);
      }
    }
    const double dense_grad_bytes = params * mp.grad_bytes;
    const double fp8_linear = (L + mtp_layers) * gather_linear + D * gather_dense_linear;
    const double weight_bytes = (params - fp8_linear) * mp.weight_bytes + fp8_linear;
    if (grad.size > 1) {
      auto coll = [&](CollKind kind, double bytes) {
        if (track_outside) pc.outside_profile |= CollectiveOutsideProfile(kind, bytes, grad.size, grad.per_node, grad.spans_nodes, hw);
        return CollectiveTime(kind, bytes, grad.size, grad.per_node, grad.spans_nodes, hw);
      };
      switch (p.zero_stage) {
        case 0: k.grad_sync += coll(CollKind::kAllReduce, dense_grad_bytes); break;
        case 1:
          k.grad_sync += coll(CollKind::kReduceScatter, dense_grad_bytes);
          k.param_sync += coll(CollKind::kAllGather, weight_bytes);
          break;
        default: {
          // ZeRO-2/3 as the runtime runs them (zero_units.h): per microbatch,
          // one blocking reduce-scatter per unit use in backward; ZeRO-3 also
          // one blocking all-gather per unit use in forward and in backward;
          // ZeRO-2 all-gathers every unit once after the optimizer.
          const ChunkUnits cu = ZeroChunkUnits(m, p, ch);
          for (int64_t n : cu.uses) {
            const double padded = static_cast<double>(UnitPadded(n, grad.size));
            k.grad_sync_per_microbatch += coll(CollKind::kReduceScatter, padded * mp.grad_bytes);
            if (p.zero_stage >= 3) k.zero3_gather += coll(CollKind::kAllGather, padded * mp.weight_bytes);
          }
          if (p.zero_stage == 2)
            for (int64_t n : cu.units)
              k.param_sync += coll(CollKind::kAllGather, static_cast<double>(UnitPadded(n, grad.size)) * mp.weight_bytes);
          k.num_unit_uses = static_cast<int>(cu.uses.size());
          break;
        }
      }
    }
  }
  pc.p2p = p.pp > 1 ? P2PTime(ActivationMessageBytes(m, p, e), pipe.spans_nodes, hw) : 0;
  pc.blocking_sends = BlockingSends(p, hw);
  pc.receiver_copies = p.pp > 1 && ExecutorOf(hw) == Executor::kDtrun;
  if (p.pp > 1 && track_outside)
    pc.outside_profile |= CollectiveOutsideProfile(CollKind::kSendRecv, ActivationMessageBytes(m, p, e), 2, 1,
                                                   pipe.spans_nodes, hw);

  // DP buckets: how finely the last backward of a chunk is split so its
  // gradient reduction can start before the chunk's backward ends.
  double max_grad = 0;
  for (const auto& k : pc.chunks) max_grad = std::max(max_grad, k.grad_bytes);
  pc.num_buckets_last = std::max(
      1, std::min(p.layers_per_chunk.empty() ? 1 : *std::min_element(p.layers_per_chunk.begin(), p.layers_per_chunk.end()),
                  static_cast<int>(std::ceil(max_grad / std::max<double>(1.0, p.dp_bucket_bytes)))));
  if (!p.overlap_grad_reduce) pc.num_buckets_last = 1;  // reduced after the whole backward, not in buckets
  // dtrun starts a chunk's reduction at its GradSync action, after the
  // chunk's last backward, not bucket by bucket inside it.
  if (executor == Executor::kDtrun) pc.num_buckets_last = 1;

  // Optimizer: a streaming pass over the rank's (ZeRO-sharded) parameters.
  pc.optimizer.resize(p.pp);
  for (int s = 0; s < p.pp; ++s) {
    const double expert = static_cast<double>(StageExpertParamsPerRank(m, p, s));
    double params = static_cast<double>(StageParamsPerRank(m, p, s)) - expert;
    if (p.zero_stage >= 1) params = params / std::max(1, grad.size) + expert / std::max(1, p.expert_dp());
    else params += expert;
    Op op;
    op.kind = OpKind::kMemoryBound;
    op.name = "optimizer";
    // The profile's bytes per parameter read and write fp32 moments; bf16
    // ones (PlanSpec::adam_moment_bytes) move 2 x 2 bytes less each way.
    const double narrower = p.adam_moment_bytes > 0 ? 4.0 * (4 - p.adam_moment_bytes) : 0.0;
    // Per parameter it runs faster when the rank's share fits the caches
    // (compute.optimizer_time_by_params, measured CPU profiles).
    op.bytes = params * std::max(0.0, hw.compute.optimizer_bytes_per_param - narrower) *
               OptimizerTimeFactor(params, hw);
    pc.optimizer[s] = OpTime(op, hw) + hw.compute.step_overhead_s;
    // dtrun zeroes the rank's whole gradient buffer once per step
    // (ParamStore::ZeroGrads): a write over it. GPU frameworks' per-step
    // costs are in their profiles' step_overhead_s.
    if (executor == Executor::kDtrun)
      pc.optimizer[s] += OpTime(GradZeroingOp(static_cast<double>(StageParamsPerRank(m, p, s)) * mp.grad_bytes), hw);
  }
  return pc;
}

}  // namespace dt
