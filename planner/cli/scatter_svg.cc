#include "planner/cli/scatter_svg.h"

#include <algorithm>
#include <cmath>

#include "planner/cli/html_util.h"

namespace dt::cli {
namespace {

constexpr int kPlot = 440;            // square plot area, px
constexpr int kLeft = 70, kTop = 16;  // margins for tick labels
constexpr int kWidth = kLeft + kPlot + 20;
constexpr int kLegendRow = 16;

std::string Tick(double v) {
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 1e4 || a < 1e-3) return Fmt("%.0e", v);
  if (a >= 10) return Fmt("%.0f", v);
  if (a >= 1) return Fmt("%.3g", v);
  return Fmt("%.3g", v);
}

// Axis mapping: value -> pixel offset in [0, kPlot].
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;
  double Map(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return t * kPlot;
  }
  std::vector<double> Ticks() const {
    std::vector<double> t;
    if (log) {
      const int e0 = static_cast<int>(std::floor(std::log10(lo))), e1 = static_cast<int>(std::ceil(std::log10(hi)));
      const bool few_decades = e1 - e0 <= 3;
      for (int e = e0; e <= e1; ++e)
        for (double m : few_decades ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
          const double v = m * std::pow(10.0, e);
          if (v >= lo * 0.999 && v <= hi * 1.001) t.push_back(v);
        }
      return t;
    }
    const double raw = (hi - lo) / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (raw <= m * mag) {
        step = m * mag;
        break;
      }
    for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) t.push_back(v);
    return t;
  }
};

// Series i: colour i % 10, shape (i / 10) % 3 (circle, square, diamond),
// so up to 30 series stay distinguishable.
std::string Marker(int series, double x, double y, double r, const std::string& extra, const std::string& body) {
  const std::string fill = std::string(" fill=\"") + SeriesColor(series) + "\"" + extra;
  const std::string close = body.empty() ? "/>" : ">" + body;
  switch ((series / 10) % 3) {
    case 1:
      return "<rect x=\"" + Fmt("%.1f", x - r) + "\" y=\"" + Fmt("%.1f", y - r) + "\" width=\"" + Fmt("%.1f", 2 * r) +
             "\" height=\"" + Fmt("%.1f", 2 * r) + "\"" + fill + close + (body.empty() ? "" : "</rect>");
    case 2:
      return "<polygon points=\"" + Fmt("%.1f,", x) + Fmt("%.1f ", y - 1.3 * r) + Fmt("%.1f,", x + 1.3 * r) +
             Fmt("%.1f ", y) + Fmt("%.1f,", x) + Fmt("%.1f ", y + 1.3 * r) + Fmt("%.1f,", x - 1.3 * r) +
             Fmt("%.1f", y) + "\"" + fill + close + (body.empty() ? "" : "</polygon>");
    default:
      return "<circle cx=\"" + Fmt("%.1f", x) + "\" cy=\"" + Fmt("%.1f", y) + "\" r=\"" + Fmt("%.1f", r) + "\"" + fill +
             close + (body.empty() ? "" : "</circle>");
  }
}

}  // namespace

const char* SeriesColor(int i) {
  static const char* kColors[] = {"#4878d0", "#ee854a", "#6acc64", "#d65f5f", "#956cb4",
                                  "#8c613c", "#dc7ec0", "#797979", "#d5bb67", "#82c6e2"};
  return kColors[((i % 10) + 10) % 10];
}

