// What machine is this: CPU model, cores, memory, date, process memory.
// Reads /proc (Linux); a missing or unreadable file yields "unknown" / 0
// rather than an error, since the description is informative only.
#pragma once

#include <cstdint>
#include <string>

namespace dt {

struct MachineInfo {
  std::string cpu_model = "unknown";  // /proc/cpuinfo "model name"
  int cores = 0;                      // online logical CPUs
  int64_t mem_total_bytes = 0;        // /proc/meminfo MemTotal
  std::string hostname;
  std::string date;                   // ISO date (UTC) of the measurement
  std::string datetime;               // ISO date-time (UTC)
};

MachineInfo ReadMachineInfo();

// Resident set size of this process (VmRSS), bytes; 0 when unreadable.
int64_t CurrentRssBytes();

}  // namespace dt
