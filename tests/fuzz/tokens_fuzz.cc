// Fuzz target: a token file (uint16 ids, vocab 256: ids out of range must be
// errors) and a text file; when one opens, one sample is drawn from it.
#include <algorithm>
#include <vector>

#include "runtime/data/file_source.h"
#include "tests/fuzz/fuzz_input.h"

namespace {
void Draw(const dt::rt::FileTokenSource& s) {
  if (s.num_tokens() < 2) return;
  const int64_t len = std::min<int64_t>(s.num_tokens(), 16);
  std::vector<int32_t> out(len);
  s.Sample(7, 3, len, out.data());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes = dt::fuzz::Text(data, size);
  using dt::rt::FileTokenSource;
  if (auto t = FileTokenSource::FromTokenBytes(bytes, "fuzz/tokens.bin", 256); t.ok()) Draw(**t);
  if (auto t = FileTokenSource::FromTextBytes(bytes, "fuzz/tokens.txt"); t.ok()) Draw(**t);
  return 0;
}
