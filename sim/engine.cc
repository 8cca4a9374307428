#include "sim/engine.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace dt::sim {

StreamId Engine::AddStream(std::string process, std::string thread) {
  DT_CHECK_LT(process_.size(), static_cast<size_t>(std::numeric_limits<StreamId>::max()));
  process_.push_back(std::move(process));
  thread_.push_back(std::move(thread));
  stream_tail_.push_back(-1);
  ran_ = false;
  return static_cast<StreamId>(process_.size() - 1);
}

TaskId Engine::AddTask(StreamId s, double duration_s, int32_t category, std::string_view name) {
  DT_CHECK(s >= 0 && static_cast<size_t>(s) < process_.size()) << "unknown stream " << s;
  DT_CHECK(std::isfinite(duration_s) && duration_s >= 0.0) << "bad duration " << duration_s;
  DT_CHECK_GE(category, 0);
  DT_CHECK_LT(duration_.size(), static_cast<size_t>(std::numeric_limits<TaskId>::max()));
  const TaskId t = static_cast<TaskId>(duration_.size());
  stream_.push_back(s);
  category_.push_back(category);
  duration_.push_back(duration_s);
  stream_next_.push_back(-1);
  out_degree_.push_back(0);
  const TaskId prev = stream_tail_[s];
  in_degree_.push_back(prev >= 0 ? 1 : 0);
  if (prev >= 0) stream_next_[prev] = t;
  stream_tail_[s] = t;
  if (category >= num_categories_) num_categories_ = category + 1;
  if (trace_) {
    if (names_.size() < static_cast<size_t>(t)) names_.resize(t);
    names_.emplace_back(name);
  }
  csr_valid_ = false;
  ran_ = false;
  return t;
}

void Engine::AddDep(TaskId before, TaskId after) {
  const auto n = static_cast<TaskId>(duration_.size());
  DT_CHECK(before >= 0 && before < n) << "unknown task " << before;
  DT_CHECK(after >= 0 && after < n) << "unknown task " << after;
  DT_CHECK_LT(in_degree_[after], std::numeric_limits<int32_t>::max());
  dep_before_.push_back(before);
  dep_after_.push_back(after);
  ++in_degree_[after];
  ++out_degree_[before];
  csr_valid_ = false;
  ran_ = false;
}

void Engine::Reserve(size_t tasks, size_t deps) {
  stream_.reserve(tasks);
  category_.reserve(tasks);
  duration_.reserve(tasks);
  stream_next_.reserve(tasks);
  in_degree_.reserve(tasks);
  out_degree_.reserve(tasks);
  pending_.reserve(tasks);
  start_.reserve(tasks);
  end_.reserve(tasks);
  succ_offset_.reserve(tasks + 1);
  if (trace_) names_.reserve(tasks);
  dep_before_.reserve(deps);
  dep_after_.reserve(deps);
  succ_.reserve(deps);
}

void Engine::SetDuration(TaskId t, double duration_s) {
  DT_CHECK(t >= 0 && static_cast<size_t>(t) < duration_.size()) << "unknown task " << t;
  DT_CHECK(std::isfinite(duration_s) && duration_s >= 0.0) << "bad duration " << duration_s;
  duration_[t] = duration_s;
  ran_ = false;
}

void Engine::Clear() {
  process_.clear();
  thread_.clear();
  stream_tail_.clear();
  stream_.clear();
  category_.clear();
  duration_.clear();
  stream_next_.clear();
  in_degree_.clear();
  out_degree_.clear();
  names_.clear();
  dep_before_.clear();
  dep_after_.clear();
  succ_offset_.clear();
  succ_.clear();
  pending_.clear();
  start_.clear();
  end_.clear();
  busy_.clear();
  queue_.Clear();
  num_categories_ = 0;
  makespan_ = 0.0;
  csr_valid_ = false;
  ran_ = false;
}

std::string_view Engine::name(TaskId t) const {
  DT_CHECK(t >= 0 && static_cast<size_t>(t) < duration_.size()) << "unknown task " << t;
  return static_cast<size_t>(t) < names_.size() ? std::string_view(names_[t]) : std::string_view();
}

// Counting sort of the dependency list by `before`: succ_[succ_offset_[t] ..
// succ_offset_[t+1]) are t's successors, in the order their deps were added.
void Engine::BuildSuccessors() {
  const size_t n = duration_.size();
  succ_offset_.assign(n + 1, 0);
  for (size_t t = 0; t < n; ++t) succ_offset_[t + 1] = succ_offset_[t] + out_degree_[t];
  succ_.resize(dep_before_.size());
  // Use pending_ as the fill cursor to avoid another allocation.
  pending_.assign(succ_offset_.begin(), succ_offset_.end() - 1);
  for (size_t k = 0; k < dep_before_.size(); ++k) succ_[pending_[dep_before_[k]]++] = dep_after_[k];
  csr_valid_ = true;
}

