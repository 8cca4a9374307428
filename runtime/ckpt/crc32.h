// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the per-tensor
// checksum of checkpoints. Crc32(data, n) of "123456789" is 0xCBF43926.
// Pass a previous result as `crc` to checksum data in pieces. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dt::rt {

uint32_t Crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace dt::rt
