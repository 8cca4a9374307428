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
// A plan whose device waits for the host's launches for at least 5% of a
// stage's kernel time (Prediction::host_wait_share): one sentence saying so
// and what would shrink it; empty below that.
std::string LaunchBoundNote(const Prediction& p, const HardwareProfile& hw);
// The plan file dtplan --out writes: model, cluster, profile, plan, prediction.
json PlanFileJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const PlanSpec& p, const Prediction& pred);

}  // namespace dt::cli
