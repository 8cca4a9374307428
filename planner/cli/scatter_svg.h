// ScatterSvg: an inline SVG plot of predicted against measured values, for
// `dtplan validate --report`. One marker per point (colour and shape by series), with
// a <title> tooltip (label, measured, predicted, error); the y = x line and
// a shaded +-10% band; axes with ticks, log-log when the values span more
// than a decade (always positive values then), linear otherwise.
//
// Pure formatting; non-finite or non-positive values are skipped (counted in
// the caption's "skipped"). Empty input gives a one-line "no points" SVG.
#pragma once

#include <string>
#include <vector>

namespace dt::cli {

struct ScatterPoint {
  double measured = 0, predicted = 0;
  std::string label;  // tooltip
  int series = 0;     // index into ScatterSpec::series
};

struct ScatterSpec {
  std::string quantity;             // "step time", axis titles: "measured step time (s)"
  std::string unit;                 // "s", "GiB"
  std::vector<std::string> series;  // legend; colours in order
};

std::string ScatterSvg(const ScatterSpec& spec, const std::vector<ScatterPoint>& points);

// The colour ScatterSvg gives series i (for legends drawn elsewhere).
const char* SeriesColor(int i);

}  // namespace dt::cli
