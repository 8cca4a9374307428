// Helpers shared by the fuzz harnesses (tests/fuzz/*_fuzz.cc).
//
// Each harness defines LLVMFuzzerTestOneInput(data, size): it hands the bytes
// to one parser of the project and ignores the result, so the only failures
// are crashes, hangs, sanitizer reports and uncaught exceptions (the parsers
// promise errors as values). Built two ways (tests/fuzz/CMakeLists.txt):
// with clang's -fsanitize=fuzzer for scripts/fuzz.sh, and with replay_main.cc
// (any compiler) so ctest replays the checked-in corpora on every build.
//
// Path-based parsers get the bytes through a file: InputFile writes them to a
// per-process path under /tmp (overwritten on each call; not thread-safe,
// libFuzzer calls one input at a time).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace dt::fuzz {

// Writes the input to /tmp/dtfuzz-<pid>/<name> and returns that path.
inline std::string InputFile(const uint8_t* data, size_t size, const std::string& name) {
  static const std::string dir = [] {
    std::string d = "/tmp/dtfuzz-" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  const std::string path = dir + "/" + name;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

inline std::string Text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace dt::fuzz
