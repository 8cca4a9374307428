// Collective cost models: pure functions giving the time of NCCL-style
// collectives from a per-step latency (s) and a bus bandwidth (bytes/s).
//
// Bandwidth convention (nccl-tests, doc/PERFORMANCE.md,
// https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
//   algbw = S / t,  busbw = algbw * factor(op, n), with
//   factor = 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter,
//   all-to-all), 1 (send/recv, broadcast, reduce).
// `bytes` is S as nccl-tests defines it: the full buffer, i.e. for
// all-gather / reduce-scatter the *total* gathered size (n x per-rank shard).
// `busbw_Bps` is the bus bandwidth the link sustains (what nccl-tests reports
// for large messages), so the bandwidth term is bytes * factor / busbw_Bps.
//
// Latency term (our choice, documented in docs/sim.md): the number of
// sequential communication steps of the algorithm times `latency_s`:
//   ring all-reduce       2(n-1) steps (reduce-scatter then all-gather)
//   ring all-gather / reduce-scatter / all-to-all / broadcast / reduce: n-1
//   send/recv             1
//   tree all-reduce       2*ceil(log2 n) (reduce up, then broadcast down)
// The bandwidth term of the tree variant is the same as the ring's: per
// nccl-tests the 2(n-1)/n factor holds for any send/recv-based algorithm.
// n == 1 and bytes == 0 cost 0 (NCCL returns immediately).
//
// Pure, thread-safe. Failure: n < 1, bytes < 0, latency < 0 or busbw <= 0
// (or non-finite) are caller bugs and abort (DT_CHECK).
#pragma once

namespace dt::sim {

enum class CollOp {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kBroadcast,
  kReduce,
};

const char* ToString(CollOp op);

// nccl-tests bus-bandwidth correction factor: busbw = algbw * factor. 0 for n == 1.
double BusBwFactor(CollOp op, int n);

// Sequential steps of the ring algorithm (the latency multiplier). 0 for n == 1.
int RingLatencySteps(CollOp op, int n);

// Ring-algorithm time: RingLatencySteps * latency_s + bytes * BusBwFactor / busbw_Bps.
double CollectiveTime(CollOp op, double bytes, int n, double latency_s, double busbw_Bps);

// Tree all-reduce: 2*ceil(log2 n) * latency_s + bytes * 2(n-1)/n / busbw_Bps.
double TreeAllReduceTime(double bytes, int n, double latency_s, double busbw_Bps);

// min(ring, tree) all-reduce: a stand-in for NCCL's per-size algorithm choice.
double BestAllReduceTime(double bytes, int n, double latency_s, double busbw_Bps);

// The algbw (bytes / time) implied by a time; 0 if time == 0.
inline double AlgBw(double bytes, double time_s) { return time_s > 0.0 ? bytes / time_s : 0.0; }

}  // namespace dt::sim
