// Human-readable and JSON renderings of search results and predictions for
// the dtplan CLI. Pure formatting; no I/O beyond the returned strings.
#pragma once

#include <string>

#include "planner/lower/prediction.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"

namespace dt::cli {

std::string Gib(double bytes);  // "12.3"
std::string FormatSearch(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                         const SearchConstraints& k, const SearchResult& r);
json SearchToJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const SearchConstraints& k, const SearchResult& r);
// The plan file dtplan --out writes: model, cluster, profile, plan, prediction.
json PlanFileJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const PlanSpec& p, const Prediction& pred);

}  // namespace dt::cli
