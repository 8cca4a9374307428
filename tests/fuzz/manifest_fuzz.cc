// Fuzz target: a checkpoint manifest, as step-1/manifest.json beside a
// 64-byte tensors.bin. The CRC-32 sidecar text is computed from the input so
// the fuzzer gets past the checksum to the manifest's own checks; an entry
// that passes them is then cut out of the blob and checked against its CRC.
#include <cstdio>
#include <string>

#include "runtime/ckpt/ckpt_format.h"
#include "runtime/ckpt/crc32.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x\n", dt::rt::Crc32(data, size));
  auto m = dt::rt::ParseManifest(dt::fuzz::Text(data, size), crc, "fuzz/step-1/manifest.json");
  if (!m.ok()) return 0;
  static const std::string blob(64, '\x3f');
  (void)dt::rt::DecodeCheckpoint(*m, blob, "fuzz/step-1/" + m->blob);
  return 0;
}
