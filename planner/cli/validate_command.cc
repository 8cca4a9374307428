// dtplan validate: predicted vs measured iteration times (planner/validate).
#include <cstdio>
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/cli/validation_html.h"
#include "planner/validate/run_validation.h"

namespace dt::cli {

int RunValidate(const ValidateOptions& o) {
  if (o.cases.empty()) return Fail("validate needs --cases FILE (or --execute --model M ...)");
  auto cases = ReadCases(o.cases);
  if (!cases.ok()) return Fail("--cases: " + cases.status().message());
  if (cases->empty()) return Fail("--cases: '" + o.cases + "' holds no cases");
  ValidationOptions vo;
  vo.profile_override = o.profile;
  vo.threads = o.threads;
  auto rep = RunValidation(*cases, vo);
  if (!rep.ok()) return Fail(rep.status().message());
  if (!o.report.empty()) {
    Status w = WriteTextFile(o.report, ValidationHtml(*rep, o.cases, o.profile));
    if (!w.ok()) return Fail("--report: " + w.message());
    std::fprintf(stderr, "wrote report %s\n", o.report.c_str());
  }
  if (o.json) {
    std::cout << ToJson(*rep).dump(2) << "\n";
    return 0;
  }
  std::printf("%-44s %-44s %10s %10s %8s\n", "case", "plan", "measured", "predicted", "error");
  for (const auto& c : rep->cases)
    std::printf("%-44s %-44s %9.3fs %9.3fs %+7.1f%%%s\n", c.id.c_str(), Describe(c.plan).c_str(),
                c.measured_s, c.predicted_s, 100 * c.error,
                c.searched ? "  (searched)" : (c.fits ? "" : "  (predicted not to fit)"));
  std::printf("\n%zu cases: MAPE %.1f%%, max error %.1f%%\n", rep->cases.size(), 100 * rep->mape,
              100 * rep->max_error);
  std::printf("Spearman rank correlation per model (models with >= 3 cases):%s\n",
              rep->spearman.empty() ? " none" : "");
  for (const auto& [g, rho] : rep->spearman)
    std::printf("  %-32s %6.3f  (%d cases)\n", g.c_str(), rho, rep->group_size.at(g));
  return 0;
}

}  // namespace dt::cli
