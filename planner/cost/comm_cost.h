// Communication-time model: predicted seconds of one NCCL collective or
// point-to-point transfer on the cluster a HardwareProfile describes.
// The formulas are the simulator's (sim/collective_model.h: nccl-tests bus
// bandwidth factors, latency = sequential steps x per-step latency); this
// unit only chooses the latency and bus bandwidth from the profile:
//
// * Group inside one node: network.collectives.<op>.intra, entry for the
//   group size (linear interpolation between listed sizes, clamped).
// * Group spanning nodes with g ranks per node: each of the g ranks drives
//   its own NIC, so NCCL's rings/trees (one per NIC, "channels") move g
//   NIC-loads in parallel and the inter-node bus bandwidth is ~ g x the
//   per-NIC bandwidth, never more than the intra-node bandwidth of g ranks.
//   The profile's .inter table holds that busbw per g (bundled profiles
//   fill it from this rule; measured ones measure it), and the cost caps it
//   with intra(g). Latency is the .inter entry's per-step latency.
// * Large messages use the entry's busbw_Bps plateau; when the entry holds
//   measured `points` (bytes -> busbw), the busbw at the message size is
//   interpolated log-log and the time is max(latency term, bandwidth term).
// * all_reduce takes min(ring, tree) (sim::BestAllReduceTime), standing in
//   for NCCL's per-size algorithm choice.
// * all_to_all (MoE dispatch/combine) has no table: intra-node it uses the
//   all_gather .intra entry of the group size; spanning nodes, the
//   all_gather .inter entry for 1 rank per node (one NIC per rank, no
//   aggregation over the node's NICs). (n-1)/n factor and n-1 latency steps.
// Group size 1 or 0 bytes cost 0. Monotone: more bandwidth never slower,
// larger messages never faster. Pure, thread-safe; inconsistent arguments
// (ranks per node > gpus_per_node, a spanning group on a profile without
// inter-node tables) are caller bugs (DT_CHECK); check HasInterNode first.
#pragma once

#include "planner/cost/layer_ops.h"
#include "planner/profile/profile.h"
#include "sim/collective_model.h"

namespace dt {

// `bytes` as nccl-tests counts them (see Op::bytes in layer_ops.h).
// `ranks_per_node_in_group` is only read when `spans_nodes`.
double CollectiveTime(CollKind kind, double bytes, int group_size, int ranks_per_node_in_group,
                      bool spans_nodes, const HardwareProfile& profile);

// A collective op's time: CollectiveTime of its kind, bytes and group, except
// an all-to-all with Op::dedup_top_k > 0 (a deduplicating MoE dispatcher,
// DeepEP / HybridEP): with k of E experts per token, spread evenly over the
// n ranks (g per node, n/g nodes), a token goes to a given rank with
// probability q_r = 1 - C(E - E/n, k) / C(E, k) and to a given node with q_n
// (the same over E/(n/g) experts). Inside a node: an all-to-all of n*q_r
// copies per token instead of k. Across nodes: (n/g - 1)*q_n copies per
// token leave through the rank's NIC while n*q_r*(g-1)/g cross NVLink (the
// forwarding from the GPU a remote copy lands on included); the slower sets
// the time. Uniform random routing is assumed for the hit probabilities.
double OpCollectiveTime(const Op& op, int ranks_per_node_in_group, bool spans_nodes,
                        const HardwareProfile& profile);

// One send/recv of `bytes` between two ranks (pipeline activations).
double P2PTime(double bytes, bool inter_node, const HardwareProfile& profile);

// True when every collective has an inter-node table (multi-node plans can be priced).
bool HasInterNode(const HardwareProfile& profile);

// The simulator's name for a collective (sim/collective_model.h).
sim::CollOp ToSimOp(CollKind k);

// A cluster can be priced with a profile when its nodes are no larger than
// the profile's and, for several nodes, the profile has inter-node tables.
// Returns InvalidArgument naming the flag and the fix otherwise.
Status CheckClusterFitsProfile(const ClusterSpec& c, const HardwareProfile& hw);

// The latency (s) and bus bandwidth (bytes/s) the model uses for a message
// of `bytes`; exposed for reports and tests.
struct LinkChoice {
  double latency_s = 0;
  double busbw_Bps = 0;
  bool from_points = false;  // busbw came from measured points
  bool clamped = false;      // a lookup extrapolated outside measured sizes
};
LinkChoice ChooseLink(CollKind kind, double bytes, int group_size, int ranks_per_node_in_group,
                      bool spans_nodes, const HardwareProfile& profile);

}  // namespace dt
