// Fuzz target: a checkpoint manifest. The input becomes step-1/manifest.json
// next to a 64-byte tensors.bin, with a *matching* CRC-32 sidecar so the
// fuzzer reaches the manifest's cross-checks instead of stopping at the
// checksum.
#include <cstdio>
#include <vector>

#include "runtime/ckpt/ckpt_format.h"
#include "runtime/ckpt/crc32.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string manifest = dt::fuzz::InputFile(data, size, "manifest.json");
  const std::string dir = manifest.substr(0, manifest.rfind('/')) + "/step-1";
  ::mkdir(dir.c_str(), 0700);
  std::rename(manifest.c_str(), (dir + "/manifest.json").c_str());
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x\n", dt::rt::Crc32(data, size));
  if (FILE* f = std::fopen((dir + "/manifest.crc32").c_str(), "wb")) {
    std::fputs(crc, f);
    std::fclose(f);
  }
  static const std::vector<uint8_t> blob(64, 0x3f);
  if (FILE* f = std::fopen((dir + "/tensors.bin").c_str(), "wb")) {
    std::fwrite(blob.data(), 1, blob.size(), f);
    std::fclose(f);
  }
  (void)dt::rt::ReadCheckpoint(dir);
  return 0;
}
