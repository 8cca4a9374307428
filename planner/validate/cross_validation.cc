#include "planner/validate/cross_validation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/validate/run_validation.h"

namespace dt {
namespace {

constexpr const char* kA100 = "A100-SXM4-80GB";
constexpr const char* kH100 = "H100-SXM5-80GB";

// Sets the GEMM efficiency at the curve's points of x >= 17 GFLOP per call
// (the large-GEMM end) to y[i]; the small-GEMM fall-off is left alone.
void SetLargeGemmPoints(HardwareProfile* p, const std::vector<double>& y) {
  Curve& c = p->compute.gemm_efficiency;
  size_t j = 0;
  for (size_t i = 0; i < c.size() && j < y.size(); ++i)
    if (c.x[i] >= 17e9) c.y[i] = y[j++];
}

// Scales the profile's own large-GEMM points (x >= 17 GFLOP per call) by v,
// at most to the peak: their shipped values are the source values.
void ScaleLargeGemmPoints(HardwareProfile* p, double v) {
  Curve& c = p->compute.gemm_efficiency;
  for (size_t i = 0; i < c.size(); ++i)
    if (c.x[i] >= 17e9) c.y[i] = std::min(1.0, c.y[i] * v);
}

// Sum of absolute relative errors, of their squares, and count, per source.
struct ErrorSum {
  double sum = 0;
  double sumsq = 0;
  int n = 0;
};
using SourceErrors = std::map<std::string, ErrorSum>;

double MapeOf(const ErrorSum& e) { return e.n > 0 ? e.sum / e.n : 0.0; }

// Squared standard error of a source's MAPE (the sample variance of its
// cases' absolute errors over their count); 0 for fewer than two cases.
double MapeVariance(const ErrorSum& e) {
  if (e.n < 2) return 0.0;
  const double mean = e.sum / e.n;
  const double var = std::max(0.0, (e.sumsq - e.n * mean * mean) / (e.n - 1));
  return var / e.n;
}

// How far a setting lies from the source values: per knob, the distance in
// units of the knob's grid span, summed.
double DistanceFromSource(const std::vector<const CvKnob*>& ks, const std::vector<double>& setting) {
  double d = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    const auto [lo, hi] = std::minmax_element(ks[i]->grid.begin(), ks[i]->grid.end());
    const double span = *hi > *lo ? *hi - *lo : 1.0;
    d += std::fabs(setting[i] - ks[i]->source_value) / span;
  }
  return d;
}

// Every combination of the knobs' grid values (first knob slowest), plus the
// source values as the last setting.
std::vector<std::vector<double>> Settings(const std::vector<const CvKnob*>& ks) {
  std::vector<std::vector<double>> out(1);
  for (const CvKnob* k : ks) {
    std::vector<std::vector<double>> next;
    for (const auto& partial : out)
      for (double v : k->grid) {
        next.push_back(partial);
        next.back().push_back(v);
      }
    out = std::move(next);
  }
  std::vector<double> src;
  for (const CvKnob* k : ks) src.push_back(k->source_value);
  out.push_back(src);
  return out;
}

StatusOr<SourceErrors> Score(const std::vector<ValidationCase>& cases,
                             const std::map<std::string, HardwareProfile>& profiles, int threads) {
  ValidationOptions vo;
  vo.profiles = &profiles;
  vo.threads = threads;
  DT_ASSIGN_OR_RETURN(ValidationReport rep, RunValidation(cases, vo));
  SourceErrors e;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseResult& r = rep.cases[i];
    if (!r.skipped.empty()) continue;
    ErrorSum& s = e[cases[i].source];
    s.sum += std::fabs(r.error);
    s.sumsq += r.error * r.error;
    ++s.n;
  }
  return e;
}

}  // namespace

