// dtplan validate: predicted vs measured iteration times (planner/validate).
#include <cstdio>
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/validate/cross_validation.h"
#include "planner/cli/validation_html.h"
#include "planner/validate/run_validation.h"

namespace dt::cli {

namespace {

std::string JoinCases(const std::vector<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : ", ") + f;
  return s;
}

std::string Pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

int RunCrossValidation(const std::vector<ValidationCase>& cases, const ValidateOptions& o) {
  const std::vector<CvKnob> knobs = CalibratedKnobs();
  auto rep = CrossValidate(cases, knobs, o.threads);
  if (!rep.ok()) return Fail(rep.status().message());
  std::printf("Leave-one-source-out cross-validation of the calibrated profile parameters\n");
  std::printf("(each fitted over its grid on the other sources; a GPU with none left keeps its source values)\n\n");
  for (const CvKnob& k : knobs) {
    std::printf("  %s.%s: grid", k.profile.c_str(), k.name.c_str());
    for (double v : k.grid) std::printf(" %g", v);
    std::printf("; source value %g (%s)\n", k.source_value, k.source.c_str());
  }
  std::printf("\n%-42s %6s %9s %9s %9s   %s\n", "left-out source", "cases", "shipped", "fit(all)", "left-out",
              "fitted without it");
  for (const CvSource& s : rep->sources) {
    std::string kv;
    for (const auto& [k, v] : s.left_out_knobs) {
      char b[96];
      std::snprintf(b, sizeof b, "%s%s=%g", kv.empty() ? "" : " ", k.c_str(), v);
      kv += b;
    }
    std::printf("%-42s %6d %9s %9s %9s   %s\n", s.name.c_str(), s.cases, Pct(s.shipped_mape).c_str(),
                Pct(s.fit_mape).c_str(), Pct(s.left_out_mape).c_str(), kv.c_str());
  }
  std::printf("%-42s %6s %9s %9s %9s\n", "mean over sources", "", Pct(rep->mean_shipped).c_str(),
              Pct(rep->mean_fit).c_str(), Pct(rep->mean_left_out).c_str());
  std::printf("\nfitted on all sources:");
  for (const auto& [k, v] : rep->fit_knobs) std::printf(" %s=%g", k.c_str(), v);
  std::printf("\n(%d settings evaluated; MAPE per source, means weigh every source the same; each fit takes,\n"
              " of the settings within one standard error of the least mean, the one nearest the source values)\n",
              rep->settings_evaluated);
  return 0;
}

}  // namespace

int RunValidate(const ValidateOptions& o) {
  if (o.cases.empty()) return Fail("validate needs --cases FILE (or --execute --model M ...)");
  std::vector<ValidationCase> all;
  for (const std::string& f : o.cases) {
    auto cases = ReadCases(f);
    if (!cases.ok()) return Fail("--cases: " + cases.status().message());
    if (cases->empty()) return Fail("--cases: '" + f + "' holds no cases");
    all.insert(all.end(), cases->begin(), cases->end());
  }
  auto cases = &all;
  if (o.cv) {
    if (o.json || !o.report.empty())
      return Fail(std::string(o.json ? "--json" : "--report") + " does not combine with --cv (the cross-validation "
                  "prints its table as text); drop it, or drop --cv for the per-case report");
    if (!o.dims.attention_kernel.empty())
      return Fail("--attention-kernel does not combine with --cv (the cross-validation scores each case with "
                  "its own kernel); run `validate --cases ... --attention-kernel " + o.dims.attention_kernel +
                  "` for the what-if");
    return RunCrossValidation(all, o);
  }
  ValidationOptions vo;
  vo.profile_override = o.profile;
  vo.threads = o.threads;
  if (!o.dims.attention_kernel.empty()) vo.cudnn_attention = o.dims.attention_kernel == "cudnn";
  auto rep = RunValidation(*cases, vo);
  if (!rep.ok()) return Fail(rep.status().message());
  if (!o.report.empty()) {
    Status w = WriteTextFile(o.report, ValidationHtml(*rep, JoinCases(o.cases), o.profile));
    if (!w.ok()) return Fail("--report: " + w.message());
    std::fprintf(stderr, "wrote report %s\n", o.report.c_str());
  }
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
    if (!c.fits) {
      char mem[96];
      std::snprintf(mem, sizeof mem, "  (predicted not to fit: %.1f of %.1f GiB)", c.peak_memory_bytes / 1073741824.0,
                    c.capacity_bytes / 1073741824.0);
      flags += mem;
    }
    if (!c.measured_from.empty()) flags += "  (measured " + c.measured_from + ")";
    if (c.measured_allocated_bytes > 0) {
      char mem[128];
      std::snprintf(mem, sizeof mem, "  (peak allocated, rank 0: measured %.1f GiB, predicted %.1f GiB, %+.1f%%)",
                    c.measured_allocated_bytes / 1073741824.0, c.predicted_allocated_bytes / 1073741824.0,
                    100 * c.memory_error);
      flags += mem;
    }
    std::printf("%-44s %-44s %9.3fs %9.3fs %+7.1f%%%s\n", c.id.c_str(), Describe(c.plan).c_str(),
                c.measured_s, c.predicted_s, 100 * c.error, flags.c_str());
  }
  if (rep->scored > 0)
    std::printf("\n%d cases scored: MAPE %.1f%%, max error %.1f%%", rep->scored, 100 * rep->mape,
                100 * rep->max_error);
  else
    std::printf("\nno case scored");
  if (rep->not_modeled > 0) std::printf("; %d not modeled", rep->not_modeled);
  if (vo.cudnn_attention)
    std::printf("\n--attention-kernel %s: priced so in %d scored case(s) whose own kernel differs (fused attention "
                "on a profile with a cuDNN curve); the others keep their own kernel",
                o.dims.attention_kernel.c_str(), rep->attention_overridden);
  if (rep->invalid > 0) std::printf("; %d INVALID (listed above)", rep->invalid);
  std::printf("\n");
  if (rep->memory_scored > 0)
    std::printf("peak allocated memory (pipeline rank 0; %d case(s) that give it): MAPE %.1f%%, max error %.1f%%\n",
                rep->memory_scored, 100 * rep->memory_mape, 100 * rep->memory_max_error);
  std::printf("Spearman rank correlation per model (models with >= 3 cases):%s\n",
              rep->spearman.empty() ? " none" : "");
  for (const auto& [g, rho] : rep->spearman)
    std::printf("  %-32s %6.3f  (%d cases)\n", g.c_str(), rho, rep->group_size.at(g));
  if (rep->invalid > 0) {
    std::fprintf(stderr, "dtplan: error: %d case(s) in '%s' are invalid (see the lines marked INVALID); the others were scored\n",
                 rep->invalid, o.cases.size() == 1 ? o.cases[0].c_str() : "the case files");
    return 2;
  }
  return 0;
}

}  // namespace dt::cli
