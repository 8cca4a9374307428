// sim_bench: throughput of the discrete-event engine (sim/engine.h).
//
// Builds `streams` x `per_stream` tasks where each task also depends on the
// same-index task of the previous stream and on one pseudo-random earlier
// task of another stream (acyclic by construction), then times Run() several
// times and prints the median tasks/s. Usage: sim_bench [streams] [per_stream] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sim/engine.h"

namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Build(dt::sim::Engine& e, int streams, int per_stream) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> dur(1e-6, 1e-3);
  e.Reserve(static_cast<size_t>(streams) * per_stream, 2ull * streams * per_stream);
  for (int s = 0; s < streams; ++s) e.AddStream("rank" + std::to_string(s / 4), "stream" + std::to_string(s % 4));
  for (int i = 0; i < per_stream; ++i) {
    for (int s = 0; s < streams; ++s) {
      const dt::sim::TaskId t = e.AddTask(s, dur(rng), s % 4);
      if (s > 0) e.AddDep(t - 1, t);  // same index, previous stream
      if (i > 0) {
        const int other = static_cast<int>(rng() % streams);
        const int back = 1 + static_cast<int>(rng() % std::min(i, 8));
        e.AddDep((i - back) * streams + other, t);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int streams = argc > 1 ? std::atoi(argv[1]) : 64;
  const int per_stream = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 7;
  if (streams < 1 || per_stream < 1 || reps < 1) {
    std::fprintf(stderr, "usage: sim_bench [streams>=1] [per_stream>=1] [reps>=1]\n");
    return 2;
  }
  dt::sim::Engine e;
  std::vector<double> build_s, run_s;
  double makespan = 0.0;
  for (int r = 0; r < reps; ++r) {
    e.Clear();  // reuse capacity, as the planner does
    auto t0 = std::chrono::steady_clock::now();
    Build(e, streams, per_stream);
    auto t1 = std::chrono::steady_clock::now();
    dt::Status st = e.Run();
    auto t2 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "run failed: %s\n", st.message().c_str());
      return 1;
    }
    if (r > 0 && e.makespan() != makespan) {
      std::fprintf(stderr, "non-deterministic makespan\n");
      return 1;
    }
    makespan = e.makespan();
    build_s.push_back(Seconds(t1 - t0));
    run_s.push_back(Seconds(t2 - t1));
  }
  const double n = static_cast<double>(e.num_tasks());
  const double run = Median(run_s), build = Median(build_s);
  std::printf("sim_bench: %d streams x %d tasks = %.0f tasks, %zu deps, makespan %.6f s\n", streams, per_stream,
              n, e.num_deps(), makespan);
  std::printf("  Run():         median %.4f s  -> %.2f M tasks/s\n", run, n / run / 1e6);
  std::printf("  build + Run(): median %.4f s  -> %.2f M tasks/s\n", build + run, n / (build + run) / 1e6);
  return 0;
}
