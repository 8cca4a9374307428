#include "planner/validate/execute.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "planner/spec/rank_grid.h"
#include "planner/validate/metrics.h"

namespace dt {
namespace {

// Runs argv with stdout+stderr to `log`; kills the process group after
// `timeout_s`. Returns the exit code (128+signal when killed by a signal).
StatusOr<int> RunChild(const std::vector<std::string>& argv, const std::string& log, double timeout_s) {
  pid_t pid = fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot exec %s\n", args[0]);
    _exit(127);
  }
  setpgid(pid, pid);
  auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string Tail(const std::string& path, size_t max_chars = 400) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > max_chars ? all.substr(all.size() - max_chars) : all;
}

// Step-time metrics of plans in predicted order (the first is the one
// dtplan would choose).
struct TimeScore {
  double mape = 0, max_error = 0, spearman = 0, regret = 0;
};
TimeScore ScoreTimes(const std::vector<double>& pred, const std::vector<double>& meas) {
  TimeScore t;
  if (pred.empty()) return t;
  t.mape = Mape(pred, meas);
  t.max_error = MaxApe(pred, meas);
  t.spearman = Spearman(pred, meas);
  t.regret = meas.front() / *std::min_element(meas.begin(), meas.end()) - 1;
  return t;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

StatusOr<double> ReadSpeedCheck(const std::string& log) {
  std::ifstream in(log);
  if (!in) return IoError("no speed-check output '" + log + "'");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("{\"speed_check\"", 0) != 0) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j["speed_check"].is_object() ||
        !j["speed_check"]["speed"].is_number())
      return InvalidArgument("bad speed-check line in '" + log + "': " + line.substr(0, 200));
    const double s = j["speed_check"]["speed"].get<double>();
    if (!(s > 0) || s > 100) return InvalidArgument("speed-check speed " + std::to_string(s) + " in '" + log + "'");
    return s;
  }
  return InvalidArgument("the speed check printed no result: " + Tail(log));
}

Status ReadMetrics(const std::string& path, const PlanSpec& p, ExecutedPlan* out) {
  std::ifstream in(path);
  if (!in) return IoError("no metrics file '" + path + "'");
  std::map<int, double> step_max;       // step -> max step time over ranks
  std::map<int, double> rank_peak;      // rank -> peak bytes
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument("bad metrics line in '" + path + "'");
    if (!j.contains("step") || !j.contains("rank")) continue;  // summary lines
    // Our own dtrun writes these; a file damaged or written by another
    // version is an error value, never a JSON type exception.
    const json& js = j["step"];
    const json& jr = j["rank"];
    auto number_or_absent = [&](const char* k) { return !j.contains(k) || j[k].is_number(); };
    if (!js.is_number_integer() || !jr.is_number_integer() || !number_or_absent("step_time_s") ||
        !number_or_absent("peak_bytes") || js.get<int64_t>() < 0 || js.get<int64_t>() > (1 << 30) ||
        jr.get<int64_t>() < 0 || jr.get<int64_t>() > (1 << 30))
      return InvalidArgument("bad metrics line in '" + path + "': step and rank must be small non-negative "
                             "integers, step_time_s and peak_bytes numbers: " + line.substr(0, 200));
    const int step = static_cast<int>(js.get<int64_t>()), rank = static_cast<int>(jr.get<int64_t>());
    double t = j.value("step_time_s", 0.0), peak = j.value("peak_bytes", 0.0);
    step_max[step] = std::max(step_max[step], t);
    rank_peak[rank] = std::max(rank_peak[rank], peak);
  }
  std::vector<double> times;
  for (const auto& [step, t] : step_max)
    if (step != step_max.begin()->first) times.push_back(t);  // first step warms up
  if (times.empty()) return InvalidArgument("metrics '" + path + "' has fewer than 2 steps");
  out->measured_step_s = Median(times);
  auto grid = RankGrid::Create(p.tp, p.cp, p.dp, p.pp, p.order);
  if (!grid.ok()) return grid.status();
  out->stage_measured_bytes.assign(p.pp, 0.0);
  for (const auto& [rank, peak] : rank_peak) {
    if (rank < 0 || rank >= grid->world()) continue;
    int stage = grid->CoordOf(rank).pp;
    out->stage_measured_bytes[stage] = std::max(out->stage_measured_bytes[stage], peak);
    out->measured_peak_bytes = std::max(out->measured_peak_bytes, peak);
  }
  return Status::Ok();
}

