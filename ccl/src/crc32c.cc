#include "crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace ftccl {

uint32_t Crc32c(const void* data, size_t len, uint32_t crc) {
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t c = ~crc;
  while (len > 0) {
    int n = len > static_cast<size_t>(INT_MAX / 2) ? INT_MAX / 2 : static_cast<int>(len);
    c = crc32_iscsi(p, n, c);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return ~c;
}

}  // namespace ftccl