std::string ScatterSvg(const ScatterSpec& spec, const std::vector<ScatterPoint>& points) {
  std::vector<const ScatterPoint*> ok;
  for (const ScatterPoint& p : points)
    if (std::isfinite(p.measured) && std::isfinite(p.predicted) && p.measured > 0 && p.predicted > 0) ok.push_back(&p);
  if (ok.empty())
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"300\" height=\"24\"><text x=\"0\" y=\"16\" "
           "font-size=\"13\">no points to plot</text></svg>\n";
  double lo = ok[0]->measured, hi = lo;
  for (const ScatterPoint* p : ok) {
    lo = std::min({lo, p->measured, p->predicted});
    hi = std::max({hi, p->measured, p->predicted});
  }
  Axis ax;
  ax.log = hi / lo > 10;
  if (ax.log) {
    ax.lo = lo / 1.25;
    ax.hi = hi * 1.25;
  } else {
    const double pad = std::max((hi - lo) * 0.08, hi * 0.02);
    ax.lo = std::max(0.0, lo - pad);
    ax.hi = hi + pad;
  }
  const int legend_rows = static_cast<int>(spec.series.size() + 1) / 2;
  const int height = kTop + kPlot + 50 + legend_rows * kLegendRow;
  auto X = [&](double v) { return kLeft + ax.Map(v); };
  auto Y = [&](double v) { return kTop + kPlot - ax.Map(v); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) + "\" height=\"" +
                  std::to_string(height) + "\" font-family=\"sans-serif\">\n";
  s += "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kTop) + "\" width=\"" + std::to_string(kPlot) +
       "\" height=\"" + std::to_string(kPlot) + "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  // +-10% band and y = x, sampled along the axis (straight in both scales).
  std::string upper, lower;
  const int samples = 24;
  for (int i = 0; i <= samples; ++i) {
    const double t = static_cast<double>(i) / samples;
    const double v = ax.log ? ax.lo * std::pow(ax.hi / ax.lo, t) : ax.lo + (ax.hi - ax.lo) * t;
    const double yu = std::min(kTop + kPlot + 0.0, std::max(kTop + 0.0, Y(std::min(v * 1.1, ax.hi))));
    const double yl = std::min(kTop + kPlot + 0.0, std::max(kTop + 0.0, Y(std::max(v * 0.9, ax.lo))));
    upper += Fmt("%.1f,", X(v)) + Fmt("%.1f ", yu);
    lower = Fmt("%.1f,", X(v)) + Fmt("%.1f ", yl) + lower;
  }
  s += "<polygon points=\"" + upper + lower + "\" fill=\"#dfe9f7\" stroke=\"none\"/>\n";
  s += "<line x1=\"" + Fmt("%.1f", X(ax.lo)) + "\" y1=\"" + Fmt("%.1f", Y(ax.lo)) + "\" x2=\"" + Fmt("%.1f", X(ax.hi)) +
       "\" y2=\"" + Fmt("%.1f", Y(ax.hi)) + "\" stroke=\"#555\" stroke-dasharray=\"5 4\"/>\n";
  for (double t : ax.Ticks()) {
    const double x = X(t), y = Y(t);
    s += "<line x1=\"" + Fmt("%.1f", x) + "\" y1=\"" + std::to_string(kTop + kPlot) + "\" x2=\"" + Fmt("%.1f", x) +
         "\" y2=\"" + std::to_string(kTop + kPlot + 5) + "\" stroke=\"#555\"/>";
    s += "<text x=\"" + Fmt("%.1f", x) + "\" y=\"" + std::to_string(kTop + kPlot + 18) +
         "\" font-size=\"11\" text-anchor=\"middle\">" + Tick(t) + "</text>";
    s += "<line x1=\"" + std::to_string(kLeft - 5) + "\" y1=\"" + Fmt("%.1f", y) + "\" x2=\"" + std::to_string(kLeft) +
         "\" y2=\"" + Fmt("%.1f", y) + "\" stroke=\"#555\"/>";
    s += "<text x=\"" + std::to_string(kLeft - 8) + "\" y=\"" + Fmt("%.1f", y + 4) +
         "\" font-size=\"11\" text-anchor=\"end\">" + Tick(t) + "</text>\n";
  }
  const std::string unit = spec.unit.empty() ? "" : " (" + spec.unit + ")";
  s += "<text x=\"" + std::to_string(kLeft + kPlot / 2) + "\" y=\"" + std::to_string(kTop + kPlot + 36) +
       "\" font-size=\"13\" text-anchor=\"middle\">measured " + Esc(spec.quantity + unit) + "</text>\n";
  s += "<text transform=\"translate(16," + std::to_string(kTop + kPlot / 2) +
       ") rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">predicted " + Esc(spec.quantity + unit) + "</text>\n";
  // Points: larger series first would hide smaller ones; draw in input order, translucent.
  for (const ScatterPoint* p : ok) {
    const double err = (p->predicted - p->measured) / p->measured;
    s += Marker(p->series, X(p->measured), Y(p->predicted), 3.5,
                " fill-opacity=\"0.75\" stroke=\"#333\" stroke-width=\"0.4\"",
                "<title>" + Esc(p->label) + ": measured " + Fmt("%.4g", p->measured) + ", predicted " +
                    Fmt("%.4g", p->predicted) + Fmt(" (%+.1f%%)", 100 * err) + "</title>") +
         "\n";
  }
  // Legend: two columns under the axis title.
  int y0 = kTop + kPlot + 50;
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const int col = static_cast<int>(i % 2), row = static_cast<int>(i / 2);
    const int x = kLeft + col * (kPlot / 2), y = y0 + row * kLegendRow;
    s += Marker(static_cast<int>(i), x + 5, y - 4, 4, "", "") + "<text x=\"" + std::to_string(x + 14) + "\" y=\"" +
         std::to_string(y) + "\" font-size=\"11\">" + Esc(spec.series[i].substr(0, 40)) + "</text>\n";
  }
  return s + "</svg>\n";
}

}  // namespace dt::cli