StatusOr<ExecuteReport> ExecutePlans(const ModelSpec& m, const ClusterSpec& c,
                                     const HardwareProfile& hw, const std::vector<RankedPlan>& plans,
                                     const std::string& profile_name, const ExecuteOptions& opt) {
  if (access(opt.dtrun.c_str(), X_OK) != 0)
    return NotFound("dtrun not found at '" + opt.dtrun + "'; build it (cmake --build build) or pass --dtrun");
  ExecuteReport rep;
  size_t n = opt.top > 0 ? std::min<size_t>(opt.top, plans.size()) : plans.size();
  const int rounds = std::max(1, opt.rounds);
  std::vector<ExecutedPlan> runs(n);
  for (size_t i = 0; i < n; ++i) {
    ExecutedPlan& e = runs[i];
    e.plan = plans[i].plan;
    e.predicted = plans[i].prediction;
    // The runtime's allocator counts tensor bytes only: compare without the
    // profile's reserved baseline (process / framework memory).
    for (const auto& s : e.predicted.stages) {
      e.stage_predicted_bytes.push_back(s.memory.total - s.memory.reserved);
      e.predicted_peak_bytes = std::max(e.predicted_peak_bytes, e.stage_predicted_bytes.back());
    }
    const std::string base = opt.work_dir + "/plan" + std::to_string(i);
    json pf = ToJson(PlanFile{m, c, e.plan, ToJson(e.predicted)});
    pf["profile"] = profile_name;
    DT_RETURN_IF_ERROR(WriteJsonFile(base + ".json", pf));
  }
  for (int round = 0; round < rounds; ++round) {
    for (size_t at = 0; at < n; ++at) {
      const size_t i = round % 2 == 0 ? at : n - 1 - at;  // odd rounds in reverse order
      ExecutedPlan& e = runs[i];
      if (!e.error.empty()) continue;  // failed in an earlier round
      const std::string base = opt.work_dir + "/plan" + std::to_string(i);
      const std::string run = round == 0 ? base : base + ".round" + std::to_string(round + 1);
      std::remove((run + ".jsonl").c_str());
      std::vector<std::string> argv = {opt.mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                                       std::to_string(e.plan.world()), opt.dtrun, "--plan", base + ".json",
                                       "--steps", std::to_string(opt.steps), "--metrics", run + ".jsonl"};
      if (opt.verbose)
        std::fprintf(stderr, "[%zu/%zu%s] running %s ...\n", i + 1, n,
                     rounds > 1 ? (", round " + std::to_string(round + 1) + "/" + std::to_string(rounds)).c_str() : "",
                     Describe(e.plan).c_str());
      double speed = 0;
      if (!opt.speed_check.empty()) {
        auto src = RunChild(opt.speed_check, run + ".speed.log", opt.timeout_s);
        if (!src.ok()) return src.status();
        if (*src != 0) return InvalidArgument("the speed check exited " + std::to_string(*src) + ": " + Tail(run + ".speed.log"));
        DT_ASSIGN_OR_RETURN(speed, ReadSpeedCheck(run + ".speed.log"));
      }
      auto rc = RunChild(argv, run + ".log", opt.timeout_s);
      if (!rc.ok()) return rc.status();
      ExecutedPlan r = e;
      if (*rc != 0) {
        e.error = "dtrun exited " + std::to_string(*rc) + (*rc == 124 ? " (timeout)" : "") + ": " + Tail(run + ".log");
      } else if (Status s = ReadMetrics(run + ".jsonl", e.plan, &r); !s.ok()) {
        e.error = s.message();
      } else {
        e.round_step_s.push_back(r.measured_step_s);
        e.run_round.push_back(round);
        if (speed > 0) e.round_speed.push_back(speed);
        e.measured_peak_bytes = std::max(e.measured_peak_bytes, r.measured_peak_bytes);
        e.stage_measured_bytes.resize(r.stage_measured_bytes.size(), 0.0);
        for (size_t s = 0; s < r.stage_measured_bytes.size(); ++s)
          e.stage_measured_bytes[s] = std::max(e.stage_measured_bytes[s], r.stage_measured_bytes[s]);
        if (opt.verbose)
          std::fprintf(stderr, "        measured %.4f s (predicted %.4f s), peak %.1f MiB (predicted %.1f MiB)%s\n",
                       r.measured_step_s, e.predicted.step_time_s, r.measured_peak_bytes / 1048576.0,
                       e.predicted_peak_bytes / 1048576.0,
                       speed > 0 ? (", machine at " + std::to_string(speed).substr(0, 5) + "x the profile's speed").c_str() : "");
      }
      if (!e.error.empty() && opt.verbose) std::fprintf(stderr, "        FAILED: %s\n", e.error.c_str());
    }
  }
  // Each round's machine speed: the median of its checks.
  std::vector<double> round_median(rounds, 0.0);
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> s;
    for (const ExecutedPlan& e : runs)
      for (size_t k = 0; k < e.round_speed.size() && k < e.run_round.size(); ++k)
        if (e.run_round[k] == round) s.push_back(e.round_speed[k]);
    round_median[round] = Median(s);
  }
  for (ExecutedPlan& e : runs) {
    e.ok = e.error.empty() && !e.round_step_s.empty();
    if (e.ok) {
      e.measured_step_s = Median(e.round_step_s);
      e.time_error = (e.predicted.step_time_s - e.measured_step_s) / e.measured_step_s;
      e.memory_error = e.measured_peak_bytes > 0
                           ? (e.predicted_peak_bytes - e.measured_peak_bytes) / e.measured_peak_bytes : 0;
      for (size_t s = 0; s < e.stage_measured_bytes.size() && s < e.stage_predicted_bytes.size(); ++s) {
        if (e.stage_measured_bytes[s] <= 0) continue;
        const double err = (e.stage_predicted_bytes[s] - e.stage_measured_bytes[s]) / e.stage_measured_bytes[s];
        if (e.worst_stage < 0 || std::abs(err) > std::abs(e.worst_stage_error)) {
          e.worst_stage = static_cast<int>(s);
          e.worst_stage_error = err;
        }
      }
      if (!opt.speed_check.empty() && e.round_speed.size() == e.round_step_s.size()) {
        std::vector<double> adjusted;
        for (size_t r = 0; r < e.round_step_s.size(); ++r)
          adjusted.push_back(e.round_step_s[r] * round_median[e.run_round[r]]);
        e.speed_adjusted_step_s = Median(adjusted);
        e.speed_adjusted_error = (e.predicted.step_time_s - e.speed_adjusted_step_s) / e.speed_adjusted_step_s;
      }
    } else {
      ++rep.failed;
    }
    rep.plans.push_back(std::move(e));
  }
  std::vector<double> pred, meas, ameas, speeds;  // plans are in predicted order
  bool all_checked = !opt.speed_check.empty();
  for (const auto& e : rep.plans) {
    if (!e.ok) continue;
    pred.push_back(e.predicted.step_time_s);
    meas.push_back(e.measured_step_s);
    ameas.push_back(e.speed_adjusted_step_s);
    if (e.speed_adjusted_step_s <= 0) all_checked = false;
    speeds.insert(speeds.end(), e.round_speed.begin(), e.round_speed.end());
    rep.memory_max_error = std::max(rep.memory_max_error, std::abs(e.worst_stage_error));
  }
  const TimeScore raw = ScoreTimes(pred, meas);
  rep.time_mape = raw.mape;
  rep.time_max_error = raw.max_error;
  rep.spearman = raw.spearman;
  rep.regret = raw.regret;
  // The same against the speed-adjusted times.
  if (all_checked && !pred.empty()) {
    const TimeScore adj = ScoreTimes(pred, ameas);
    rep.speed_checked = true;
    rep.round_median_speed = round_median;
    rep.median_speed = Median(speeds);
    rep.min_speed = *std::min_element(speeds.begin(), speeds.end());
    rep.max_speed = *std::max_element(speeds.begin(), speeds.end());
    rep.adjusted_time_mape = adj.mape;
    rep.adjusted_time_max_error = adj.max_error;
    rep.adjusted_spearman = adj.spearman;
    rep.adjusted_regret = adj.regret;
  }
  return rep;
}

