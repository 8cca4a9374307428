#include "planner/cli/html_report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "planner/cli/html_util.h"
#include "planner/cli/report.h"
#include "planner/validate/published_accuracy.h"

namespace dt::cli {
namespace {

const char* CategoryColor(const std::string& cat) {
  static const std::map<std::string, const char*> colors = {
      {"compute", "#4878d0"}, {"recompute", "#9bb7ea"}, {"tp-comm", "#ee854a"}, {"p2p", "#6acc64"},
      {"dp-comm", "#d65f5f"}, {"optimizer", "#956cb4"}};
  auto it = colors.find(cat);
  return it == colors.end() ? "#8c8c8c" : it->second;
}

std::string RankTable(const SearchResult& r) {
  std::string h = "<table class=\"rank\"><tr><th>rank</th><th>dp</th><th>tp</th><th>pp</th><th>cp</th><th>vpp</th><th>mbs</th>"
                  "<th>microbatches</th><th>schedule</th><th>recompute</th><th>SP</th><th>ZeRO</th>"
                  "<th>step (s)</th><th>tokens/s</th><th>MFU</th><th>peak GiB / capacity</th></tr>\n";
  int rank = 0;
  for (const RankedPlan& rp : r.top) {
    const PlanSpec& p = rp.plan;
    const Prediction& pr = rp.prediction;
    // Expert parallelism (MoE) splits experts inside dp: shown there.
    const std::string dp = std::to_string(p.dp) + (p.ep > 1 ? " (ep " + std::to_string(p.ep) +
                                                   (p.expert_folded() ? " etp " + std::to_string(p.expert_tp()) : "") +
                                                   ")"
                                                 : "");
    h += "<tr><td>" + std::to_string(++rank) + "</td><td>" + dp + "</td><td>" +
         std::to_string(p.tp) + "</td><td>" + std::to_string(p.pp) + "</td><td>" + std::to_string(p.cp) +
         "</td><td>" + std::to_string(p.vpp) + "</td><td>" + std::to_string(p.micro_batch) + "</td><td>" +
         std::to_string(p.num_microbatches) + "</td><td>" + ToString(p.schedule) + "</td><td>" +
         ToString(p.recompute) + "</td><td>" + (p.sequence_parallel ? "on" : "off") + "</td><td>" +
         std::to_string(p.zero_stage) + "</td><td>" + Fmt("%.3f", pr.step_time_s) + "</td><td>" +
         Fmt("%.0f", pr.tokens_per_s) + "</td><td>" + Fmt("%.1f%%", 100 * pr.mfu) + "</td><td>" +
         Gib(pr.peak_memory_bytes) + " / " + Gib(pr.capacity_bytes) + "</td></tr>\n";
  }
  return h + "</table>\n";
}

std::string RejectionBars(const SearchResult& r) {
  std::vector<std::pair<std::string, int64_t>> rows;
  for (const auto* m : {&r.grid_rejects, &r.plan_rejects})
    for (const auto& kv : *m) rows.push_back(kv);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (rows.empty()) return "<p>No plan was rejected.</p>\n";
  const int64_t most = rows.front().second;
  const int bar_w = 420, row_h = 22, label_w = 560;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(label_w + bar_w + 90) +
                  "\" height=\"" + std::to_string(rows.size() * row_h + 4) + "\">\n";
  int y = 0;
  for (const auto& [why, n] : rows) {
    const double w = std::max(1.0, bar_w * static_cast<double>(n) / most);
    s += "<text x=\"0\" y=\"" + std::to_string(y + 15) + "\" font-size=\"12\">" + Esc(why.substr(0, 90)) + "</text>";
    s += "<rect x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + Fmt("%.1f", w) +
         "\" height=\"16\" fill=\"#d65f5f\"/>";
    s += "<text x=\"" + Fmt("%.1f", label_w + w + 6) + "\" y=\"" + std::to_string(y + 15) + "\" font-size=\"12\">" +
         std::to_string(n) + "</text>\n";
    y += row_h;
  }
  return s + "</svg>\n";
}

// One row per (stage process, stream thread) of the trace, one pixel column
// per 1/900 of the step coloured by its busiest category.
std::string Timeline(const json& trace, double step_s) {
  if (!trace.is_object() || !trace.contains("traceEvents")) return "<p>No timeline.</p>\n";
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  struct Ev { double t0, t1; std::string cat; };
  std::map<std::pair<int, int>, std::vector<Ev>> rows;
  double end_us = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", 0), tid = e.value("tid", 0);
    if (ph == "M" && e.value("name", "") == "process_name") process_names[pid] = e["args"].value("name", "");
    if (ph == "M" && e.value("name", "") == "thread_name") thread_names[{pid, tid}] = e["args"].value("name", "");
    if (ph != "X") continue;
    const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
    rows[{pid, tid}].push_back({ts, ts + dur, e.value("cat", "")});
    end_us = std::max(end_us, ts + dur);
  }
  if (rows.empty() || end_us <= 0) return "<p>No timeline.</p>\n";
  const int label_w = 290, plot_w = 900, row_h = 16;
  const double px_per_us = plot_w / end_us;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(label_w + plot_w + 10) +
                  "\" height=\"" + std::to_string(rows.size() * row_h + 30) + "\">\n";
  int y = 0;
  int last_pid = -1;
  for (auto& [key, evs] : rows) {
    std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.t0 < b.t0; });
    std::string label = thread_names[key];
    if (key.first != last_pid) label = process_names[key.first] + ": " + label;
    last_pid = key.first;
    s += "<text x=\"0\" y=\"" + std::to_string(y + 12) + "\" font-size=\"10\">" + Esc(label.substr(0, 56)) + "</text>";
    // Per pixel column, the category busiest in it (idle when under 2% of
    // the column), as the bar; the next busiest (at least 2%) as a strip
    // along the bar's foot, so short ops interleaved with longer ones (TP
    // collectives between GEMMs) stay visible. Runs of one category become
    // one rectangle.
    std::vector<std::map<std::string, double>> bins(plot_w);
    for (const Ev& e : evs) {
      const double a = e.t0 * px_per_us, b = e.t1 * px_per_us;
      for (int x = std::max(0, static_cast<int>(a)); x < plot_w && x < b; ++x)
        bins[x][e.cat] += std::min<double>(b, x + 1) - std::max<double>(a, x);
    }
    std::vector<std::string> first(plot_w + 1), second(plot_w + 1);
    for (int x = 0; x < plot_w; ++x) {
      double best = 0.02, next = 0.02;
      for (const auto& [k, v] : bins[x])
        if (v > best) next = best, second[x] = first[x], best = v, first[x] = k;
        else if (v > next) next = v, second[x] = k;
    }
    auto runs = [&](const std::vector<std::string>& cats, int top, int height) {
      std::string run_cat;
      int run_start = 0;
      for (int x = 0; x <= plot_w; ++x) {
        if (cats[x] == run_cat) continue;
        if (!run_cat.empty())
          s += "<rect x=\"" + std::to_string(label_w + run_start) + "\" y=\"" + std::to_string(top) + "\" width=\"" +
               std::to_string(x - run_start) + "\" height=\"" + std::to_string(height) + "\" fill=\"" +
               CategoryColor(run_cat) + "\"/>";
        run_cat = cats[x];
        run_start = x;
      }
    };
    runs(first, y + 2, row_h - 4);
    runs(second, y + row_h - 6, 4);
    s += "\n";
    y += row_h;
  }
  s += "<text x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 20) + "\" font-size=\"11\">0 s</text>";
  s += "<text x=\"" + std::to_string(label_w + plot_w - 60) + "\" y=\"" + std::to_string(y + 20) +
       "\" font-size=\"11\">" + Fmt("%.3f s", step_s) + "</text>\n";
  s += "</svg>\n<p class=\"legend\">";
  for (const char* cat : {"compute", "recompute", "tp-comm", "p2p", "dp-comm", "optimizer"})
    s += std::string("<span style=\"background:") + CategoryColor(cat) + "\">&nbsp;&nbsp;&nbsp;</span> " + cat + " &nbsp; ";
  return s + " &nbsp; (bar: the busiest kind per pixel column; strip at its foot: the next busiest)</p>\n";
}

