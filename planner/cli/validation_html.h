// The HTML reports of `dtplan validate --report FILE`: one self-contained
// page (inline CSS and SVG, no scripts, no external resources) with
// predicted-vs-measured scatter plots (planner/cli/scatter_svg.h) and the
// accuracy tables the text output prints.
//
//  * ValidationHtml: `validate --cases`: step time per case, coloured by
//    model group; per-group MAPE / max error / Spearman; the largest errors.
//  * ExecuteHtml: `validate --execute`: step time per plan and peak memory
//    per pipeline stage, coloured by schedule; every plan's numbers.
// Pure formatting.
#pragma once

#include <string>

#include "planner/validate/execute.h"
#include "planner/validate/run_validation.h"

namespace dt::cli {

// `source`: the cases file; `profile`: the override, or "" for each case's own.
std::string ValidationHtml(const ValidationReport& r, const std::string& source, const std::string& profile);

std::string ExecuteHtml(const ExecuteReport& r, const ModelSpec& m, const ClusterSpec& c,
                        const std::string& profile);

}  // namespace dt::cli