json ToJson(const ExecuteReport& r) {
  json plans = json::array();
  for (const auto& e : r.plans) {
    json j = {{"plan", ToJson(e.plan)}, {"ok", e.ok}, {"predicted_step_s", e.predicted.step_time_s},
              {"predicted_peak_bytes", e.predicted_peak_bytes},
              {"stage_predicted_bytes", e.stage_predicted_bytes}};
    if (e.ok) {
      j["measured_step_s"] = e.measured_step_s;
      j["round_step_s"] = e.round_step_s;
      j["measured_peak_bytes"] = e.measured_peak_bytes;
      j["stage_measured_bytes"] = e.stage_measured_bytes;
      j["time_error"] = e.time_error;
      if (!e.round_speed.empty()) {
        j["round_speed"] = e.round_speed;
        j["speed_adjusted_step_s"] = e.speed_adjusted_step_s;
        j["speed_adjusted_error"] = e.speed_adjusted_error;
      }
      j["memory_error"] = e.memory_error;
      if (e.worst_stage >= 0) {
        j["worst_stage"] = e.worst_stage;
        j["worst_stage_memory_error"] = e.worst_stage_error;
      }
    } else {
      j["error"] = e.error;
    }
    plans.push_back(j);
  }
  json j{{"plans", plans},           {"time_mape", r.time_mape},
         {"time_max_error", r.time_max_error}, {"memory_max_error", r.memory_max_error},
         {"spearman", r.spearman},   {"regret", r.regret},
         {"failed", r.failed}};
  if (r.speed_checked)
    j["speed_check"] = {{"median_speed", r.median_speed}, {"min_speed", r.min_speed}, {"max_speed", r.max_speed},
                        {"round_median_speed", r.round_median_speed},
                        {"time_mape", r.adjusted_time_mape}, {"time_max_error", r.adjusted_time_max_error},
                        {"spearman", r.adjusted_spearman}, {"regret", r.adjusted_regret}};
  return j;
}

}  // namespace dt
