// Accuracy metrics of predictions against measurements: mean absolute
// percentage error, maximum absolute percentage error, and Spearman's rank
// correlation (average ranks for ties). Pure; empty input gives 0 / NaN-free
// defaults (Spearman of fewer than 2 points is reported as 1).
#pragma once

#include <vector>

namespace dt {

double Mape(const std::vector<double>& predicted, const std::vector<double>& measured);
double MaxApe(const std::vector<double>& predicted, const std::vector<double>& measured);
double Spearman(const std::vector<double>& a, const std::vector<double>& b);
std::vector<double> AverageRanks(const std::vector<double>& v);

}  // namespace dt
