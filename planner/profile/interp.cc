#include "planner/profile/interp.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dt {
namespace {
double To(double v, Scale s) { return s == Scale::kLog ? std::log(v) : v; }
double From(double v, Scale s) { return s == Scale::kLog ? std::exp(v) : v; }
}  // namespace

InterpResult Interpolate(const Curve& c, double x, Scale x_scale, Scale y_scale) {
  DT_CHECK(!c.x.empty() && c.x.size() == c.y.size()) << "Interpolate on an invalid curve";
  InterpResult r;
  if (x <= c.x.front()) {
    r.value = c.y.front();
    r.below = r.clamped = x < c.x.front();
    return r;
  }
  if (x >= c.x.back()) {
    r.value = c.y.back();
    r.above = r.clamped = x > c.x.back();
    return r;
  }
  // First point with x_i > x; x lies in [x_{i-1}, x_i).
  size_t i = std::upper_bound(c.x.begin(), c.x.end(), x) - c.x.begin();
  double x0 = To(c.x[i - 1], x_scale), x1 = To(c.x[i], x_scale);
  double y0 = To(c.y[i - 1], y_scale), y1 = To(c.y[i], y_scale);
  double t = (To(x, x_scale) - x0) / (x1 - x0);
  t = std::min(1.0, std::max(0.0, t));
  r.value = From(y0 + t * (y1 - y0), y_scale);
  // exp(log(y)) can differ from y in the last bit; keep exactness at points
  // and monotonicity by clamping into the segment's value range.
  double lo = std::min(c.y[i - 1], c.y[i]), hi = std::max(c.y[i - 1], c.y[i]);
  r.value = std::min(hi, std::max(lo, r.value));
  if (t == 0.0) r.value = c.y[i - 1];
  return r;
}

Status ValidateCurve(const Curve& c, const std::string& where, bool positive_x, bool positive_y) {
  if (c.x.empty()) return InvalidArgument(where + ": needs at least one [x, y] point");
  if (c.x.size() != c.y.size()) return InvalidArgument(where + ": x and y lengths differ");
  for (size_t i = 0; i < c.x.size(); ++i) {
    std::ostringstream at;
    at << where << ": point " << i << " [" << c.x[i] << ", " << c.y[i] << "]";
    if (!std::isfinite(c.x[i]) || !std::isfinite(c.y[i]))
      return InvalidArgument(at.str() + " is not finite");
    if (positive_x && c.x[i] <= 0) return InvalidArgument(at.str() + ": x must be > 0");
    if (positive_y && c.y[i] <= 0) return InvalidArgument(at.str() + ": y must be > 0");
    if (i > 0 && c.x[i] <= c.x[i - 1])
      return InvalidArgument(at.str() + ": x must be strictly increasing; sort the points");
  }
  return Status::Ok();
}

}  // namespace dt
