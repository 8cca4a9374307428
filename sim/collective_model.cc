#include "sim/collective_model.h"

#include <cmath>

#include "base/check.h"

namespace dt::sim {
namespace {

void CheckArgs(double bytes, int n, double latency_s, double busbw_Bps) {
  DT_CHECK_GE(n, 1);
  DT_CHECK(std::isfinite(bytes) && bytes >= 0.0) << "bytes=" << bytes;
  DT_CHECK(std::isfinite(latency_s) && latency_s >= 0.0) << "latency_s=" << latency_s;
  DT_CHECK(std::isfinite(busbw_Bps) && busbw_Bps > 0.0) << "busbw_Bps=" << busbw_Bps;
}

// ceil(log2 n) for n >= 1, without floating-point rounding surprises.
int CeilLog2(int n) {
  int steps = 0;
  for (long long reach = 1; reach < n; reach *= 2) ++steps;
  return steps;
}

}  // namespace

const char* ToString(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce: return "all_reduce";
    case CollOp::kAllGather: return "all_gather";
    case CollOp::kReduceScatter: return "reduce_scatter";
    case CollOp::kAllToAll: return "all_to_all";
    case CollOp::kSendRecv: return "send_recv";
    case CollOp::kBroadcast: return "broadcast";
    case CollOp::kReduce: return "reduce";
  }
  return "?";
}

double BusBwFactor(CollOp op, int n) {
  DT_CHECK_GE(n, 1);
  if (n == 1) return 0.0;
  const double nd = n;
  switch (op) {
    case CollOp::kAllReduce: return 2.0 * (nd - 1.0) / nd;
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kAllToAll: return (nd - 1.0) / nd;
    case CollOp::kSendRecv:
    case CollOp::kBroadcast:
    case CollOp::kReduce: return 1.0;
  }
  DT_CHECK(false) << "unknown CollOp " << static_cast<int>(op);
  return 0.0;
}

int RingLatencySteps(CollOp op, int n) {
  DT_CHECK_GE(n, 1);
  if (n == 1) return 0;
  switch (op) {
    case CollOp::kAllReduce: return 2 * (n - 1);
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kAllToAll:
    case CollOp::kBroadcast:
    case CollOp::kReduce: return n - 1;
    case CollOp::kSendRecv: return 1;
  }
  DT_CHECK(false) << "unknown CollOp " << static_cast<int>(op);
  return 0;
}

double CollectiveTime(CollOp op, double bytes, int n, double latency_s, double busbw_Bps) {
  CheckArgs(bytes, n, latency_s, busbw_Bps);
  if (n == 1 || bytes == 0.0) return 0.0;
  return RingLatencySteps(op, n) * latency_s + bytes * BusBwFactor(op, n) / busbw_Bps;
}

double TreeAllReduceTime(double bytes, int n, double latency_s, double busbw_Bps) {
  CheckArgs(bytes, n, latency_s, busbw_Bps);
  if (n == 1 || bytes == 0.0) return 0.0;
  return 2.0 * CeilLog2(n) * latency_s + bytes * BusBwFactor(CollOp::kAllReduce, n) / busbw_Bps;
}

double BestAllReduceTime(double bytes, int n, double latency_s, double busbw_Bps) {
  const double ring = CollectiveTime(CollOp::kAllReduce, bytes, n, latency_s, busbw_Bps);
  const double tree = TreeAllReduceTime(bytes, n, latency_s, busbw_Bps);
  return tree < ring ? tree : ring;
}

}  // namespace dt::sim