std::string MemoryBars(const Prediction& pr) {
  struct Part { const char* name; const char* color; };
  const Part parts[] = {{"weights", "#4878d0"}, {"gradients", "#ee854a"}, {"optimizer", "#6acc64"},
                        {"activations", "#d65f5f"}, {"temporary", "#956cb4"}, {"fragmentation", "#bbbbbb"},
                        {"reserved", "#555555"}};
  const int label_w = 80, plot_w = 800, row_h = 22;
  double scale_max = pr.capacity_bytes;
  for (const StagePeak& sp : pr.stages) scale_max = std::max(scale_max, sp.memory.total);
  if (scale_max <= 0) return "";
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(label_w + plot_w + 120) +
                  "\" height=\"" + std::to_string(pr.stages.size() * row_h + 10) + "\">\n";
  int y = 0;
  for (const StagePeak& sp : pr.stages) {
    const StageMemory& m = sp.memory;
    const double frag = m.total - m.weights - m.gradients - m.optimizer - m.activations - m.temporary - m.reserved;
    const double vals[] = {m.weights, m.gradients, m.optimizer, m.activations, m.temporary, std::max(0.0, frag), m.reserved};
    s += "<text x=\"0\" y=\"" + std::to_string(y + 15) + "\" font-size=\"12\">stage " + std::to_string(sp.stage) + "</text>";
    double x = label_w;
    for (int i = 0; i < 7; ++i) {
      const double w = plot_w * vals[i] / scale_max;
      if (w <= 0) continue;
      s += "<rect x=\"" + Fmt("%.1f", x) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + Fmt("%.1f", w) +
           "\" height=\"16\" fill=\"" + parts[i].color + "\"><title>" + parts[i].name + " " + Gib(vals[i]) +
           " GiB</title></rect>";
      x += w;
    }
    s += "<text x=\"" + Fmt("%.1f", x + 6) + "\" y=\"" + std::to_string(y + 15) + "\" font-size=\"12\">" +
         Gib(m.total) + " GiB</text>\n";
    y += row_h;
  }
  const double cap_x = label_w + plot_w * pr.capacity_bytes / scale_max;
  s += "<line x1=\"" + Fmt("%.1f", cap_x) + "\" y1=\"0\" x2=\"" + Fmt("%.1f", cap_x) + "\" y2=\"" + std::to_string(y) +
       "\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n</svg>\n<p class=\"legend\">";
  for (const Part& p : parts)
    s += std::string("<span style=\"background:") + p.color + "\">&nbsp;&nbsp;&nbsp;</span> " + p.name + " &nbsp; ";
  return s + " &nbsp; dashed line: capacity " + Gib(pr.capacity_bytes) + " GiB</p>\n";
}

}  // namespace

