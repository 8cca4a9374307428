#include "planner/profiler/speed_check.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "base/json_fields.h"
#include "planner/profile/profile.h"
#include "planner/profiler/bench_timer.h"
#include "planner/profiler/measure_compute.h"

namespace dt {
namespace {

constexpr double kMaxCheckSeconds = 0.015;

// "gpt-tiny training step mbs8" -> ("gpt-tiny", 8); false for other names.
bool ParseCheck(const std::string& what, std::string* model, int* mbs) {
  const std::string mid = " training step mbs";
  const size_t at = what.find(mid);
  if (at == std::string::npos) return false;
  *model = what.substr(0, at);
  const std::string n = what.substr(at + mid.size());
  if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) return false;
  *mbs = std::stoi(n);
  return *mbs > 0;
}

}  // namespace

int RunSpeedCheck(const ProfilerOptions& o, const ProfilerDevice& dev, rt::MpiComm& world,
                  const std::vector<ModelSpec>& models, int ranks_per_node) {
  const bool root = world.rank() == 0;
  auto fail = [&](const std::string& why) {
    if (root) std::cerr << "dtplan: error: --speed-check " << o.speed_check << ": " << why << "\n";
    return 2;
  };
  StatusOr<HardwareProfile> p = LoadProfile(o.speed_check);
  if (!p.ok()) return fail(p.status().message());
  if (p->machine.ranks_per_node > 0 && p->machine.ranks_per_node != ranks_per_node)
    return fail("measured with " + std::to_string(p->machine.ranks_per_node) + " ranks per node, this run has " +
                std::to_string(ranks_per_node) + "; use --ranks " + std::to_string(p->machine.ranks_per_node));
  // The checks to re-run, per model, in the profile's order.
  std::map<std::string, const ModelSpec*> by_name;
  for (const ModelSpec& m : models) by_name.emplace(m.name, &m);
  std::vector<std::pair<const StepCheck*, const ModelSpec*>> checks, cheapest;
  for (const StepCheck& c : p->compute.step_checks) {
    std::string name;
    int mbs = 0;
    // fp32 steps only: MeasureModelSteps below runs fp32 (the speed is the machine's either way).
    if (c.precision != "fp32" || c.measured_s <= 0 || !ParseCheck(c.what, &name, &mbs)) continue;
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    if (c.measured_s <= kMaxCheckSeconds) checks.emplace_back(&c, it->second);
    if (cheapest.empty() || c.measured_s < cheapest[0].first->measured_s) cheapest = {{&c, it->second}};
  }
  // A slow machine (or a sanitizer build) may have no check that short: then
  // the cheapest one alone.
  if (checks.empty()) checks = cheapest;
  if (checks.empty())
    return fail("the profile has no whole-step check of the models measured (it was not written by "
                "`dtplan profile --device cpu`, or with other --model files); re-profile");

  MeasureConfig cfg;
  cfg.be = dev.be;
  cfg.sync = &world;
  cfg.warmup = o.warmup;
  cfg.max_reps = o.reps;
  // As the profile timed its steps: on CPUs with every GEMM timed in the
  // step (run_profiler.cc), whose clock reads the recorded times include.
  cfg.time_gemms_in_step = dev.kind == "cpu";
  json out = json::array();
  std::vector<double> ratios;
  for (const auto& [check, model] : checks) {
    std::string name;
    int mbs = 0;
    ParseCheck(check->what, &name, &mbs);
    const int seq = o.seq_length > 0 ? o.seq_length : model->seq_length;
    std::vector<ModelSample> s = MeasureModelSteps(cfg, *model, seq, {mbs});
    if (s.empty() || s[0].seconds <= 0) continue;
    ratios.push_back(check->measured_s / s[0].seconds);
    out.push_back({{"what", check->what}, {"recorded_s", check->measured_s}, {"measured_s", s[0].seconds}});
  }
  if (ratios.empty()) return fail("no check could be measured");
  const double speed = Median(ratios);
  if (root) {
    json j = {{"speed_check", {{"profile", o.speed_check}, {"speed", speed}, {"checks", out}}}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace dt
