#include "planner/profile/nccl_tests_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace dt {
namespace {

std::vector<std::string> Tokens(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> t;
  for (std::string w; is >> w;) t.push_back(w);
  return t;
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "all_reduce_perf", "./build/all_gather_perf_mpi" -> "all_reduce", "all_gather".
std::string TestFromProgram(std::string prog) {
  prog = std::filesystem::path(Trim(prog)).filename().string();
  for (const char* suffix : {"_perf_mpi", "_perf"}) {
    size_t at = prog.rfind(suffix);
    if (at != std::string::npos) return prog.substr(0, at);
  }
  return prog;
}

// The test named by a file name, "" when none is.
std::string TestFromFileName(const std::string& file) {
  const std::string name = Lower(std::filesystem::path(file).filename().string());
  static const std::pair<const char*, const char*> kNames[] = {{"reduce_scatter", "reduce_scatter"},
                                                               {"reducescatter", "reduce_scatter"},
                                                               {"all_reduce", "all_reduce"},
                                                               {"allreduce", "all_reduce"},
                                                               {"all_gather", "all_gather"},
                                                               {"allgather", "all_gather"},
                                                               {"sendrecv", "sendrecv"},
                                                               {"send_recv", "sendrecv"},
                                                               {"alltoall", "alltoall"},
                                                               {"all_to_all", "alltoall"}};
  for (const auto& [pattern, test] : kNames)
    if (name.find(pattern) != std::string::npos) return test;
  return "";
}

// Whole-token number parsing: nullopt unless all of `s` is a number.
std::optional<double> Number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string Fixed(double v, int prec = 2) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(prec);
  os << v;
  return os.str();
}

struct Columns {
  int size = -1, redop = -1, time = -1;  // algbw, busbw, #wrong follow time
  int wrong_in_place = -1;               // the second #wrong, when present
};

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  StatusOr<std::vector<NcclTestsRun>> Parse(const std::string& text) {
    std::istringstream in(text);
    std::string raw;
    int lineno = 0;
    while (std::getline(in, raw)) {
      ++lineno;
      Status s = Line(Trim(raw), lineno);
      if (!s.ok()) return s;
    }
    if (Status s = Finish(); !s.ok()) return s;
    if (runs_.empty())
      return InvalidArgument(file_ +
                             ": no nccl-tests result table (no '# nThread' header and size/time rows); "
                             "give the stdout of all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                             "sendrecv_perf or alltoall_perf");
    return runs_;
  }

 private:
  Status Error(int line, const std::string& what) {
    return InvalidArgument(file_ + ":" + std::to_string(line) + ": " + what);
  }

  Status Line(const std::string& l, int lineno) {
    if (l.empty()) return Status::Ok();
    if (l[0] != '#') {
      // A row starts with the size, all digits ("10-0-0-7:123:456 [0] NCCL
      // INFO ..." from a host named by its address does not).
      const size_t end = l.find_first_of(" \t");
      const std::string first = l.substr(0, end);
      if (in_table_ &&
          std::all_of(first.begin(), first.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        return Row(l, lineno);
      return Status::Ok();  // NCCL INFO / WARN lines, launcher output
    }
    const std::string body = Trim(l.substr(1));
    if (StartsWith(body, "Collective test starting:")) {
      if (Status s = Finish(); !s.ok()) return s;
      program_test_ = TestFromProgram(body.substr(std::string("Collective test starting:").size()));
      return Status::Ok();
    }
    if (StartsWith(body, "nThread")) {
      if (run_ && (in_table_ || !run_->rows.empty() || saw_columns_))
        if (Status s = Finish(); !s.ok()) return s;
      if (!run_) Start(lineno);
      run_->line = lineno;
      return Status::Ok();
    }
    if (StartsWith(body, "Rank ") && body.find(" on ") != std::string::npos && body.find("device") != std::string::npos)
      return Device(body, lineno);
    if (StartsWith(body, "size")) return Header(body, lineno);
    if (StartsWith(body, "Out of bounds") || StartsWith(body, "Avg bus bandwidth")) in_table_ = false;
    return Status::Ok();
  }

  void Start(int lineno) {
    run_.emplace();
    run_->file = file_;
    run_->line = lineno;
    saw_columns_ = false;
    hosts_.clear();
    groups_.clear();
  }

  Status Device(const std::string& body, int lineno) {
    if (run_ && saw_columns_)
      if (Status s = Finish(); !s.ok()) return s;
    if (!run_) Start(lineno);
    // "Rank  0 Group  0 Pid  1234 on host device  0 [0000:07:00] NVIDIA H100 80GB HBM3";
    // before nccl-tests of September 2022 without "Group G".
    std::istringstream is(body);
    std::string w_rank, w_next, w_on, host, w_device;
    long rank = -1, group = 0, pid = -1, dev = -1;
    is >> w_rank >> rank >> w_next;
    if (w_next == "Group") is >> group >> w_next;
    is >> pid >> w_on >> host >> w_device >> dev;
    if (!is || w_next != "Pid" || w_on != "on" || w_device != "device")
      return Error(lineno,
                   "device line does not parse as '#  Rank R [Group G] Pid P on HOST device D [BUS] NAME'; "
                   "keep nccl-tests' device lines as printed");
    ++run_->ranks;
    hosts_[host] += 1;
    groups_.insert(group);
    if (run_->device_name.empty()) {
      size_t close = body.find(']');
      if (close != std::string::npos) run_->device_name = Trim(body.substr(close + 1));
    }
    return Status::Ok();
  }

  Status Header(const std::string& body, int lineno) {
    if (run_ && saw_columns_)
      if (Status s = Finish(); !s.ok()) return s;
    if (!run_) Start(lineno);
    const std::vector<std::string> t = Tokens(body);
    cols_ = Columns();
    for (int i = 0; i < static_cast<int>(t.size()); ++i) {
      if (t[i] == "size" && cols_.size < 0) cols_.size = i;
      if (t[i] == "redop" && cols_.redop < 0) cols_.redop = i;
      if ((t[i] == "time" || t[i] == "cputime") && cols_.time < 0) cols_.time = i;
      if (t[i] == "#wrong" && cols_.time >= 0 && i > cols_.time + 3) cols_.wrong_in_place = i;
    }
    if (cols_.size != 0 || cols_.time < 0 || static_cast<int>(t.size()) < cols_.time + 4 ||
        t[cols_.time + 1] != "algbw" || t[cols_.time + 2] != "busbw")
      return Error(lineno,
                   "column header is not nccl-tests' 'size count type redop root time algbw busbw #wrong "
                   "...'; keep the header lines as printed");
    in_table_ = true;
    saw_columns_ = true;
    return Status::Ok();
  }

  Status Row(const std::string& l, int lineno) {
    const std::vector<std::string> t = Tokens(l);
    const int need = cols_.time + 4;
    if (static_cast<int>(t.size()) < need)
      return Error(lineno, "result row has " + std::to_string(t.size()) + " columns, the header " +
                               std::to_string(need) + "+; the log looks cut or edited: rerun or remove the line");
    auto bytes = Number(t[cols_.size]);
    auto time = Number(t[cols_.time]);
    auto alg = Number(t[cols_.time + 1]);
    auto bus = Number(t[cols_.time + 2]);
    if (!bytes || *bytes < 0 || std::floor(*bytes) != *bytes || !time || *time < 0 || !alg || !bus)
      return Error(lineno, "cannot read size / time / algbw / busbw from '" + l.substr(0, 80) +
                               "'; the log looks cut or edited: rerun or remove the line");
    for (int col : {cols_.time + 3, cols_.wrong_in_place}) {
      if (col < 0 || col >= static_cast<int>(t.size()) || t[col] == "N/A") continue;
      auto w = Number(t[col]);
      if (!w) return Error(lineno, "#wrong column '" + t[col] + "' is not a number or N/A");
      if (*w != 0)
        return Error(lineno, "nccl-tests found " + t[col] + " wrong elements at size " + t[cols_.size] +
                                 (col == cols_.wrong_in_place ? " (in-place)" : "") +
                                 ": this run failed its check; fix the fabric and rerun");
    }
    if (cols_.redop >= 0 && cols_.redop < static_cast<int>(t.size())) redop_ = t[cols_.redop];
    if (*bytes == 0) return Status::Ok();
    if (!run_->rows.empty() && *bytes <= run_->rows.back().bytes)
      return Error(lineno, "size " + t[cols_.size] + " B is not larger than the previous row's " +
                               std::to_string(run_->rows.back().bytes) +
                               " B: several sweeps in one table (-N/repeat)? keep one sweep per table");
    NcclTestsRow r;
    r.bytes = static_cast<int64_t>(*bytes);
    r.time_us = *time;
    r.algbw_GBps = *alg;
    r.busbw_GBps = *bus;
    r.line = lineno;
    run_->rows.push_back(r);
    return Status::Ok();
  }

  // Closes the current run: names its test and checks it.
  Status Finish() {
    in_table_ = false;
    if (!run_) return Status::Ok();
    NcclTestsRun run = std::move(*run_);
    run_.reset();
    saw_columns_ = false;
    const std::string program_test = program_test_;
    program_test_.clear();
    run.test = !program_test.empty() ? program_test : TestFromFileName(file_);
    if (run.test.empty())
      return Error(run.line,
                   "cannot tell which nccl-tests test this run is (no '# Collective test starting' "
                   "line); name the file after it (all_reduce_perf.txt, all_gather_perf.txt, "
                   "reduce_scatter_perf.txt, sendrecv_perf.txt, alltoall_perf.txt)");
    if (run.ranks == 0)
      return Error(run.line,
                   "no '#  Rank ... on HOST device ...' lines: cannot tell ranks and hosts; "
                   "keep nccl-tests' device lines in the log");
    if (groups_.size() > 1)
      return Error(run.line, "ranks belong to " + std::to_string(groups_.size()) +
                                 " groups (NCCL_TESTS_SPLIT): one table mixes communicators; rerun without it");
    run.hosts = static_cast<int>(hosts_.size());
    for (const auto& [host, n] : hosts_)
      if (n * run.hosts != run.ranks)
        return Error(run.line, "host " + host + " runs " + std::to_string(n) + " of " + std::to_string(run.ranks) +
                                   " ranks, other hosts a different number; run the same number of ranks per host");
    run.ranks_per_host = run.ranks / run.hosts;
    if (run.rows.empty()) return Error(run.line, run.test + " run has no result rows (the log is cut?); rerun it");
    const std::string redop = redop_;
    redop_.clear();
    const bool takes_op = run.test == "all_reduce" || run.test == "reduce_scatter";
    const bool takes_none = run.test == "all_gather" || run.test == "alltoall";
    if (!redop.empty() && ((takes_op && redop == "none") || (takes_none && redop != "none")))
      return Error(run.line, "redop column '" + redop + "' does not fit " + run.test +
                                 ": is the file misnamed or the test line edited?");
    const double f = NcclTestsBusBwFactor(run.test, run.ranks);
    for (const NcclTestsRow& r : run.rows) {
      const double alg = static_cast<double>(r.bytes) / (r.time_us * 1e3);
      if (r.time_us > 0 && r.algbw_GBps >= 0.05 && std::fabs(alg - r.algbw_GBps) > 0.02 * r.algbw_GBps + 0.015)
        return Error(r.line, "algbw " + Fixed(r.algbw_GBps) + " GB/s is not size / time = " + Fixed(alg) +
                                 " GB/s; the row is corrupt: rerun or remove the line");
      if (f > 0 && r.busbw_GBps >= 0.05 && std::fabs(r.algbw_GBps * f - r.busbw_GBps) > 0.02 * r.busbw_GBps + 0.015)
        return Error(r.line, "busbw " + Fixed(r.busbw_GBps) + " GB/s is not algbw x " + Fixed(f, 4) + " (the " +
                                 run.test + " factor for " + std::to_string(run.ranks) +
                                 " ranks, from the device lines): the row is corrupt, or the table belongs to another "
                                 "test or rank count; keep each run's own device lines and header with its table");
    }
    runs_.push_back(std::move(run));
    return Status::Ok();
  }

  std::string file_;
  std::vector<NcclTestsRun> runs_;
  std::optional<NcclTestsRun> run_;
  std::map<std::string, int> hosts_;
  std::set<long> groups_;
  std::string program_test_, redop_;
  Columns cols_;
  bool in_table_ = false, saw_columns_ = false;
};

}  // namespace

double NcclTestsBusBwFactor(const std::string& test, int n) {
  if (n < 1) return 0;
  if (test == "all_reduce") return 2.0 * (n - 1) / n;
  if (test == "all_gather" || test == "reduce_scatter" || test == "alltoall") return static_cast<double>(n - 1) / n;
  if (test == "sendrecv" || test == "broadcast" || test == "reduce") return 1;
  return 0;  // unknown: not checked
}

StatusOr<std::vector<NcclTestsRun>> ParseNcclTestsLog(const std::string& text, const std::string& file) {
  return Parser(file).Parse(text);
}

StatusOr<std::vector<NcclTestsRun>> ReadNcclTestsLogs(const std::string& path, std::vector<std::string>* ignored) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound("'" + path + "' does not exist; give a directory of nccl-tests logs");
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = Lower(e.path().extension().string());
      if (ext == ".txt" || ext == ".log" || ext == ".out")
        files.push_back(e.path().string());
      else if (ignored)
        ignored->push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
    if (ignored) std::sort(ignored->begin(), ignored->end());
    if (files.empty())
      return InvalidArgument("'" + path +
                             "' holds no *.txt, *.log or *.out file; save each nccl-tests run's "
                             "stdout there (all_reduce_perf ... > all_reduce.txt)");
  } else {
    files.push_back(path);
  }
  std::vector<NcclTestsRun> all;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return IoError("cannot read '" + f + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    auto runs = ParseNcclTestsLog(ss.str(), f);
    if (!runs.ok()) return runs.status();
    for (auto& r : *runs) all.push_back(std::move(r));
  }
  return all;
}

}  // namespace dt
