#include "base/checked_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace dt {
namespace {

std::string Errno(const std::string& what, const std::string& path, int err) {
  return what + " '" + path + "' failed: " + std::strerror(err);
}

// The test seam: bytes this process may still write (< 0: unlimited).
std::atomic<long long>& Budget() {
  static std::atomic<long long> budget = [] {
    const char* v = std::getenv("DT_FAULT_WRITE_LIMIT_BYTES");
    return v != nullptr && *v != '\0' ? std::atoll(v) : -1LL;
  }();
  return budget;
}

bool SeamApplies(const std::string& path) {
  if (Budget().load() < 0) return false;
  const char* only = std::getenv("DT_FAULT_WRITE_PATH");
  return only == nullptr || *only == '\0' || path.find(only) != std::string::npos;
}

// How many of `n` bytes may be written now; 0 with *fail set when the budget
// is spent (the caller then fails with ENOSPC or the process dies).
size_t Allowed(const std::string& path, size_t n, bool* fail) {
  *fail = false;
  if (!SeamApplies(path)) return n;
  long long left = Budget().load();
  while (true) {
    const long long take = std::min<long long>(left, static_cast<long long>(n));
    if (Budget().compare_exchange_weak(left, left - take)) {
      if (take == 0 && n > 0) {
        const char* kill = std::getenv("DT_FAULT_WRITE_KILL");
        if (kill != nullptr && std::strcmp(kill, "1") == 0) std::raise(SIGKILL);
        *fail = true;
      }
      return static_cast<size_t>(take);
    }
  }
}

}  // namespace

Status WriteAllToFd(int fd, const char* data, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    bool fail = false;
    const size_t allowed = Allowed(path, n - done, &fail);
    if (fail) return IoError(Errno("writing", path, ENOSPC) + " (disk full?)");
    const ssize_t w = ::write(fd, data + done, allowed);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return IoError(Errno("writing", path, errno) + " (disk full?)");
    if (w == 0) return IoError(Errno("writing", path, EIO));
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status WriteWholeFile(const std::string& path, const char* data, size_t n, bool fsync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(Errno("creating", path, errno) + "; check the directory exists and is writable");
  Status s = WriteAllToFd(fd, data, n, path);
  if (s.ok() && fsync && ::fsync(fd) != 0) s = IoError(Errno("fsync of", path, errno));
  if (::close(fd) != 0 && s.ok()) s = IoError(Errno("closing", path, errno));
  return s;
}

OutputFile::~OutputFile() { (void)Close(); }

Status OutputFile::Open(const std::string& path, bool append) {
  (void)Close();
  path_ = path;
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) return IoError(Errno("opening", path, errno) + "; check the directory exists and is writable");
  return Status::Ok();
}

Status OutputFile::Append(const std::string& text) {
  if (fd_ < 0) return Internal("write to '" + path_ + "' that is not open");
  return WriteAllToFd(fd_, text.data(), text.size(), path_);
}

Status OutputFile::Close() {
  if (fd_ < 0) return Status::Ok();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return IoError(Errno("closing", path_, errno));
  return Status::Ok();
}

}  // namespace dt