std::vector<CvKnob> CalibratedKnobs() {
  std::vector<CvKnob> k;
  k.push_back({kA100, "host_overhead_s", {0, 20e-6, 40e-6, 60e-6, 80e-6, 100e-6, 120e-6, 140e-6, 160e-6, 200e-6}, 60e-6,
               "eager PyTorch GPT layer, forward + backward, on one H100's host: 52-68 us of host time per "
               "modeled op (profiles/sources/h100-host-overhead-2026-11-27.json; no A100-era measurement published)",
               [](HardwareProfile* p, double v) { p->compute.host_overhead_s = v; }});
  k.push_back({kA100, "gemm_plateau", {0.58, 0.62, 0.66, 0.70, 0.74}, 0.74,
               "large bf16 GEMMs at 230 of 312 TFLOP/s (profile sources.transformers_benchmarks)",
               [](HardwareProfile* p, double v) { SetLargeGemmPoints(p, {v, v, v}); }});
  // H100's large-GEMM points are scaled together from their measured values
  // (the bundled profile's, so the values are written once).
  k.push_back({kH100, "gemm_scale", {0.85, 0.90, 0.95, 1.0, 1.05, 1.10, 1.15, 1.20}, 1.0,
               "bf16 layer GEMMs measured on one H100 at its 700 W cap, sustained: 0.64 / 0.67 / 0.67 of peak at "
               "17 / 140 / 1100 GFLOP per call (sources.h100_measured_2026_11_27)",
               [](HardwareProfile* p, double v) { ScaleLargeGemmPoints(p, v); }});
  // H100's attention: the measured curve over the keys per query row, scaled.
  k.push_back({kH100, "attention_scale", {0.8, 0.9, 1.0, 1.1, 1.2}, 1.0,
               "FlashAttention-2 forward+backward measured on one H100 by sequence length, causal and "
               "non-causal (sources.h100_measured_2026_11_27)",
               [](HardwareProfile* p, double v) {
                 p->compute.attention_efficiency = std::min(1.0, p->compute.attention_efficiency * v);
                 // The kernel's causal and non-causal curves (CP rings) together.
                 for (Curve* c : {&p->compute.attention_efficiency_by_keys, &p->compute.attention_noncausal_by_keys})
                   for (double& y : c->y) y = std::min(1.0, y * v);
               }});
  return k;
}

