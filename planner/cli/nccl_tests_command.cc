// dtplan profile --from-nccl-tests DIR --base PROFILE [--out FILE] [--name N]:
// a profile whose collective tables come from nccl-tests logs
// (planner/profile/nccl_tests_profile.h). Runs in dtplan itself: nothing is
// measured, so no MPI. Exit 0 ok, 2 bad input (one line naming file, line or
// flag and the fix), 1 when the output cannot be written.
#include <CLI/CLI.hpp>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/profile/nccl_tests_profile.h"

namespace dt::cli {
namespace {

std::string TodayUtc() {
  std::time_t now = std::time(nullptr);
  char b[16];
  std::strftime(b, sizeof b, "%Y-%m-%d", std::gmtime(&now));
  return b;
}

}  // namespace

bool WantsNcclTestsProfile(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--from-nccl-tests" || a.rfind("--from-nccl-tests=", 0) == 0) return true;
  }
  return false;
}

int RunNcclTestsProfile(int argc, char** argv) {
  CLI::App app{"dtplan profile --from-nccl-tests: collective tables from nccl-tests logs"};
  app.name("dtplan profile");
  std::string logs, base_name, out = "profile.json", name;
  app.add_option("--from-nccl-tests", logs,
                 "a directory of nccl-tests logs (*.txt, *.log, *.out: the stdout of all_reduce_perf, "
                 "all_gather_perf, reduce_scatter_perf, sendrecv_perf, alltoall_perf) or one log")
      ->required();
  app.add_option("--base", base_name,
                 "profile giving the device and compute sections and every collective entry no log covers "
                 "(a bundled name such as h100, or a file)");
  app.add_option("--out", out, "where to write the profile (default profile.json)");
  app.add_option("--name", name, "profile name (default: the --out file stem)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(std::string(e.what()) + " (see dtplan profile --from-nccl-tests DIR --help)");
  }
  if (base_name.empty())
    return Fail(
        "--from-nccl-tests needs --base PROFILE: nccl-tests measures only the network, so the device "
        "and compute sections come from another profile (a bundled one such as --base h100, or one "
        "written by dtplan profile)");
  auto base = LoadProfile(base_name);
  if (!base.ok()) return Fail("--base: " + base.status().message());
  std::vector<std::string> ignored;
  auto runs = ReadNcclTestsLogs(logs, &ignored);
  if (!runs.ok()) return Fail("--from-nccl-tests: " + runs.status().message());
  if (name.empty()) name = std::filesystem::path(out).stem().string();
  auto imp = ProfileFromNcclTests(*base, *runs, name, logs, TodayUtc());
  if (!imp.ok()) return Fail("--from-nccl-tests: " + imp.status().message());
  for (const std::string& s : imp->summary) std::cout << s << "\n";
  if (!ignored.empty()) {
    std::cout << "not read (not *.txt, *.log or *.out):";
    for (const std::string& f : ignored) std::cout << " " << f;
    std::cout << "\n";
  }
  Status w = WriteTextFile(out, ToJson(imp->profile).dump(2) + "\n");
  if (!w.ok()) {
    std::cerr << "dtplan: error: --out: " << w.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << out << " (device and compute from '" << base->name << "'); plan with: dtplan --profile "
            << out << " ...\n";
  return 0;
}

}  // namespace dt::cli
