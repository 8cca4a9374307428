#include "sim/chrome_trace.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "base/json_fields.h"

namespace dt::sim {
namespace {

// A JSON string literal (quoted, escaped). Invalid UTF-8 is replaced, not thrown.
std::string Quote(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AppendSeconds(std::string& out, const char* key, double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), ",\"%s\":%.4f", key, seconds * 1e6);
  out += buf;
}

}  // namespace

StatusOr<std::string> ChromeTraceJson(const Engine& engine, const std::vector<std::string>& category_names) {
  if (!engine.has_run()) return Internal("WriteChromeTrace: the engine has not been Run() since its last change");
  // Processes in order of first appearance.
  std::map<std::string, int> pid_of;
  std::vector<int> stream_pid(engine.num_streams());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&]() {
    if (!first) out += ",\n";
    first = false;
  };
  for (size_t s = 0; s < engine.num_streams(); ++s) {
    const std::string& proc = engine.stream_process(static_cast<StreamId>(s));
    auto [it, inserted] = pid_of.emplace(proc, static_cast<int>(pid_of.size()) + 1);
    const int pid = it->second;
    stream_pid[s] = pid;
    const std::string ids = "\"pid\":" + std::to_string(pid);
    if (inserted) {
      begin_event();
      out += "{\"name\":\"process_name\",\"ph\":\"M\"," + ids + ",\"tid\":0,\"args\":{\"name\":" + Quote(proc) + "}}";
      begin_event();
      out += "{\"name\":\"process_sort_index\",\"ph\":\"M\"," + ids +
             ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(pid) + "}}";
    }
    const std::string tid = std::to_string(s + 1);
    begin_event();
    out += "{\"name\":\"thread_name\",\"ph\":\"M\"," + ids + ",\"tid\":" + tid + ",\"args\":{\"name\":" +
           Quote(engine.stream_thread(static_cast<StreamId>(s))) + "}}";
    begin_event();
    out += "{\"name\":\"thread_sort_index\",\"ph\":\"M\"," + ids + ",\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  std::vector<std::string> cat_quoted(static_cast<size_t>(engine.num_categories()));
  for (size_t c = 0; c < cat_quoted.size(); ++c) {
    cat_quoted[c] = Quote(c < category_names.size() ? category_names[c] : "cat" + std::to_string(c));
  }
  for (size_t i = 0; i < engine.num_tasks(); ++i) {
    const auto t = static_cast<TaskId>(i);
    if (engine.end(t) < 0.0) continue;  // never ran (failed Run)
    const StreamId s = engine.stream_of(t);
    const std::string& cat = cat_quoted[engine.category(t)];
    const std::string_view nm = engine.name(t);
    begin_event();
    out += "{\"name\":";
    out += nm.empty() ? cat : Quote(nm);
    out += ",\"cat\":" + cat + ",\"ph\":\"X\"";
    AppendSeconds(out, "ts", engine.start(t));
    AppendSeconds(out, "dur", engine.duration(t));
    out += ",\"pid\":" + std::to_string(stream_pid[s]) + ",\"tid\":" + std::to_string(s + 1) +
           ",\"args\":{\"task\":" + std::to_string(t) + "}}";
  }
  out += "\n]}\n";
  return out;
}

Status WriteChromeTrace(const Engine& engine, const std::string& path,
                        const std::vector<std::string>& category_names) {
  DT_ASSIGN_OR_RETURN(std::string text, ChromeTraceJson(engine, category_names));
  return WriteTextFile(path, text);
}

}  // namespace dt::sim
