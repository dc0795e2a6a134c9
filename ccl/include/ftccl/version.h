// ftccl's version. The macros are the version of the headers a caller compiled against;
// Version() is that of the library it links (they differ only with a stale build).
// Raise MINOR for a change of behaviour a caller or a measurement can see, PATCH for fixes.
#pragma once

#define FTCCL_VERSION_MAJOR 0
#define FTCCL_VERSION_MINOR 1
#define FTCCL_VERSION_PATCH 0
// MAJOR * 10000 + MINOR * 100 + PATCH, for comparisons in the preprocessor.
#define FTCCL_VERSION_CODE \
  (FTCCL_VERSION_MAJOR * 10000 + FTCCL_VERSION_MINOR * 100 + FTCCL_VERSION_PATCH)

namespace ftccl {

// "MAJOR.MINOR.PATCH" of the linked library, e.g. "0.1.0". Thread-safe; never null.
const char* Version();

}  // namespace ftccl