std::string HtmlReport(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                       const SearchResult& r, const PlanSpec& best, const Prediction& best_pred,
                       const json& trace) {
  std::string h = HtmlHead("dtplan: " + m.name);
  h += "<h1>dtplan: " + Esc(m.name) + " on " + std::to_string(c.nodes) + " x " + std::to_string(c.gpus_per_node) +
       " " + Esc(c.device) + "</h1>\n";
  h += "<p>" + Esc(m.name) + ": " + Fmt("%.2f", m.TotalParams() / 1e9) + "B parameters, " +
       std::to_string(m.num_layers) + " layers, sequence " + std::to_string(best.seq_length) + ", global batch " +
       std::to_string(best.global_batch()) + ". Profile " + Esc(hw.name) + ". " +
       std::to_string(r.grids_considered) + " grids and " + std::to_string(r.plans_considered) +
       " plans considered, " + std::to_string(r.fitting) + " fit, " + std::to_string(r.simulated) +
       " simulated, " + std::to_string(r.pruned) + " pruned by a lower bound.</p>\n";
  h += "<h2>Ranked plans</h2>\n" + RankTable(r);
  h += "<h2>Rejections</h2>\n" + RejectionBars(r);
  h += "<h2>Best plan's step: " + Esc(Describe(best)) + "</h2>\n";
  const TimeBreakdown& t = best_pred.time;
  h += "<p>step " + Fmt("%.3f", best_pred.step_time_s) + " s = compute " + Fmt("%.3f", t.compute) + " + TP " +
       Fmt("%.3f", t.tp_exposed) + " + PP " + Fmt("%.3f", t.pp_exposed) + " + DP " + Fmt("%.3f", t.dp_exposed) +
       " + bubble " + Fmt("%.3f", t.bubble) + " + optimizer " + Fmt("%.3f", t.optimizer) +
       " (exposed times on the critical stage). One row per simulated stage and stream.</p>\n";
  if (m.moe()) h += "<p class=\"note\">" + Esc(MoeAccuracyNote()) + "</p>\n";
  if (const std::string n = LaunchBoundNote(best_pred, hw); !n.empty()) h += "<p class=\"note\">" + Esc(n) + "</p>\n";
  if (const std::string n = AttentionKernelNote(m, c, hw, best, best_pred); !n.empty())
    h += "<p class=\"note\">" + Esc(n) + "</p>\n";
  h += Timeline(trace, best_pred.step_time_s);
  h += "<h2>Memory per stage (best plan)</h2>\n" + MemoryBars(best_pred);
  h += "</body></html>\n";
  return h;
}

}  // namespace dt::cli