StatusOr<CvReport> CrossValidate(const std::vector<ValidationCase>& cases, const std::vector<CvKnob>& knobs,
                                 int threads) {
  CvReport rep;
  // Cases by profile; sources in first-seen order.
  std::map<std::string, std::vector<ValidationCase>> by_profile;
  std::vector<std::string> sources;
  for (const ValidationCase& c : cases) {
    if (!c.invalid.empty() || !c.not_modeled.empty()) continue;
    by_profile[c.profile].push_back(c);
    bool seen = false;
    for (const auto& s : sources) seen = seen || s == c.source;
    if (!seen) sources.push_back(c.source);
  }
  std::map<std::string, HardwareProfile> base;
  for (const auto& [name, unused] : by_profile) {
    DT_ASSIGN_OR_RETURN(HardwareProfile hw, LoadProfile(name));
    base.emplace(name, std::move(hw));
  }

  // Shipped profiles.
  SourceErrors shipped;
  for (const auto& [name, cs] : by_profile) {
    DT_ASSIGN_OR_RETURN(SourceErrors e, Score(cs, base, threads));
    for (const auto& [s, v] : e) {
      shipped[s].sum += v.sum;
      shipped[s].n += v.n;
    }
  }

  // Per profile: the errors of every setting of its knobs, per source.
  struct Table {
    std::vector<const CvKnob*> knobs;
    std::vector<std::vector<double>> settings;
    std::vector<SourceErrors> errors;  // per setting
  };
  std::map<std::string, Table> tables;
  for (const auto& [name, cs] : by_profile) {
    Table& t = tables[name];
    for (const CvKnob& k : knobs)
      if (k.profile == name) t.knobs.push_back(&k);
    t.settings = Settings(t.knobs);
    for (const auto& setting : t.settings) {
      std::map<std::string, HardwareProfile> profs = base;
      for (size_t i = 0; i < t.knobs.size(); ++i) t.knobs[i]->apply(&profs.at(name), setting[i]);
      DT_ASSIGN_OR_RETURN(SourceErrors e, Score(cs, profs, threads));
      t.errors.push_back(std::move(e));
      ++rep.settings_evaluated;
    }
  }

  // The setting of each profile fitted without `left_out` ("" = none left
  // out). The objective is the mean over the remaining sources of their MAPE;
  // its standard error comes from the spread of each source's case errors.
  // One-standard-error rule (Hastie, Tibshirani and Friedman, The Elements
  // of Statistical Learning, 2nd ed., section 7.10): of the settings whose
  // objective is within one standard error of the least, the one nearest
  // the source values is taken (then the lower objective, then the first),
  // so a knob the remaining data cannot pin down keeps its cited value
  // instead of drifting to wherever noise puts the minimum. The source
  // values (last setting) when no source remains.
  auto fit = [&](const std::string& left_out) {
    std::map<std::string, size_t> choice;
    for (const auto& [name, t] : tables) {
      const size_t n_set = t.settings.size();
      std::vector<double> obj(n_set, std::numeric_limits<double>::infinity()), se(n_set, 0.0);
      size_t best = 0;
      for (size_t i = 0; i < n_set; ++i) {
        double sum = 0, var = 0;
        int n = 0;
        for (const auto& [s, e] : t.errors[i])
          if (s != left_out && e.n > 0) sum += MapeOf(e), var += MapeVariance(e), ++n;
        if (n == 0) continue;
        obj[i] = sum / n;
        se[i] = std::sqrt(var) / n;
        if (obj[i] < obj[best]) best = i;
      }
      if (!std::isfinite(obj[best])) {
        choice[name] = n_set - 1;
        continue;
      }
      const double limit = obj[best] + se[best];
      size_t pick = best;
      double pick_d = DistanceFromSource(t.knobs, t.settings[best]);
      for (size_t i = 0; i < n_set; ++i) {
        if (!(obj[i] <= limit)) continue;
        const double d = DistanceFromSource(t.knobs, t.settings[i]);
        if (d < pick_d - 1e-12 || (std::fabs(d - pick_d) <= 1e-12 && obj[i] < obj[pick])) pick = i, pick_d = d;
      }
      choice[name] = pick;
    }
    return choice;
  };
  auto source_mape = [&](const std::map<std::string, size_t>& choice, const std::string& s) {
    ErrorSum total;
    for (const auto& [name, t] : tables) {
      auto it = t.errors[choice.at(name)].find(s);
      if (it == t.errors[choice.at(name)].end()) continue;
      total.sum += it->second.sum;
      total.n += it->second.n;
    }
    return total;
  };
  auto knob_values = [&](const std::map<std::string, size_t>& choice) {
    std::map<std::string, double> v;
    for (const auto& [name, t] : tables)
      for (size_t i = 0; i < t.knobs.size(); ++i)
        v[name + "." + t.knobs[i]->name] = t.settings[choice.at(name)][i];
    return v;
  };

  const auto all = fit("");
  rep.fit_knobs = knob_values(all);
  for (const std::string& s : sources) {
    CvSource out;
    out.name = s;
    const auto without = fit(s);
    const ErrorSum f = source_mape(all, s), l = source_mape(without, s);
    out.cases = f.n;
    out.shipped_mape = MapeOf(shipped[s]);
    out.fit_mape = MapeOf(f);
    out.left_out_mape = MapeOf(l);
    out.left_out_knobs = knob_values(without);
    rep.mean_shipped += out.shipped_mape / sources.size();
    rep.mean_fit += out.fit_mape / sources.size();
    rep.mean_left_out += out.left_out_mape / sources.size();
    rep.sources.push_back(std::move(out));
  }
  return rep;
}

}  // namespace dt
