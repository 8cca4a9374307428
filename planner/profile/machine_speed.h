// MachineSpeed: a quick check that this machine still runs at the speed a
// measured CPU profile recorded. The CPU model string alone misses a busier
// or a different host of the same model (2026-11-24: the same "AMD EPYC"
// copied memory at half the profiled rate). ProbeCopyBandwidthPerRank runs
// the profiler's stream-copy measurement in miniature: `ranks` threads at
// once, each memmove-ing 32 MiB three times, counting read + write bytes
// as the profiler does (planner/profiler/measure_compute.cc); it returns
// the median over threads of each thread's median rate, bytes/s (about
// 30 ms on this project's VM). SpeedMismatchNote compares it with the
// profile's memory_bandwidth_Bps: a one-line note when they differ by more
// than 1.5x either way, empty otherwise. Thread-safe; no failure modes (a
// failed allocation returns 0, which makes no note).
#pragma once

#include <string>

namespace dt {

double ProbeCopyBandwidthPerRank(int ranks);

// `ranks_per_node` (> 0) names the layout to re-measure (RemeasureCpuProfile).
std::string SpeedMismatchNote(double probed_Bps, double profile_Bps, const std::string& profile_name,
                              const std::string& profile_created, int ranks_per_node = 0);

// "re-measure with `dtplan profile --device cpu --ranks N --out my-cpu.json`
// and pass --profile my-cpu.json" (without --ranks when ranks_per_node <= 0):
// the one way every CPU-profile note says how to measure this layout.
std::string RemeasureCpuProfile(int ranks_per_node);

}  // namespace dt
