#include "planner/cli/validation_html.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "planner/cli/html_util.h"
#include "planner/cli/scatter_svg.h"

namespace dt::cli {
namespace {

std::string Pct(double v) { return Fmt("%.1f%%", 100 * v); }
std::string SignedPct(double v) { return Fmt("%+.1f%%", 100 * v); }

std::string Legend() {
  return "<p class=\"legend\">Dashed line: predicted = measured; shaded band: within &plusmn;10%. "
         "Hover a point for its case or plan and its values.</p>\n";
}

}  // namespace

std::string ValidationHtml(const ValidationReport& r, const std::string& source, const std::string& profile) {
  std::string h = HtmlHead("dtplan validate: " + source);
  h += "<h1>dtplan validate: predicted vs measured step time</h1>\n";
  h += "<p>" + std::to_string(r.scored) + " cases scored from <code>" + Esc(source) + "</code>, profile " +
       (profile.empty() ? std::string("of each case") : "<code>" + Esc(profile) + "</code>") + ": MAPE " + Pct(r.mape) +
       ", max error " + Pct(r.max_error) + ".</p>\n";
  // Cases that were not scored (invalid input, a setting not modeled): listed, never plotted.
  std::vector<const CaseResult*> skipped;
  for (const CaseResult& c : r.cases)
    if (!c.skipped.empty()) skipped.push_back(&c);
  // Series = model groups, in first-seen order.
  std::vector<std::string> groups;
  std::map<std::string, int> index;
  for (const CaseResult& c : r.cases)
    if (c.skipped.empty() && index.emplace(c.group, static_cast<int>(groups.size())).second) groups.push_back(c.group);
  std::vector<ScatterPoint> pts;
  for (const CaseResult& c : r.cases)
    if (c.skipped.empty()) pts.push_back({c.measured_s, c.predicted_s, c.id + " (" + Describe(c.plan) + ")", index[c.group]});
  ScatterSpec spec{"step time", "s", groups};
  h +=
      "<figure>" + ScatterSvg(spec, pts) + "<figcaption>One point per case, coloured by model.</figcaption></figure>\n";
  h += Legend();

  h += "<h2>Per model</h2>\n<table><tr><th>model</th><th>cases</th><th>MAPE</th><th>max error</th>"
       "<th>Spearman</th></tr>\n";
  for (const std::string& g : groups) {
    double sum = 0, worst = 0;
    int n = 0;
    for (const CaseResult& c : r.cases)
      if (c.skipped.empty() && c.group == g) sum += std::fabs(c.error), worst = std::max(worst, std::fabs(c.error)), ++n;
    auto rho = r.spearman.find(g);
    h += "<tr><td class=\"l\">" + Esc(g) + "</td><td>" + std::to_string(n) + "</td><td>" + Pct(n ? sum / n : 0) +
         "</td><td>" + Pct(worst) + "</td><td>" +
         (rho == r.spearman.end() ? std::string("(&lt; 3 cases)") : Fmt("%.3f", rho->second)) + "</td></tr>\n";
  }
  h += "</table>\n";

  std::vector<const CaseResult*> worst;
  for (const CaseResult& c : r.cases)
    if (c.skipped.empty()) worst.push_back(&c);
  std::sort(worst.begin(), worst.end(),
            [](const CaseResult* a, const CaseResult* b) { return std::fabs(a->error) > std::fabs(b->error); });
  if (worst.size() > 15) worst.resize(15);
  h += "<h2>Largest errors</h2>\n<table><tr><th>case</th><th>plan</th><th>measured (s)</th><th>predicted (s)</th>"
       "<th>error</th></tr>\n";
  for (const CaseResult* c : worst)
    h += "<tr><td class=\"l\">" + Esc(c->id) + "</td><td class=\"l\">" + Esc(Describe(c->plan)) +
         (c->searched ? " (searched)" : "") + (c->fits ? "" : " (predicted not to fit)") + "</td><td>" +
         Fmt("%.3f", c->measured_s) + "</td><td>" + Fmt("%.3f", c->predicted_s) + "</td><td>" + SignedPct(c->error) +
         "</td></tr>\n";
  h += "</table>\n";
  if (r.memory_scored > 0) {  // cases that give the allocator's measured peak
    h += "<h2>Peak allocated memory (pipeline rank 0)</h2>\n<p>" + std::to_string(r.memory_scored) +
         " case(s) give it: MAPE " + Pct(r.memory_mape) + ", max error " + Pct(r.memory_max_error) +
         ". Predicted: the stage's weights, gradients, optimizer states, activations and temporaries, without the "
         "reserve and the fragmentation allowance.</p>\n<table><tr><th>case</th><th>measured (GiB)</th>"
         "<th>predicted (GiB)</th><th>error</th></tr>\n";
    for (const CaseResult& c : r.cases)
      if (c.skipped.empty() && c.measured_allocated_bytes > 0)
        h += "<tr><td class=\"l\">" + Esc(c.id) + "</td><td>" + Fmt("%.1f", c.measured_allocated_bytes / 1073741824.0) +
             "</td><td>" + Fmt("%.1f", c.predicted_allocated_bytes / 1073741824.0) + "</td><td>" +
             SignedPct(c.memory_error) + "</td></tr>\n";
    h += "</table>\n";
  }
  if (!skipped.empty()) {
    h += "<h2>Not scored</h2>\n<table><tr><th>case</th><th>why</th></tr>\n";
    for (const CaseResult* c : skipped)
      h += "<tr><td class=\"l\">" + Esc(c->id) + "</td><td class=\"l\">" + (c->invalid ? "invalid: " : "") +
           Esc(c->skipped) + "</td></tr>\n";
    h += "</table>\n";
  }
  h += "</body></html>\n";
  return h;
}

std::string ExecuteHtml(const ExecuteReport& r, const ModelSpec& m, const ClusterSpec& c, const std::string& profile) {
  std::string h = HtmlHead("dtplan validate --execute: " + m.name);
  h += "<h1>dtplan validate --execute: " + Esc(m.name) + " on " + std::to_string(c.nodes) + " x " +
       std::to_string(c.gpus_per_node) + " " + Esc(c.device) + "</h1>\n";
  h += "<p>" + std::to_string(r.plans.size()) + " plans run with dtrun, profile <code>" + Esc(profile) +
       "</code>. Step time: MAPE " + Pct(r.time_mape) + ", max error " + Pct(r.time_max_error) + ", Spearman " +
       Fmt("%.3f", r.spearman) + "; regret of the plan dtplan would choose " + Pct(r.regret) +
       ". Peak memory per stage: max error " + Pct(r.memory_max_error) + ". " + std::to_string(r.failed) +
       " failed.</p>\n";
  std::vector<std::string> schedules;
  std::map<std::string, int> index;
  for (const ExecutedPlan& e : r.plans) {
    const std::string s = ToString(e.plan.schedule);
    if (index.emplace(s, static_cast<int>(schedules.size())).second) schedules.push_back(s);
  }
  std::vector<ScatterPoint> time_pts, mem_pts;
  for (const ExecutedPlan& e : r.plans) {
    if (!e.ok) continue;
    const int series = index[ToString(e.plan.schedule)];
    time_pts.push_back({e.measured_step_s, e.predicted.step_time_s, Describe(e.plan), series});
    for (size_t s = 0; s < e.stage_predicted_bytes.size() && s < e.stage_measured_bytes.size(); ++s)
      mem_pts.push_back({e.stage_measured_bytes[s] / 1048576.0, e.stage_predicted_bytes[s] / 1048576.0,
                         Describe(e.plan) + ", stage " + std::to_string(s), series});
  }
  h += "<figure>" + ScatterSvg({"step time", "s", schedules}, time_pts) +
       "<figcaption>One point per plan, coloured by schedule.</figcaption></figure>\n";
  h += "<figure>" + ScatterSvg({"peak memory", "MiB", schedules}, mem_pts) +
       "<figcaption>One point per plan and pipeline stage (max over the stage's ranks; without the reserved "
       "baseline).</figcaption></figure>\n";
  h += Legend();
  h += "<h2>Plans (predicted order)</h2>\n<table><tr><th>plan</th><th>predicted (s)</th><th>measured (s)</th>"
       "<th>error</th><th>predicted MiB</th><th>measured MiB</th><th>error</th><th>worst stage</th></tr>\n";
  for (const ExecutedPlan& e : r.plans) {
    h += "<tr><td class=\"l\">" + Esc(Describe(e.plan)) + "</td>";
    if (!e.ok) {
      h += "<td colspan=\"7\">failed: " + Esc(e.error) + "</td></tr>\n";
      continue;
    }
    h += "<td>" + Fmt("%.4f", e.predicted.step_time_s) + "</td><td>" + Fmt("%.4f", e.measured_step_s) + "</td><td>" +
         SignedPct(e.time_error) + "</td><td>" + Fmt("%.1f", e.predicted_peak_bytes / 1048576.0) + "</td><td>" +
         Fmt("%.1f", e.measured_peak_bytes / 1048576.0) + "</td><td>" + SignedPct(e.memory_error) + "</td><td>" +
         (e.worst_stage >= 0 ? std::to_string(e.worst_stage) + ": " + SignedPct(e.worst_stage_error) : "") +
         "</td></tr>\n";
  }
  h += "</table>\n</body></html>\n";
  return h;
}

}  // namespace dt::cli
