#include "planner/profile/machine_speed.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

namespace dt {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

double ProbeCopyBandwidthPerRank(int ranks) {
  constexpr size_t kBytes = 32u << 20;
  constexpr int kReps = 3;
  const int n = std::max(1, ranks);
  std::vector<double> rate(n, 0.0);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&rate, t] {
      std::unique_ptr<char[]> src(new (std::nothrow) char[kBytes]), dst(new (std::nothrow) char[kBytes]);
      if (!src || !dst) return;
      std::memset(src.get(), 1, kBytes);  // first touch outside the timing
      std::memset(dst.get(), 0, kBytes);
      std::vector<double> r;
      for (int i = 0; i < kReps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        std::memmove(dst.get(), src.get(), kBytes);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 0) r.push_back(2.0 * kBytes / s);
      }
      rate[t] = Median(r);
    });
  }
  for (auto& th : threads) th.join();
  return Median(rate);
}

std::string RemeasureCpuProfile(int ranks_per_node) {
  return std::string("re-measure with `dtplan profile --device cpu ") +
         (ranks_per_node > 0 ? "--ranks " + std::to_string(ranks_per_node) + " " : "") +
         "--out my-cpu.json` and pass --profile my-cpu.json";
}

std::string SpeedMismatchNote(double probed_Bps, double profile_Bps, const std::string& profile_name,
                              const std::string& profile_created, int ranks_per_node) {
  if (!(probed_Bps > 0) || !(profile_Bps > 0)) return "";
  const double ratio = probed_Bps / profile_Bps;
  if (ratio >= 1.0 / 1.5 && ratio <= 1.5) return "";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "this machine copies memory at %.1f GB/s per rank now, profile %s measured %.1f GB/s%s%s (%.2fx): "
                "its step times will be off by about that factor (a busier or another host of the same CPU "
                "model); ",
                probed_Bps / 1e9, profile_name.c_str(), profile_Bps / 1e9, profile_created.empty() ? "" : " on ",
                profile_created.c_str(), ratio);
  return buf + RemeasureCpuProfile(ranks_per_node);
}

}  // namespace dt
