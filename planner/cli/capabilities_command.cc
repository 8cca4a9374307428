// dtplan capabilities: prints the capability table (planner/spec/capabilities.h)
// - which plan and model features dtrun executes on each backend.
#include <cstdio>
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/spec/capabilities.h"

namespace dt::cli {

int RunCapabilities(bool as_json) {
  if (as_json) {
    json rows = json::array();
    for (const Capability& c : CapabilityTable())
      rows.push_back({{"feature", c.name}, {"cpu", c.cpu}, {"cuda", c.cuda}, {"fix", c.fix}});
    std::cout << json{{"dtrun_executes", rows}}.dump(2) << "\n";
    return 0;
  }
  std::printf("%-55s %-4s %-4s\n", "feature (what dtrun executes)", "CPU", "CUDA");
  for (const Capability& c : CapabilityTable())
    std::printf("%-55s %-4s %-4s\n", c.name, c.cpu ? "yes" : "no", c.cuda ? "yes" : "no");
  std::printf("\ndtplan --device cpu emits only plans the CPU column executes; GPU plans carry a note "
              "naming what the CUDA runtime lacks.\n");
  return 0;
}

}  // namespace dt::cli
