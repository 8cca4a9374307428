#include "planner/profiler/measure_comm.h"

#include <cstdio>

#include "planner/cost/comm_cost.h"
#include "base/check.h"
#include "planner/profile/profile.h"

namespace dt {
namespace {

// S (nccl-tests bytes) of an operation moving `count` floats per rank.
double BusBytes(CollKind kind, int g, int64_t count) {
  double per_rank = 4.0 * count;
  return (kind == CollKind::kAllGather || kind == CollKind::kReduceScatter) ? per_rank * g : per_rank;
}


}  // namespace

std::vector<int64_t> MessageCounts(CollKind kind, int g, int64_t max_bytes) {
  std::vector<int64_t> counts;
  for (int64_t c = 1; BusBytes(kind, g, c) <= static_cast<double>(max_bytes); c *= 4) counts.push_back(c);
  return counts;
}

std::vector<CollSeries> MeasureCollectives(const MeasureConfig& cfg, rt::Comm& data,
                                           int64_t max_bytes) {
  const int g = data.size(), r = data.rank();
  std::vector<CollSeries> out;
  for (CollKind kind : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather,
                        CollKind::kSendRecv}) {
    CollSeries series;
    series.kind = kind;
    series.group_size = g;
    for (int64_t count : MessageCounts(kind, g, max_bytes)) {
      const size_t n = static_cast<size_t>(count);
      // Each buffer as large as its collective needs (the all-reduce runs in
      // place on n; the gathered side of a reduce-scatter or all-gather
      // holds n per rank), written once before timing so that first-touch
      // page faults of fresh (lazily zeroed) memory are not paid inside
      // the first, timed call.
      const size_t in_n = kind == CollKind::kReduceScatter ? n * g : n;
      const size_t out_n = kind == CollKind::kAllGather ? n * g : kind == CollKind::kAllReduce ? 0 : n;
      float* in = cfg.be->Alloc(in_n);
      float* outb = out_n > 0 ? cfg.be->Alloc(out_n) : nullptr;
      cfg.be->Fill(in, 0.0f, in_n);
      if (outb != nullptr) cfg.be->Fill(outb, 0.0f, out_n);
      std::function<void()> fn;
      switch (kind) {
        case CollKind::kAllReduce: fn = [&] { data.AllReduce(in, n); }; break;
        case CollKind::kReduceScatter: fn = [&] { data.ReduceScatter(in, outb, n); }; break;
        case CollKind::kAllGather: fn = [&] { data.AllGather(in, outb, n); }; break;
        case CollKind::kSendRecv:
          fn = [&] {
            auto rq = data.IRecv(outb, n, (r + g - 1) % g, 7);
            auto sq = data.ISend(in, n, (r + 1) % g, 7);
            sq->Wait();
            rq->Wait();
          };
          break;
        case CollKind::kAllToAll:  // not measured: profiles derive it from all-gather (docs/simulator.md)
          break;
      }
      CollSample s;
      s.bytes = BusBytes(kind, g, count);
      s.seconds = ConcurrentMedianSeconds(cfg, fn);
      series.samples.push_back(s);
      cfg.be->Free(in, in_n);
      if (outb != nullptr) cfg.be->Free(outb, out_n);
      if (cfg.progress) {
        char buf[200];
        std::snprintf(buf, sizeof(buf), "%s g=%d %.0f B: %.2f us, busbw %.3f GB/s", CollectiveKey(kind), g,
                      s.bytes, s.seconds * 1e6, s.bytes * sim::BusBwFactor(ToSimOp(kind), g) / s.seconds / 1e9);
        cfg.progress(buf);
      }
    }
    out.push_back(std::move(series));
  }
  return out;
}

}  // namespace dt
