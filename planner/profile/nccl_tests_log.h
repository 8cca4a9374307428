// Reading the text output of NVIDIA's nccl-tests (all_reduce_perf,
// all_gather_perf, reduce_scatter_perf, sendrecv_perf, alltoall_perf), as
// cluster admins run them, into runs of (size, time, bandwidths).
//
// Format (nccl-tests src/util.cu, doc/PERFORMANCE.md, checked at v2.19.6 and
// the layout before September 2022, without "Group g" in the device lines nor
// "# Collective test starting"): a header "# nThread T nGpus G ...", one
// device line per rank
// "#  Rank  r Group  g Pid  p on <host> device  d [<bus id>] <GPU name>",
// a column header "#  size  count  type  redop  root  time  algbw  busbw
// #wrong  time  algbw  busbw  #wrong" (out-of-place, then in-place; the
// per-iteration (-I) and timestamp columns may follow each group), rows, and
// "# Avg bus bandwidth". Times are in us, bandwidths in GB/s (1e9 B/s), size
// is S (the full buffer: nccl-tests' max of send and receive bytes).
//
// Which test a run is comes from "# Collective test starting: X_perf", else
// from the file name (all_reduce..., allgather..., ...). Ranks = the device
// lines; hosts = their distinct host names. Only the out-of-place columns
// are kept. A file may hold several runs (outputs appended one after the
// other). Lines that are neither '#' nor rows (NCCL INFO/WARN output) are
// ignored; rows of size 0 are skipped.
//
// Failure: InvalidArgument "FILE:LINE: what is wrong; what to do" for a run
// whose test cannot be told, a row that does not parse, a nonzero #wrong, a
// busbw that is not algbw x the test's factor for the rank count (a cut or
// mixed log), uneven ranks per host, sizes not increasing, a run with no
// rows, or a file with no run. Pure apart from ReadNcclTestsLogs' file I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dt {

struct NcclTestsRow {
  int64_t bytes = 0;     // S
  double time_us = 0;    // out-of-place time per operation
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  int line = 0;          // 1-based line in the file
};

struct NcclTestsRun {
  std::string file;
  int line = 0;              // line of the run's "# nThread" header
  std::string test;          // all_reduce | all_gather | reduce_scatter | sendrecv | alltoall
  int ranks = 0;             // device lines
  int hosts = 0;             // distinct host names among them
  int ranks_per_host = 0;    // ranks / hosts (equal on every host)
  std::string device_name;   // GPU name of the first device line
  std::vector<NcclTestsRow> rows;  // increasing bytes, bytes > 0
};

// nccl-tests' bus bandwidth factor of `test` for n ranks (doc/PERFORMANCE.md).
double NcclTestsBusBwFactor(const std::string& test, int n);

// Parses one log's text; `file` names it in errors (and in the runs).
StatusOr<std::vector<NcclTestsRun>> ParseNcclTestsLog(const std::string& text, const std::string& file);

// A log file, or every *.txt, *.log and *.out file of a directory (sorted by
// name; other files are listed in *ignored). NotFound for a missing path,
// InvalidArgument when no log is found or a log is malformed.
StatusOr<std::vector<NcclTestsRun>> ReadNcclTestsLogs(const std::string& path, std::vector<std::string>* ignored);

}  // namespace dt
