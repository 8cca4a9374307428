#include "planner/cost/comm_cost.h"

#include <algorithm>

#include "sim/collective_model.h"

namespace dt {

sim::CollOp ToSimOp(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return sim::CollOp::kAllReduce;
    case CollKind::kReduceScatter: return sim::CollOp::kReduceScatter;
    case CollKind::kAllGather: return sim::CollOp::kAllGather;
    case CollKind::kSendRecv: return sim::CollOp::kSendRecv;
    case CollKind::kAllToAll: return sim::CollOp::kAllToAll;
  }
  return sim::CollOp::kSendRecv;
}

namespace {

// Entry for `key`: exact match (with its measured points) or linear
// interpolation of latency and plateau busbw between neighbours, clamped.
LinkChoice Lookup(const std::vector<LinkEntry>& es, int key, double bytes) {
  DT_CHECK(!es.empty()) << "empty collective table";
  LinkChoice c;
  for (const LinkEntry& e : es) {
    if (e.key != key) continue;
    c.latency_s = e.latency_s;
    c.busbw_Bps = e.busbw_Bps;
    if (!e.points.empty()) {
      InterpResult r = Interpolate(e.points, std::max(bytes, 1.0), Scale::kLog, Scale::kLog);
      c.busbw_Bps = r.value;
      c.from_points = true;
      c.clamped = r.clamped;
    }
    return c;
  }
  Curve lat, bw;
  for (const LinkEntry& e : es) {
    lat.x.push_back(e.key);
    lat.y.push_back(e.latency_s);
    bw.x.push_back(e.key);
    bw.y.push_back(e.busbw_Bps);
  }
  InterpResult l = Interpolate(lat, key), b = Interpolate(bw, key);
  c.latency_s = l.value;
  c.busbw_Bps = b.value;
  c.clamped = b.clamped;
  return c;
}

// Latency part of the sim's model: sequential steps x per-step latency;
// all-reduce takes the fewer steps of ring and tree (as BestAllReduceTime).
double LatencyTime(CollKind kind, int n, double latency_s) {
  int steps = sim::RingLatencySteps(ToSimOp(kind), n);
  if (kind == CollKind::kAllReduce) {
    int log2n = 0;
    for (long long reach = 1; reach < n; reach *= 2) ++log2n;
    steps = std::min(steps, 2 * log2n);
  }
  return steps * latency_s;
}

}  // namespace

bool HasInterNode(const HardwareProfile& p) {
  for (const CollectiveTable& t : p.network.collectives)
    if (t.inter.empty()) return false;
  return true;
}

namespace {
// Seconds for one rank to push `nic_bytes` off its node through its own NIC
// (one NIC's busbw, the all-gather .inter entry for 1 rank per node) while
// `nvlink_bytes` cross NVLink to its g-1 node-mates, in parallel: the slower
// of the two. `nic` receives the NIC entry (its latency is the step latency).
double NicAndNvlinkSeconds(double nic_bytes, double nvlink_bytes, int g, double table_bytes,
                           const HardwareProfile& p, LinkChoice* nic) {
  const CollectiveTable& ag = p.network.table(CollKind::kAllGather);
  DT_CHECK(!ag.inter.empty()) << "profile '" << p.name << "' has no inter-node all_gather table";
  *nic = Lookup(ag.inter, 1, table_bytes);
  double t = nic_bytes / nic->busbw_Bps;
  if (g >= 2 && !ag.intra.empty()) t = std::max(t, nvlink_bytes / Lookup(ag.intra, g, table_bytes).busbw_Bps);
  return t;
}

// All-to-all, derived from the all-gather tables (profiles measure no
// all-to-all; an approximation, docs/simulator.md "Mixture of experts"):
// inside a node, NVLink/NVSwitch moves the same (n-1)/n of each rank's
// buffer as an all-gather, at the all-gather busbw of the group size. Across
// nodes (g ranks of the group per node), each rank sends (n-g)/n of its
// buffer off the node through its own NIC -- one NIC's busbw, the all-gather
// .inter entry for 1 rank per node, not the g-NIC aggregate a ring reaches --
// while the (g-1)/n for its node-mates crosses NVLink at the same time. The
// slower of the two sets the time; it is returned as the busbw that moves the
// nccl-tests (n-1)/n share in that time.
LinkChoice AllToAllLink(double bytes, int n, int g, bool spans_nodes, const HardwareProfile& p) {
  if (!spans_nodes) {
    DT_CHECK_LE(n, p.network.gpus_per_node) << "an intra-node group cannot exceed a node";
    return Lookup(p.network.table(CollKind::kAllGather).intra, n, bytes);
  }
  DT_CHECK(g >= 1 && g < n && g <= p.network.gpus_per_node) << "ranks per node " << g << " of " << n;
  const double nd = n;
  LinkChoice c;
  const double seconds_per_byte = NicAndNvlinkSeconds((nd - g) / nd, (g - 1.0) / nd, g, bytes, p, &c);
  c.busbw_Bps = (nd - 1.0) / nd / seconds_per_byte;
  return c;
}
}  // namespace

