// dtplan validate --execute: the closed loop on this machine (planner/validate/execute.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/cli/report.h"
#include "planner/cli/setup.h"
#include "planner/cli/validation_html.h"
#include "planner/search/search.h"
#include "planner/spec/capabilities.h"
#include "planner/validate/execute.h"

namespace dt::cli {
namespace {

std::string FindDtrun(const ValidateOptions& o) {
  if (!o.dtrun.empty()) return o.dtrun;
  namespace fs = std::filesystem;
  fs::path self = fs::absolute(fs::path(o.argv0)).parent_path();
  for (fs::path p : {self / "dtrun", self / "runtime" / "dtrun", self.parent_path() / "runtime" / "dtrun"})
    if (access(p.c_str(), X_OK) == 0) return p.string();
  return (self / "runtime" / "dtrun").string();
}

}  // namespace

int RunValidateExecute(const ValidateOptions& o) {
  CommonOptions common = o.common;
  if (!o.profile.empty()) common.profile = o.profile;
  auto setup = LoadSetup(common);
  if (!setup.ok()) return Fail(setup.status().message());
  const auto& [model, cluster, hw, setup_note] = *setup;
  // --speed-check: checked before the search, run beside every plan.
  std::vector<std::string> speed_check;
  if (o.speed_check) {
    std::string why;
    if (cluster.device != "cpu") why = "it re-measures a CPU profile's whole-step checks; use --device cpu";
    else if (hw.compute.step_checks.empty() || hw.machine.ranks_per_node <= 0)
      why = "profile '" + hw.name + "' has no whole-step checks (only `dtplan profile --device cpu` writes them); "
            "measure one first";
    if (!why.empty()) return Fail("--speed-check: " + why);
    auto path = ProfilePath(common.profile.empty() ? hw.name : common.profile);  // the default LoadSetup chose
    if (!path.ok()) return Fail("--speed-check: " + path.status().message());
    std::error_code ec;  // this dtplan (argv[0] may be a bare name found on PATH)
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) self = std::filesystem::absolute(std::filesystem::path(o.argv0));
    speed_check = {self.string(), "profile", "--device", "cpu", "--speed-check",
                   std::filesystem::absolute(*path).string(), "--ranks", std::to_string(hw.machine.ranks_per_node),
                   "--no-progress"};
  }
  SearchConstraints k;
  k.seq_length = model.seq_length;
  k.global_batch = o.global_batch > 0 ? o.global_batch : 8LL * cluster.world();
  k.flash_attention = cluster.device != "cpu";
  k.dropout = true;
  if (Status s = ApplyDimensions(o.dims, &k); !s.ok()) return Fail(s.message());
  SearchOptions so;
  so.top = 100000;  // every fitting plan, ranked
  so.threads = o.threads;
  auto r = SearchPlans(model, cluster, hw, k, so);
  if (!r.ok()) return Fail(r.status().message());
  if (!setup_note.empty()) std::fprintf(stderr, "dtplan: note: %s\n", setup_note.c_str());
  // Plans dtrun executes (planner/spec/capabilities.h); for --device cpu the
  // search emitted no other.
  std::vector<RankedPlan> runnable;
  for (const auto& p : r->top)
    if (CheckExecutable(model, p.plan, RuntimeDeviceFor(cluster.device)).ok()) runnable.push_back(p);
  if (runnable.empty()) {
    std::string why = r->top.empty() ? "no plan fits" : CheckExecutable(model, r->top[0].plan,
                                                                        RuntimeDeviceFor(cluster.device)).message();
    return Fail("no plan to execute: " + why);
  }
  // Exactly min(--top, runnable) plans: the predicted best (for the
  // regret); then, while room remains, the best-ranked plan of each
  // schedule, recompute mode and ZeRO stage not yet run; then plans spread
  // over the ranking so fast and slow plans are compared.
  const size_t n = std::min<size_t>(o.top, runnable.size());
  std::vector<size_t> picked = {0};
  auto has = [&](size_t i) { return std::find(picked.begin(), picked.end(), i) != picked.end(); };
  auto cover = [&](auto key) {
    for (size_t i = 0; i < runnable.size() && picked.size() < n; ++i) {
      bool seen = false;
      for (size_t j : picked) seen |= key(runnable[j].plan) == key(runnable[i].plan);
      if (!seen) picked.push_back(i);
    }
  };
  cover([](const PlanSpec& p) { return static_cast<int>(p.schedule); });
  cover([](const PlanSpec& p) { return static_cast<int>(p.recompute); });
  cover([](const PlanSpec& p) { return p.zero_stage; });
  // Spread: evenly spaced ranks, each moved to the next one not yet picked.
  const size_t spread = n - std::min(n, picked.size());
  for (size_t s = 1; s <= spread; ++s) {
    size_t i = s * (runnable.size() - 1) / std::max<size_t>(spread, 1);
    while (has(i)) i = (i + 1) % runnable.size();
    picked.push_back(i);
  }
  std::sort(picked.begin(), picked.end());
  picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  std::vector<RankedPlan> chosen;
  for (size_t i : picked) chosen.push_back(runnable[i]);
  ExecuteOptions eo;
  eo.speed_check = speed_check;
  eo.dtrun = FindDtrun(o);
  eo.steps = o.steps;
  eo.rounds = o.rounds;
  eo.top = 0;
  eo.work_dir = o.work_dir;
  if (eo.work_dir.empty()) {
    char tmpl[] = "/tmp/dtplan-execute-XXXXXX";
    if (!mkdtemp(tmpl)) return Fail("cannot create a temporary directory; pass --work-dir");
    eo.work_dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(eo.work_dir, ec);
  }
  std::fprintf(stderr, "running %zu of %zu runnable plans (%lld fitting) with %s; files in %s\n",
               chosen.size(), runnable.size(), static_cast<long long>(r->fitting), eo.dtrun.c_str(),
               eo.work_dir.c_str());
  auto rep = ExecutePlans(model, cluster, hw, chosen, hw.name, eo);
  if (!rep.ok()) return Fail(rep.status().message());
  if (!o.report.empty()) {
    Status w = WriteTextFile(o.report, ExecuteHtml(*rep, model, cluster, hw.name));
    if (!w.ok()) return Fail("--report: " + w.message());
    std::fprintf(stderr, "wrote report %s\n", o.report.c_str());
  }
  if (o.json) {
    std::cout << ToJson(*rep).dump(2) << "\n";
  } else {
    std::printf("%-52s %10s %10s %7s %9s %9s %7s  %s\n", "plan (predicted order)", "pred s", "meas s", "err",
                "pred MiB", "meas MiB", "err", "worst stage");
    for (const auto& e : rep->plans) {
      if (!e.ok) {
        std::printf("%-52s FAILED: %s\n", Describe(e.plan).c_str(), e.error.c_str());
        continue;
      }
      std::printf("%-52s %10.4f %10.4f %+6.1f%% %9.1f %9.1f %+6.1f%%", Describe(e.plan).c_str(),
                  e.predicted.step_time_s, e.measured_step_s, 100 * e.time_error,
                  e.predicted_peak_bytes / 1048576.0, e.measured_peak_bytes / 1048576.0, 100 * e.memory_error);
      if (e.worst_stage >= 0 && e.stage_measured_bytes.size() > 1)
        std::printf("  stage %d %+.1f%%", e.worst_stage, 100 * e.worst_stage_error);
      std::printf("\n");
    }
    std::printf("\nstep time: MAPE %.1f%%, max error %.1f%%, Spearman %.3f; peak memory per stage: max error %.1f%%; "
                "regret of the chosen plan %.1f%%; %d failed\n",
                100 * rep->time_mape, 100 * rep->time_max_error, rep->spearman, 100 * rep->memory_max_error,
                100 * rep->regret, rep->failed);
    if (rep->speed_checked) {
      std::string rounds;
      for (double s : rep->round_median_speed) rounds += (rounds.empty() ? "" : " / ") + std::to_string(s).substr(0, 5);
      std::printf("machine speed beside the runs (speed check: the profile's whole-step checks now against when "
                  "profiled): median %.3fx, range %.3f-%.3fx, per round %s\n"
                  "step time at the profile's machine speed (each run x its round's median speed): MAPE %.1f%%, "
                  "max error %.1f%%, Spearman %.3f, regret %.1f%%\n",
                  rep->median_speed, rep->min_speed, rep->max_speed, rounds.c_str(), 100 * rep->adjusted_time_mape,
                  100 * rep->adjusted_time_max_error, rep->adjusted_spearman, 100 * rep->adjusted_regret);
    }
  }
  return rep->failed == static_cast<int>(rep->plans.size()) ? 1 : 0;
}

}  // namespace dt::cli
