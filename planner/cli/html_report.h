// HtmlReport: one self-contained HTML page (inline CSS and SVG, no scripts,
// no external resources) for a search: the ranked table, the rejection
// counts, the best plan's simulated step as a per-stage timeline and its
// per-stage memory against capacity.
//
// Pure formatting. trace: the Chrome trace SimulatePlan wrote for the best
// plan (may be null: no timeline). The timeline shows, per pixel column, the
// busiest category of each stream, so the page stays small for any plan.
#pragma once

#include <string>

#include "planner/lower/prediction.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"

namespace dt::cli {

std::string HtmlReport(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                       const SearchResult& r, const PlanSpec& best, const Prediction& best_pred,
                       const json& trace);

}  // namespace dt::cli
