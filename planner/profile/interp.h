// Curve interpolation for hardware profiles: GEMM efficiency vs size,
// bus bandwidth vs message size, bandwidth vs group size.
//
// A Curve is a list of (x, y) points with strictly increasing x. Interpolate
// is piecewise-linear in the chosen scales (linear or logarithmic per axis):
// exact at every point, monotone between neighbouring points (each segment
// is a straight line, or a power law on log-log axes), and outside the
// measured range it returns the nearest end value with `clamped` set, so
// callers can report that a prediction extrapolates. Pure functions; no
// failure modes after ValidateCurve() accepted the curve.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace dt {

enum class Scale { kLinear, kLog };

struct Curve {
  std::vector<double> x;
  std::vector<double> y;
  bool empty() const { return x.empty(); }
  size_t size() const { return x.size(); }
  bool operator==(const Curve& o) const { return x == o.x && y == o.y; }
};

struct InterpResult {
  double value = 0;
  bool clamped = false;  // x was outside [x.front(), x.back()]
  bool below = false;    // x < x.front()
  bool above = false;    // x > x.back()
};

// Requires a validated, non-empty curve (DT_CHECK otherwise). With Scale::kLog
// on an axis, the values on that axis must be > 0 (and x > 0 for queries).
InterpResult Interpolate(const Curve& c, double x, Scale x_scale = Scale::kLinear,
                         Scale y_scale = Scale::kLinear);

// Checks: at least one point, x and y the same length, every value finite,
// x strictly increasing, and x > 0 / y > 0 where `positive_x` / `positive_y`.
// Errors name `where` (e.g. "profile 'a.json': compute.gemm_efficiency").
Status ValidateCurve(const Curve& c, const std::string& where, bool positive_x, bool positive_y);

}  // namespace dt
