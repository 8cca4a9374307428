#include "runtime/cli/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace dt::rt {

double ModelFlopsPerStep(const ModelSpec& m, const PlanSpec& p) {
  const double b = static_cast<double>(p.global_batch());
  const double s = p.seq_length, h = m.hidden, f = m.ffn_hidden, v = m.vocab;
  const double layer_fwd = 2.0 * b * s * (4.0 * h * h + 2.0 * h * f) + 4.0 * b * s * s * h;
  const double head_fwd = 2.0 * b * s * h * v;
  return 3.0 * (m.num_layers * layer_fwd + head_fwd);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string MetricsJsonLine(const RankStepMetrics& r) {
  json j{{"rank", r.rank},
         {"step", r.step},
         {"loss", r.loss},
         {"step_time_s", r.step_time_s},
         {"tokens_per_s", r.tokens_per_s},
         {"flops_per_s", r.flops_per_s},
         {"peak_bytes", r.peak_bytes},
         {"grad_norm", r.grad_norm}};
  return j.dump();
}

std::string FormatBytes(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024));
  return buf;
}

namespace {
std::string Si(double x) {
  char buf[32];
  if (x >= 1e12) std::snprintf(buf, sizeof buf, "%.2f T", x / 1e12);
  else if (x >= 1e9) std::snprintf(buf, sizeof buf, "%.2f G", x / 1e9);
  else if (x >= 1e6) std::snprintf(buf, sizeof buf, "%.2f M", x / 1e6);
  else if (x >= 1e3) std::snprintf(buf, sizeof buf, "%.2f k", x / 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f ", x);
  return buf;
}
}  // namespace

std::string StepLine(int64_t step, int64_t total_steps, double loss, double lr, double grad_norm,
                     double step_time_s, double tokens_per_s, double flops_per_s, int64_t peak_bytes) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %5lld/%lld | loss %.6f | lr %.3e | norm %.4f | %8.1f ms | %stok/s | %sFLOP/s | "
                "peak %s",
                static_cast<long long>(step), static_cast<long long>(total_steps), loss, lr, grad_norm,
                step_time_s * 1e3, Si(tokens_per_s).c_str(), Si(flops_per_s).c_str(),
                FormatBytes(static_cast<double>(peak_bytes)).c_str());
  return buf;
}

std::string SummaryText(const RunSummary& s, const json& prediction) {
  std::ostringstream os;
  char buf[256];
  os << "summary: " << s.steps_run << " steps, final loss " << s.final_loss << "\n";
  const bool has_pred = prediction.is_object();
  double pred_t = has_pred ? prediction.value("step_time_s", 0.0) : 0.0;
  std::snprintf(buf, sizeof buf, "  step time    measured median %.4f s (excl. first step)", s.median_step_time_s);
  os << buf;
  if (pred_t > 0) {
    std::snprintf(buf, sizeof buf, " | predicted %.4f s | measured/predicted %.2f", pred_t,
                  s.median_step_time_s / pred_t);
    os << buf;
  }
  os << "\n";
  std::snprintf(buf, sizeof buf, "  throughput   %stok/s, %sFLOP/s (model FLOPs)", Si(s.median_tokens_per_s).c_str(),
                Si(s.median_flops_per_s).c_str());
  os << buf;
  if (has_pred && prediction.value("tokens_per_s", 0.0) > 0)
    os << " | predicted " << Si(prediction.value("tokens_per_s", 0.0)) << "tok/s";
  os << "\n";
  os << "  peak memory  measured " << FormatBytes(static_cast<double>(s.peak_bytes)) << " (max over ranks)";
  if (has_pred && prediction.value("peak_memory_bytes", 0.0) > 0)
    os << " | predicted " << FormatBytes(prediction.value("peak_memory_bytes", 0.0));
  os << "\n";
  const json stages = has_pred && prediction.contains("memory_per_stage") ? prediction["memory_per_stage"] : json();
  for (size_t st = 0; st < s.measured_stage_peak.size(); ++st) {
    os << "    stage " << st << ": measured " << FormatBytes(static_cast<double>(s.measured_stage_peak[st]));
    if (stages.is_array() && st < stages.size() && stages[st].is_object()) {
      const json& p = stages[st];
      const double total = p.value("total_bytes", 0.0), reserved = p.value("reserved_bytes", 0.0);
      os << " | predicted " << FormatBytes(total) << " (" << FormatBytes(total - reserved)
         << " without the " << FormatBytes(reserved) << " framework reserve: weights "
         << FormatBytes(p.value("weights_bytes", 0.0)) << ", grads " << FormatBytes(p.value("gradients_bytes", 0.0))
         << ", optimizer " << FormatBytes(p.value("optimizer_bytes", 0.0)) << ", activations "
         << FormatBytes(p.value("activations_bytes", 0.0)) << ")";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace dt::rt