LinkChoice ChooseLink(CollKind kind, double bytes, int n, int g, bool spans_nodes,
                      const HardwareProfile& p) {
  if (kind == CollKind::kAllToAll) return AllToAllLink(bytes, n, g, spans_nodes, p);
  const CollectiveTable& t = p.network.table(kind);
  if (!spans_nodes) {
    DT_CHECK_LE(n, p.network.gpus_per_node) << "an intra-node group cannot exceed a node";
    return Lookup(t.intra, n, bytes);
  }
  DT_CHECK(!t.inter.empty()) << "profile '" << p.name << "' has no inter-node table for "
                             << CollectiveKey(kind) << "; check HasInterNode() first";
  DT_CHECK(g >= 1 && g <= p.network.gpus_per_node && g <= n) << "ranks per node " << g;
  LinkChoice c = Lookup(t.inter, g, bytes);
  // NICs cannot beat NVLink: cap by the intra-node bandwidth of g ranks.
  if (g >= 2 && !t.intra.empty()) {
    LinkChoice in = Lookup(t.intra, g, bytes);
    c.busbw_Bps = std::min(c.busbw_Bps, in.busbw_Bps);
  }
  return c;
}

double CollectiveTime(CollKind kind, double bytes, int n, int g, bool spans_nodes,
                      const HardwareProfile& p) {
  DT_CHECK_GE(n, 1);
  DT_CHECK(bytes >= 0) << "bytes=" << bytes;
  if (n == 1 || bytes == 0) return 0;
  LinkChoice c = ChooseLink(kind, bytes, n, g, spans_nodes, p);
  sim::CollOp op = ToSimOp(kind);
  if (c.from_points) {
    // Measured busbw already includes the latency at measured sizes; the
    // latency term only bounds the time from below for tiny messages.
    double bw_time = sim::CollectiveTime(op, bytes, n, 0.0, c.busbw_Bps);
    return std::max(LatencyTime(kind, n, c.latency_s), bw_time);
  }
  if (kind == CollKind::kAllReduce) return sim::BestAllReduceTime(bytes, n, c.latency_s, c.busbw_Bps);
  return sim::CollectiveTime(op, bytes, n, c.latency_s, c.busbw_Bps);
}

namespace {
// Probability that a token's k distinct experts, drawn evenly from E, include
// at least one of the E/parts experts a given part (rank or node) holds.
double HitProbability(double experts, int k, double parts) {
  const double held = experts / parts;
  double miss = 1.0;
  for (int i = 0; i < k; ++i) miss *= std::max(0.0, experts - held - i) / (experts - i);
  return 1.0 - miss;
}
}  // namespace

double OpCollectiveTime(const Op& op, int g, bool spans_nodes, const HardwareProfile& p) {
  if (op.coll != CollKind::kAllToAll || op.dedup_top_k <= 0 || op.group_size <= 1)
    return CollectiveTime(op.coll, op.bytes, op.group_size, g, spans_nodes, p);
  DT_CHECK(op.dedup_experts >= op.dedup_top_k) << "dedup all-to-all of " << op.dedup_experts << " experts";
  const int n = op.group_size, k = op.dedup_top_k;
  const double E = static_cast<double>(op.dedup_experts);
  const double token_bytes = op.bytes / k;  // one copy of every token (at the imbalance share)
  const double per_rank = HitProbability(E, k, n);
  if (!spans_nodes) return CollectiveTime(CollKind::kAllToAll, token_bytes * n * per_rank, n, g, false, p);
  DT_CHECK(g >= 1 && g < n) << "ranks per node " << g << " of " << n;
  const double nodes = static_cast<double>(n) / g;
  const double per_node = HitProbability(E, k, nodes);
  LinkChoice nic;
  const double t = NicAndNvlinkSeconds(token_bytes * (nodes - 1.0) * per_node,
                                       token_bytes * n * per_rank * (g - 1.0) / g, g, token_bytes, p, &nic);
  return LatencyTime(CollKind::kAllToAll, n, nic.latency_s) + t;
}

double P2PTime(double bytes, bool inter_node, const HardwareProfile& p) {
  if (bytes <= 0) return 0;
  if (!inter_node) DT_CHECK_GE(p.network.gpus_per_node, 2) << "no intra-node peer exists";
  return CollectiveTime(CollKind::kSendRecv, bytes, 2, 1, inter_node, p);
}

Status CheckClusterFitsProfile(const ClusterSpec& c, const HardwareProfile& hw) {
  const int per_node = hw.network.gpus_per_node;
  if (c.gpus_per_node > per_node)
    return InvalidArgument("--gpus " + std::to_string(c.gpus_per_node) + " exceeds the " +
                           std::to_string(per_node) + " devices per node of profile '" + hw.name +
                           "'; use --gpus " + std::to_string(per_node) + " --nodes " +
                           std::to_string((c.world() + per_node - 1) / per_node) +
                           " or a profile measured with that many ranks per node");
  if (c.nodes > 1 && !HasInterNode(hw))
    return InvalidArgument("profile '" + hw.name + "' has no inter-node tables, so --nodes " +
                           std::to_string(c.nodes) + " cannot be priced; use --nodes 1 or another profile");
  return Status::Ok();
}

}  // namespace dt
