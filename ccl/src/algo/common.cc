#include <algorithm>

#include "algo/algo.h"

namespace ftccl::algo {

Range Block(size_t count, int n, int b) {
  size_t base = count / static_cast<size_t>(n);
  size_t rem = count % static_cast<size_t>(n);
  size_t ub = static_cast<size_t>(b);
  return {ub * base + std::min(ub, rem), base + (ub < rem ? 1 : 0)};
}

size_t NumSlices(size_t len, size_t slice_elems) {
  return len == 0 ? 1 : (len + slice_elems - 1) / slice_elems;
}

Range Slice(size_t len, size_t slice_elems, size_t k) {
  size_t off = k * slice_elems;
  if (off >= len) return {len, 0};
  return {off, std::min(slice_elems, len - off)};
}

size_t SliceElems(const Ctx& ctx, DataType dt) {
  return std::max<size_t>(1, ctx.slice_bytes / DataTypeSize(dt));
}

Status CheckGeometry(const Ctx& ctx, size_t max_block_elems, size_t slice_elems) {
  if (ctx.size > 4096) return InvalidArgument("at most 4096 ranks are supported");
  if (NumSlices(max_block_elems, slice_elems) > 0xFFFF) {
    return InvalidArgument("message too large for slice_bytes=" + std::to_string(ctx.slice_bytes) +
                           " (more than 65535 slices per block): raise FTCCL_SLICE_BYTES");
  }
  return Status::Ok();
}

Status BarrierAll(const Ctx& ctx) {
  std::vector<transport::OpPtr> ops;
  for (int p = 0; p < ctx.size; ++p) {
    if (p == ctx.rank) continue;
    ops.push_back(ctx.Recv(p, 0, nullptr, 0));
    ops.push_back(ctx.Send(p, 0, nullptr, 0));
  }
  return ctx.WaitAll(ops);
}

Status AllToAllPairwise(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt) {
  const size_t bytes = count * DataTypeSize(dt);
  auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  if (in != out && bytes > 0) {
    std::copy(in + ctx.rank * bytes, in + (ctx.rank + 1) * bytes, out + ctx.rank * bytes);
  }
  std::vector<transport::OpPtr> recvs, sends;
  // In place, a block may only be overwritten once it has been sent (and acknowledged).
  const bool in_place = in == out && ctx.size > 1;
  for (int i = 1; i < ctx.size; ++i) {
    int to = (ctx.rank + i) % ctx.size;
    int from = (ctx.rank - i + ctx.size) % ctx.size;
    sends.push_back(ctx.Send(to, 0, in + to * bytes, bytes));
    if (!in_place) recvs.push_back(ctx.Recv(from, 0, out + from * bytes, bytes));
  }
  if (in_place) {
    uint8_t* tmp = ctx.scratch->Get(0, bytes * ctx.size);
    for (int i = 1; i < ctx.size; ++i) {
      int from = (ctx.rank - i + ctx.size) % ctx.size;
      recvs.push_back(ctx.Recv(from, 0, tmp + from * bytes, bytes));
    }
    FTCCL_RETURN_IF_ERROR(ctx.WaitAll(recvs));
    FTCCL_RETURN_IF_ERROR(ctx.WaitAll(sends));
    for (int p = 0; p < ctx.size; ++p) {
      if (p != ctx.rank && bytes > 0) std::copy(tmp + p * bytes, tmp + (p + 1) * bytes, out + p * bytes);
    }
    return Status::Ok();
  }
  FTCCL_RETURN_IF_ERROR(ctx.WaitAll(recvs));
  return ctx.WaitAll(sends);
}

}  // namespace ftccl::algo
