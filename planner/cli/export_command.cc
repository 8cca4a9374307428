// dtplan export: print what runs a plan file in Megatron-LM, torchtitan or
// DeepSpeed, with its launch lines (planner/frameworks/export.h).
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/frameworks/export.h"

namespace dt::cli {

int RunExport(const ExportOptions& o) {
  auto f = ParseFramework(o.to);
  if (!f.ok() || *f == Framework::kAny) return Fail("--to '" + o.to + "' is unknown; use megatron, torchtitan or deepspeed");
  auto file = LoadPlanFile(o.plan);
  if (!file.ok()) return Fail("--plan: " + file.status().message());
  auto ex = ExportPlan(*f, *file);
  if (!ex.ok()) {
    // Say which framework could run it, when one can.
    std::string alt;
    for (Framework other : {Framework::kMegatron, Framework::kTorchtitan, Framework::kDeepSpeed})
      if (other != *f && CheckExpressible(other, file->model, file->plan).ok())
        alt += std::string(alt.empty() ? "" : " or ") + "--to " + ToString(other);
    return Fail(ex.status().message() + (alt.empty() ? "" : " (this plan exports with " + alt + ")"));
  }
  if (!o.out.empty()) {
    Status w = WriteTextFile(o.out, ex->config);
    if (!w.ok()) return Fail("--out: " + w.message());
    std::cout << "wrote " << o.out << "\n";
  } else {
    if (!ex->config_file.empty()) std::cout << "# ---- " << ex->config_file << " ----\n";
    std::cout << ex->config;
  }
  std::cout << "\n# ---- launch ----\n" << ex->launch;
  for (const std::string& n : ex->notes) std::cout << "# note: " << n << "\n";
  return 0;
}

}  // namespace dt::cli
