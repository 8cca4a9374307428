#include "planner/profiler/profile_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#ifndef DT_PROFILER_EXE
#define DT_PROFILER_EXE "dtplan-profile"
#endif

namespace dt {
namespace {

bool UnderMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string FindProfilerExe() {
  if (const char* e = std::getenv("DTPLAN_PROFILE_EXE")) return e;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/') + 1);
    for (const char* rel : {"dtplan-profile", "planner/profiler/dtplan-profile"})
      if (Executable(dir + rel)) return dir + rel;
  }
  return DT_PROFILER_EXE;
}

}  // namespace

std::vector<std::string> ProfileLaunchCommand(const std::vector<std::string>& args,
                                              const std::string& exe, bool under_mpi,
                                              bool as_root, int default_ranks) {
  std::vector<std::string> cmd;
  if (!under_mpi) {
    std::string ranks = std::to_string(default_ranks);
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--ranks") ranks = args[i + 1];
    cmd = {"mpirun", "-np", ranks};
    if (as_root) cmd.push_back("--allow-run-as-root");
    cmd.push_back("--oversubscribe");
  }
  cmd.push_back(exe);
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

int RunProfileCommand(int argc, char** argv) {
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--ranks") continue;
    char* end = nullptr;
    long r = std::strtol(args[i + 1].c_str(), &end, 10);
    if (*end != '\0' || r < 1 || r > 1024) {
      std::cerr << "dtplan: error: --ranks " << args[i + 1]
                << ": use a rank count in [1, 1024] (ranks per node to measure)\n";
      return 2;
    }
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<std::string> cmd = ProfileLaunchCommand(
      args, FindProfilerExe(), UnderMpi(), geteuid() == 0, cores > 0 ? static_cast<int>(cores) : 1);
  std::vector<char*> cargv;
  for (std::string& s : cmd) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  std::cerr << "dtplan profile:";
  for (const std::string& s : cmd) std::cerr << ' ' << s;
  std::cerr << '\n';
  execvp(cargv[0], cargv.data());
  std::cerr << "dtplan: error: cannot run '" << cmd[0] << "': " << std::strerror(errno)
            << (cmd[0] == "mpirun" ? " (install Open MPI, or set DTPLAN_PROFILE_EXE)" : "")
            << "\n";
  return 1;
}

}  // namespace dt