Status Engine::Run() {
  const size_t n = duration_.size();
  if (!csr_valid_) BuildSuccessors();
  pending_.assign(in_degree_.begin(), in_degree_.end());
  start_.assign(n, -1.0);
  end_.assign(n, -1.0);
  queue_.Clear();

  // Hot loop: raw pointers into the flat arrays.
  int32_t* pending = pending_.data();
  double* start = start_.data();
  double* end = end_.data();
  const double* duration = duration_.data();
  const TaskId* stream_next = stream_next_.data();
  const int32_t* succ_offset = succ_offset_.data();
  const TaskId* succ = succ_.data();
  EventQueue& queue = queue_;
  auto begin_task = [&](TaskId t, double now) {
    start[t] = now;
    const double finish = now + duration[t];
    end[t] = finish;
    queue.Push(finish, t);
  };

  for (size_t t = 0; t < n; ++t) {
    if (pending[t] == 0) begin_task(static_cast<TaskId>(t), 0.0);
  }
  size_t completed = 0;
  double now = 0.0;
  while (!queue.empty()) {
    const Event ev = queue.Pop();
    now = ev.time;
    const TaskId t = ev.payload;
    ++completed;
    const TaskId next = stream_next[t];
    if (next >= 0 && --pending[next] == 0) begin_task(next, now);
    for (int32_t k = succ_offset[t], k_end = succ_offset[t + 1]; k < k_end; ++k) {
      const TaskId a = succ[k];
      if (--pending[a] == 0) begin_task(a, now);
    }
  }
  makespan_ = now;

  // Busy time per (stream, category), summed in task order (deterministic).
  const size_t ncat = static_cast<size_t>(num_categories_);
  busy_.assign(process_.size() * ncat, 0.0);
  for (size_t t = 0; t < n; ++t) {
    if (end[t] >= 0.0) busy_[static_cast<size_t>(stream_[t]) * ncat + category_[t]] += duration[t];
  }
  ran_ = true;
  if (completed != n) return StuckError(completed);
  return Status::Ok();
}

// Names the tasks at the head of each blocked stream: those are the ones
// whose unmet dependencies form the cycle / deadlock.
Status Engine::StuckError(size_t completed) const {
  const size_t n = duration_.size();
  std::ostringstream os;
  os << "simulation deadlock: " << (n - completed) << " of " << n
     << " tasks can never start (dependency cycle, or a dependency on a later task of the"
     << " same stream); first stuck:";
  std::vector<char> stream_reported(process_.size(), 0);
  int reported = 0;
  constexpr int kMaxReported = 5;
  for (size_t t = 0; t < n && reported < kMaxReported; ++t) {
    if (start_[t] >= 0.0) continue;
    const StreamId s = stream_[t];
    if (stream_reported[s]) continue;  // only the first blocked task of each stream
    stream_reported[s] = 1;
    // The stream predecessor ran, so pending_ counts unmet explicit deps only.
    os << (reported ? "; " : " ") << "task " << t;
    const std::string_view nm = name(static_cast<TaskId>(t));
    if (!nm.empty()) os << " '" << nm << "'";
    os << " on stream " << s << " (" << process_[s] << "/" << thread_[s] << ") waiting for "
       << pending_[t] << " dependenc" << (pending_[t] == 1 ? "y" : "ies");
    ++reported;
  }
  return Infeasible(os.str());
}

void Engine::CheckResult(TaskId t) const {
  DT_CHECK(ran_) << "results queried before Run() (or after the graph changed)";
  DT_CHECK(t >= 0 && static_cast<size_t>(t) < start_.size()) << "unknown task " << t;
}

double Engine::makespan() const {
  DT_CHECK(ran_) << "makespan() queried before Run()";
  return makespan_;
}

double Engine::BusyTime(StreamId s, int32_t category) const {
  DT_CHECK(ran_) << "BusyTime() queried before Run()";
  DT_CHECK(s >= 0 && static_cast<size_t>(s) < process_.size()) << "unknown stream " << s;
  if (category < 0 || category >= num_categories_) return 0.0;
  return busy_[static_cast<size_t>(s) * num_categories_ + category];
}

double Engine::BusyTime(StreamId s) const {
  DT_CHECK(ran_) << "BusyTime() queried before Run()";
  DT_CHECK(s >= 0 && static_cast<size_t>(s) < process_.size()) << "unknown stream " << s;
  double total = 0.0;
  for (int32_t c = 0; c < num_categories_; ++c) total += busy_[static_cast<size_t>(s) * num_categories_ + c];
  return total;
}

}  // namespace dt::sim
