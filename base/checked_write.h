// Checked file output: every write, flush, fsync and close of the files the
// tools produce (plans, traces, reports, metrics, checkpoints) goes through
// here, and any failure comes back as a Status naming the file and the
// system's reason, so a full disk never leaves a silent 0-byte file.
//
// Fault-injection seam (tests only): when the environment variable
// DT_FAULT_WRITE_LIMIT_BYTES=N is set, the process may write N bytes in
// total through these functions; the write that would exceed the budget
// writes up to it and then fails with ENOSPC ("No space left on device"),
// as a full disk would. With DT_FAULT_WRITE_KILL=1 the process SIGKILLs
// itself at that point instead (a crash in the middle of a save).
// DT_FAULT_WRITE_PATH=S restricts the budget to paths containing S.
//
// Thread-safety: the byte budget is a process-wide atomic; an OutputFile is
// thread-compatible (one writer at a time).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace dt {

// Writes all n bytes to fd (retrying short writes and EINTR). `path` names
// the file in the error.
Status WriteAllToFd(int fd, const char* data, size_t n, const std::string& path);

// Creates or truncates `path`, writes `n` bytes, optionally fsyncs, closes;
// every step checked.
Status WriteWholeFile(const std::string& path, const char* data, size_t n, bool fsync);

// An output stream for a file written piece by piece (e.g. metrics lines).
// Unbuffered: Append() hands its bytes to the kernel at once, so each line
// is either on disk or reported as a failure. Close() (also called by the
// destructor, which ignores its result) reports a failing close.
class OutputFile {
 public:
  OutputFile() = default;
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // append=false truncates an existing file.
  Status Open(const std::string& path, bool append);
  Status Append(const std::string& text);
  Status Close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace dt
