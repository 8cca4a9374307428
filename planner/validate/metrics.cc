#include "planner/validate/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"

namespace dt {

double Mape(const std::vector<double>& p, const std::vector<double>& m) {
  DT_CHECK_EQ(p.size(), m.size());
  if (p.empty()) return 0;
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += std::fabs(p[i] - m[i]) / m[i];
  return s / p.size();
}

double MaxApe(const std::vector<double>& p, const std::vector<double>& m) {
  DT_CHECK_EQ(p.size(), m.size());
  double best = 0;
  for (size_t i = 0; i < p.size(); ++i) best = std::max(best, std::fabs(p[i] - m[i]) / m[i]);
  return best;
}

std::vector<double> AverageRanks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    double r = (i + j) / 2.0 + 1;
    for (size_t k = i; k <= j; ++k) rank[idx[k]] = r;
    i = j + 1;
  }
  return rank;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  DT_CHECK_EQ(a.size(), b.size());
  if (a.size() < 2) return 1;
  std::vector<double> ra = AverageRanks(a), rb = AverageRanks(b);
  const double n = static_cast<double>(a.size());
  double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (va == 0 || vb == 0) return va == vb ? 1 : 0;
  return cov / std::sqrt(va * vb);
}

}  // namespace dt
