// Engine: a generic discrete-event simulator of tasks on in-order streams.
//
// Model. A stream is an in-order FIFO resource (a CUDA stream, a link, a
// CPU thread). Each task sits on one stream and has a fixed duration. Tasks on
// a stream run one at a time in the order they were added; a task starts at
// the earliest time when (a) the previous task on its stream has ended and
// (b) every task it depends on (AddDep, any stream) has ended. A ready task
// never overtakes an earlier task on its stream, even if that one is blocked.
// The engine knows nothing about what tasks mean; `category` is an opaque
// small non-negative integer used for busy-time accounting and traces.
//
// Events are task completions kept in a binary heap ordered by
// (time, sequence number) (sim/event_queue.h), so a run is deterministic:
// the same sequence of calls gives bit-identical start/end times.
//
// Usage:
//   Engine e;
//   StreamId s = e.AddStream("rank0", "compute");
//   TaskId a = e.AddTask(s, 1e-3, kCompute), b = e.AddTask(s2, 2e-3, kComm);
//   e.AddDep(a, b);
//   DT_RETURN_IF_ERROR(e.Run());
//   double t = e.makespan();
//
// Ownership and reuse: the engine owns all its arrays. Clear() forgets the
// graph but keeps capacity, so one engine per worker thread can simulate many
// candidate plans without reallocating. The graph may be re-run after
// SetDuration() changes; adding tasks/deps after Run() invalidates results
// until the next Run().
// Thread-compatible: no globals; use one Engine per thread.
// Failure: Run() returns a non-OK Status (kInfeasible) if some tasks can never
// start (a dependency cycle, or a dependency on a later task of the same
// stream), naming the first stuck tasks; it never hangs. Misuse by the caller
// (unknown ids, negative or non-finite durations, querying results before
// Run()) is a bug and aborts via DT_CHECK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/huge_page_allocator.h"
#include "base/status.h"
#include "sim/event_queue.h"

namespace dt::sim {

using StreamId = int32_t;
using TaskId = int32_t;

class Engine {
 public:
  // ---- Building the graph ----
  // `process` groups streams in the trace (e.g. "rank3"), `thread` names the
  // stream (e.g. "compute", "tp_comm").
  StreamId AddStream(std::string process, std::string thread);
  // Appends a task at the end of stream `s`. `name` is stored only while
  // tracing is enabled (see EnableTrace); otherwise it is ignored.
  TaskId AddTask(StreamId s, double duration_s, int32_t category, std::string_view name = {});
  // `after` cannot start before `before` ends. Duplicates are harmless.
  void AddDep(TaskId before, TaskId after);
  // Keep task names for the Chrome trace. Off by default (the fast path).
  void EnableTrace(bool on) { trace_ = on; }
  bool trace_enabled() const { return trace_; }
  // Pre-sizes the arrays for `tasks` tasks and `deps` dependencies.
  void Reserve(size_t tasks, size_t deps);
  // Changes a task's duration (the graph stays; call Run() again).
  void SetDuration(TaskId t, double duration_s);
  // Forgets streams, tasks, deps and results; keeps allocated capacity.
  void Clear();

  // ---- Simulating ----
  // Simulates from time 0. OK if every task ran; kInfeasible otherwise.
  Status Run();

  // ---- Results (valid after Run(); tasks that never ran report -1) ----
  double start(TaskId t) const { CheckResult(t); return start_[t]; }
  double end(TaskId t) const { CheckResult(t); return end_[t]; }
  double makespan() const;
  // Seconds stream `s` spent running tasks of `category` (0 for unknown categories).
  double BusyTime(StreamId s, int32_t category) const;
  // Seconds stream `s` spent running any task.
  double BusyTime(StreamId s) const;
  bool has_run() const { return ran_; }

  // ---- Inspecting the graph ----
  size_t num_tasks() const { return duration_.size(); }
  size_t num_streams() const { return process_.size(); }
  size_t num_deps() const { return dep_before_.size(); }
  StreamId stream_of(TaskId t) const { return stream_[t]; }
  double duration(TaskId t) const { return duration_[t]; }
  int32_t category(TaskId t) const { return category_[t]; }
  // Empty unless the task was added while tracing was enabled.
  std::string_view name(TaskId t) const;
  const std::string& stream_process(StreamId s) const { return process_[s]; }
  const std::string& stream_thread(StreamId s) const { return thread_[s]; }
  // One past the largest category seen (0 if no tasks).
  int32_t num_categories() const { return num_categories_; }

 private:
  void CheckResult(TaskId t) const;
  void BuildSuccessors();
  Status StuckError(size_t completed) const;

  bool trace_ = false;
  bool ran_ = false;
  bool csr_valid_ = false;
  int32_t num_categories_ = 0;

  // Per stream.
  std::vector<std::string> process_, thread_;
  std::vector<TaskId> stream_tail_;  // last task added on the stream, -1 if none

  // Per task (struct of arrays), on huge pages where the kernel gives them
  // (base/huge_page_allocator.h): a 1024-microbatch plan has ~10^6 tasks.
  template <typename T>
  using TaskArray = std::vector<T, HugePageAllocator<T>>;
  TaskArray<StreamId> stream_;
  TaskArray<int32_t> category_;
  TaskArray<double> duration_;
  TaskArray<TaskId> stream_next_;   // next task on the same stream, -1 if last
  TaskArray<int32_t> in_degree_;    // deps + 1 if the task has a stream predecessor
  TaskArray<int32_t> out_degree_;   // explicit deps only
  std::vector<std::string> names_;    // only while tracing; may be shorter than num_tasks()

  // Dependencies as added, and their CSR successor form built by Run().
  TaskArray<TaskId> dep_before_, dep_after_;
  TaskArray<int32_t> succ_offset_;  // num_tasks + 1
  TaskArray<TaskId> succ_;

  // Run state and results.
  TaskArray<int32_t> pending_;
  TaskArray<double> start_, end_;
  std::vector<double> busy_;  // num_streams x num_categories, row-major
  double makespan_ = 0.0;
  EventQueue queue_;
};

}  // namespace dt::sim
