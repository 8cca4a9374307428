#include "planner/profile/machine_info.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <sstream>

namespace dt {
namespace {

// Value after "key:" on the first line of `path` starting with `key`.
std::string ProcField(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    size_t b = v.find_first_not_of(" \t");
    return b == std::string::npos ? "" : v.substr(b);
  }
  return "";
}

int64_t KiloBytesField(const char* path, const std::string& key) {
  std::string v = ProcField(path, key);
  if (v.empty()) return 0;
  return std::atoll(v.c_str()) * 1024;  // "<n> kB"
}

std::string FormatUtc(const char* fmt) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), fmt, &tm);
  return buf;
}

}  // namespace

MachineInfo ReadMachineInfo() {
  MachineInfo m;
  std::string model = ProcField("/proc/cpuinfo", "model name");
  if (!model.empty()) m.cpu_model = model;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  m.cores = n > 0 ? static_cast<int>(n) : 0;
  m.mem_total_bytes = KiloBytesField("/proc/meminfo", "MemTotal");
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) m.hostname = host;
  m.date = FormatUtc("%Y-%m-%d");
  m.datetime = FormatUtc("%Y-%m-%dT%H:%M:%SZ");
  return m;
}

int64_t CurrentRssBytes() { return KiloBytesField("/proc/self/status", "VmRSS"); }

}  // namespace dt
