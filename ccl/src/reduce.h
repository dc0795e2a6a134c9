// Element-wise reduction kernels used by the collective algorithms.
#pragma once

#include <cstddef>

#include "ftccl/types.h"

namespace ftccl {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b. kAvg reduces as kSum; the division
// happens once in FinalizeReduce.
void ReduceInto(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t count);

// Applies the final step of `op` to a fully reduced buffer (avg: divide by nranks; else no-op).
void FinalizeReduce(DataType dt, ReduceOp op, void* buf, size_t count, int nranks);

}  // namespace ftccl
