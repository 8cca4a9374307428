// WriteChromeTrace: dumps a simulated Engine run as Chrome trace-event JSON,
// viewable in Perfetto (ui.perfetto.dev) or chrome://tracing.
//
// Layout: one trace process per distinct Engine stream `process` label (pids
// numbered in order of first appearance), one thread per stream (tid = stream
// id + 1), "process_name"/"thread_name" (and sort-index) metadata events, and
// one complete event ("ph":"X", ts and dur in microseconds) per task that ran.
// Event name = the task name if the engine kept it (EnableTrace), else the
// category name; "cat" = category_names[category] or "cat<N>" if missing.
//
// Reads the engine (not owned); writes `path` atomically (temp + rename).
// Thread-compatible. Failure: kInternal if the engine has not been run,
// kIoError if the file cannot be written. Never throws.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sim/engine.h"

namespace dt::sim {

// The trace JSON as a string (what WriteChromeTrace writes).
StatusOr<std::string> ChromeTraceJson(const Engine& engine, const std::vector<std::string>& category_names);

Status WriteChromeTrace(const Engine& engine, const std::string& path,
                        const std::vector<std::string>& category_names);

}  // namespace dt::sim
