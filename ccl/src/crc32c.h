// CRC32C (Castagnoli), the checksum of ftccl frames. Backed by ISA-L's crc32_iscsi, which
// picks the fastest instruction-set variant (SSE4.2 crc32 / PCLMULQDQ folding) at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ftccl {

// Standard CRC32C of `len` bytes, continuing from `crc` (0 to start).
// Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t len, uint32_t crc = 0);

}  // namespace ftccl
