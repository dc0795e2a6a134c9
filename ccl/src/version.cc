#include "ftccl/version.h"

#define FTCCL_STR2(x) #x
#define FTCCL_STR(x) FTCCL_STR2(x)

namespace ftccl {

const char* Version() {
  return FTCCL_STR(FTCCL_VERSION_MAJOR) "." FTCCL_STR(FTCCL_VERSION_MINOR) "." FTCCL_STR(
      FTCCL_VERSION_PATCH);
}

}  // namespace ftccl

#undef FTCCL_STR
#undef FTCCL_STR2
