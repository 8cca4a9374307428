// CrossValidate: leave-one-source-out cross-validation of the few profile
// parameters that were calibrated against measurements (docs/validation.md,
// "What was calibrated"). For every source of cases (a paper, a benchmark
// suite, a CSV file), the calibrated parameters are refitted on the other
// sources only and the left-out source is scored with them; its error next
// to the error with parameters fitted on everything says whether the
// calibration generalizes or merely fits.
//
// The parameters ("knobs") are physical quantities with a source value:
// each is searched exhaustively over a fixed grid (jointly per GPU profile,
// since a case reads only its own GPU's profile). The objective is the mean
// over sources of each source's MAPE (every source weighs the same, however
// many cases it has); its standard error comes from the spread of each
// source's case errors. Of the settings within one standard error of the
// least objective, the one nearest the source values is taken (the
// one-standard-error rule), so a knob the fitting data cannot pin down keeps
// its cited value. A GPU with no cases left to fit keeps its source values
// (the numbers from the cited public sources, before any calibration).
// Deterministic: grids and sources are ordered; ties pick the lower
// objective, then the first setting. Errors: a profile that fails to load or
// a validation failure.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "planner/profile/profile.h"
#include "planner/validate/case.h"

namespace dt {

struct CvKnob {
  std::string profile;          // bundled profile it belongs to, e.g. "A100-SXM4-80GB"
  std::string name;             // e.g. "host_overhead_s"
  std::vector<double> grid;     // values tried, in order
  double source_value = 0;      // the uncalibrated value from the cited sources
  std::string source;           // where source_value comes from
  std::function<void(HardwareProfile*, double)> apply;
};

// The calibrated parameters of the bundled GPU profiles, with grids.
std::vector<CvKnob> CalibratedKnobs();

struct CvSource {
  std::string name;
  int cases = 0;             // scored cases
  double shipped_mape = 0;   // with the bundled profiles as shipped
  double fit_mape = 0;       // knobs fitted on all sources
  double left_out_mape = 0;  // knobs fitted without this source
  std::map<std::string, double> left_out_knobs;  // "profile.name" -> value fitted without it
};

struct CvReport {
  std::vector<CvSource> sources;
  std::map<std::string, double> fit_knobs;  // fitted on all sources
  double mean_shipped = 0, mean_fit = 0, mean_left_out = 0;  // means over sources
  int settings_evaluated = 0;
};

// `cases` may mix sources (ValidationCase::source) and GPUs; invalid and
// not-modeled cases are ignored. threads: as ValidationOptions.
StatusOr<CvReport> CrossValidate(const std::vector<ValidationCase>& cases, const std::vector<CvKnob>& knobs,
                                 int threads);

}  // namespace dt
