// Pipelined chain algorithms rooted at one rank: broadcast flows root -> root+1 -> ...;
// reduce flows toward the root, each rank adding its contribution to a slice before passing it.
//
// In a chain, a rank learns nothing from the ranks beyond its neighbours, so a rank that
// called a different collective could go unnoticed by the others. Every hop checks the
// collective's signature, so once the last hop is through, the root knows the whole chain
// agreed; with three or more ranks it then tells every other rank with an empty message, and
// nobody returns success from a collective that another rank saw as a mismatch.
#include <cstring>
#include <vector>

#include "algo/algo.h"
#include "reduce.h"

namespace ftccl::algo {
namespace {
enum Phase : uint32_t { kBroadcast = 3, kReduce = 4, kChainDone = 5 };
int Mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Status BroadcastChain(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                      int root) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = DataTypeSize(dt);
  auto* out = static_cast<uint8_t*>(recv);
  const int pos = Mod(r - root, n);
  if (pos == 0 && send != recv && count > 0) std::memmove(out, send, count * es);
  if (n == 1) return Status::Ok();
  const size_t se = SliceElems(ctx, dt);
  FTCCL_RETURN_IF_ERROR(CheckGeometry(ctx, count, se));
  const size_t ns = NumSlices(count, se);
  const bool has_next = pos + 1 < n;
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  // The root sends from its input, which the caller keeps unchanged until we return.
  const uint8_t* src = pos == 0 ? static_cast<const uint8_t*>(send) : out;
  std::vector<transport::OpPtr> recvs, sends;
  if (pos > 0) {
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(count, se, k);
      recvs.push_back(ctx.Recv(prev, Tag(kBroadcast, 0, k), out + sl.off * es, sl.len * es));
    }
  }
  const bool close_loop = n >= 3;
  transport::OpPtr done;
  if (close_loop) {
    // The root hears from the far end; the others hear from the root.
    done = pos == 0 ? ctx.Recv(prev, Tag(kChainDone, 0, 0), nullptr, 0)
                    : (pos < n - 1 ? ctx.Recv(root, Tag(kChainDone, 1, 0), nullptr, 0) : nullptr);
  }
  for (size_t k = 0; k < ns; ++k) {
    if (pos > 0) FTCCL_RETURN_IF_ERROR(ctx.Wait(recvs[k]));
    if (!has_next) continue;
    if (pos > 0) {
      // Passing on what arrived: its checked CRCs go with it.
      sends.push_back(ctx.Forward(next, Tag(kBroadcast, 0, k), recvs[k]));
    } else {
      Range sl = Slice(count, se, k);
      sends.push_back(ctx.Send(next, Tag(kBroadcast, 0, k), src + sl.off * es, sl.len * es));
    }
  }
  if (close_loop && pos == n - 1) sends.push_back(ctx.Send(next, Tag(kChainDone, 0, 0), nullptr, 0));
  if (done) FTCCL_RETURN_IF_ERROR(ctx.Wait(done));
  if (close_loop && pos == 0) {
    for (int p = 0; p < n; ++p) {
      if (p != r && p != prev) sends.push_back(ctx.Send(p, Tag(kChainDone, 1, 0), nullptr, 0));
    }
  }
  return ctx.WaitAll(sends);
}

Status ReduceChain(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                   ReduceOp op, int root) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = DataTypeSize(dt);
  auto* in = static_cast<const uint8_t*>(send);
  const int pos = Mod(r - root, n);
  if (n == 1) {
    if (recv != send && count > 0) std::memmove(recv, send, count * es);
    FinalizeReduce(dt, op, recv, count, n);
    return Status::Ok();
  }
  const size_t se = SliceElems(ctx, dt);
  FTCCL_RETURN_IF_ERROR(CheckGeometry(ctx, count, se));
  const size_t ns = NumSlices(count, se);
  const int to = Mod(r - 1, n), from = Mod(r + 1, n);  // data flows toward the root
  const bool first = pos == n - 1;
  uint8_t* tmp = nullptr;
  uint8_t* acc = nullptr;
  if (!first) {
    tmp = ctx.scratch->Get(0, count * es);
    acc = pos == 0 ? static_cast<uint8_t*>(recv) : ctx.scratch->Get(1, count * es);
  }
  std::vector<transport::OpPtr> recvs, sends;
  if (!first) {
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(count, se, k);
      recvs.push_back(ctx.Recv(from, Tag(kReduce, 0, k), tmp + sl.off * es, sl.len * es));
    }
  }
  for (size_t k = 0; k < ns; ++k) {
    Range sl = Slice(count, se, k);
    const uint8_t* data = in + sl.off * es;
    if (!first) {
      FTCCL_RETURN_IF_ERROR(ctx.Wait(recvs[k]));
      ReduceInto(dt, op, acc + sl.off * es, data, tmp + sl.off * es, sl.len);
      data = acc + sl.off * es;
    }
    if (pos == 0) {
      FinalizeReduce(dt, op, acc + sl.off * es, sl.len, n);
    } else {
      sends.push_back(ctx.Send(to, Tag(kReduce, 0, k), data, sl.len * es));
    }
  }
  if (n >= 3) {
    if (pos == 0) {
      for (int p = 0; p < n; ++p) {
        if (p != r) sends.push_back(ctx.Send(p, Tag(kChainDone, 0, 0), nullptr, 0));
      }
    } else {
      FTCCL_RETURN_IF_ERROR(ctx.Wait(ctx.Recv(root, Tag(kChainDone, 0, 0), nullptr, 0)));
    }
  }
  return ctx.WaitAll(sends);
}

}  // namespace ftccl::algo
