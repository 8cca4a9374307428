// dtplan validate: predicted vs measured iteration times (planner/validate).
#include <cstdio>
#include <iostream>

#include "planner/cli/commands.h"
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
  if (o.json) {
    std::cout << ToJson(*rep).dump(2) << "\n";
    return rep->invalid > 0 ? 2 : 0;
  }
  std::printf("%-44s %-44s %10s %10s %8s\n", "case", "plan", "measured", "predicted", "error");
  for (const auto& c : rep->cases) {
    if (!c.skipped.empty()) {
      std::printf("%-44s %s: %s\n", c.id.c_str(), c.invalid ? "INVALID, not scored" : "not scored, not modeled",
                  c.skipped.c_str());
      continue;
    }
    std::string flags;
    if (c.searched) flags += "  (searched)";
    if (!c.fits) flags += "  (predicted not to fit)";
    if (!c.measured_from.empty()) flags += "  (measured " + c.measured_from + ")";
    std::printf("%-44s %-44s %9.3fs %9.3fs %+7.1f%%%s\n", c.id.c_str(), Describe(c.plan).c_str(),
                c.measured_s, c.predicted_s, 100 * c.error, flags.c_str());
  }
  if (rep->scored > 0)
    std::printf("\n%d cases scored: MAPE %.1f%%, max error %.1f%%", rep->scored, 100 * rep->mape,
                100 * rep->max_error);
  else
    std::printf("\nno case scored");
  if (rep->not_modeled > 0) std::printf("; %d not modeled", rep->not_modeled);
  if (rep->invalid > 0) std::printf("; %d INVALID (listed above)", rep->invalid);
  std::printf("\n");
  std::printf("Spearman rank correlation per model (models with >= 3 cases):%s\n",
              rep->spearman.empty() ? " none" : "");
  for (const auto& [g, rho] : rep->spearman)
    std::printf("  %-32s %6.3f  (%d cases)\n", g.c_str(), rho, rep->group_size.at(g));
  if (rep->invalid > 0) {
    std::fprintf(stderr, "dtplan: error: %d case(s) in '%s' are invalid (see the lines marked INVALID); the others were scored\n",
                 rep->invalid, o.cases.c_str());
    return 2;
  }
  return 0;
}

}  // namespace dt::cli
