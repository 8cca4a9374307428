// Helpers shared by the fuzz harnesses (tests/fuzz/*_fuzz.cc).
//
// Each harness defines LLVMFuzzerTestOneInput(data, size): it hands the bytes
// to one parser of the project and ignores the result, so the only failures
// are crashes, hangs, sanitizer reports and uncaught exceptions (the parsers
// promise errors as values). Built two ways (tests/fuzz/CMakeLists.txt):
// with clang's -fsanitize=fuzzer for scripts/fuzz.sh, and with replay_main.cc
// (any compiler) so ctest replays the checked-in corpora on every build.
//
// The harnesses call the parsers' in-memory entry points (ModelFromJsonText,
// ParseManifest, FileTokenSource::FromTokenBytes, ...), which the file
// loaders wrap: no temporary files, so libFuzzer runs 10-100x more inputs a
// second than through the loaders. The harnesses pass made-up paths
// ("fuzz/model.json") for the error messages.
#pragma once

#include <cstdint>
#include <string>

namespace dt::fuzz {

inline std::string Text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace dt::fuzz
