// Recursive-doubling allreduce for small messages: log2(p) exchange steps of the whole buffer
// instead of the ring's 2(n-1) steps of 1/n of it, so a latency-bound collective pays for
// ceil(log2 n) (+2 when n is not a power of two) round trips instead of 2(n-1).
//
// With p the largest power of two <= n, ranks p..n-1 first fold their input into rank r-p and
// wait for the result from it at the end; ranks 0..p-1 exchange with rank r^mask for mask =
// 1, 2, .., p/2. Every combination puts the lower rank's operand first, so both partners of a
// step compute the same bits (and every rank ends with the same bits) whatever the operation.
// Each step sends from its own staging copy, so the next step never waits for the
// acknowledgement of what the previous one sent.
//
// Besides, every rank sends an empty message to its ring successor, alongside the first step:
// so that, as in every other algorithm, each rank hears from its predecessor in every
// collective, and a rank that called another collective (or another size) is told by the
// signature of what it receives (kMismatch) instead of waiting for data that never comes.
#include <cstring>
#include <vector>

#include "algo/algo.h"
#include "reduce.h"

namespace ftccl::algo {
namespace {

enum Phase : uint32_t { kFold = 3, kExchange = 4, kUnfold = 5, kAnnounce = 6 };

int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

Status AllReduceRecursiveDoubling(const Ctx& ctx, const void* send, void* recv, size_t count,
                                  DataType dt, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  const size_t bytes = count * DataTypeSize(dt);
  auto* out = static_cast<uint8_t*>(recv);
  if (send != recv && bytes > 0) std::memmove(out, send, bytes);
  if (n == 1) return Status::Ok();
  const int p = LargestPowerOfTwoAtMost(n);
  std::vector<transport::OpPtr> sends;
  const transport::OpPtr announced = ctx.Recv((r + n - 1) % n, Tag(kAnnounce, 0, 0), nullptr, 0);
  sends.push_back(ctx.Send((r + 1) % n, Tag(kAnnounce, 0, 0), nullptr, 0));
  if (r >= p) {
    // Folded: hand the input to rank r-p and take the result back from it.
    sends.push_back(ctx.Send(r - p, Tag(kFold, 0, 0), out, bytes));
    FTCCL_RETURN_IF_ERROR(ctx.WaitAll(sends));
    transport::OpPtr got = ctx.Recv(r - p, Tag(kUnfold, 0, 0), out, bytes);
    FTCCL_RETURN_IF_ERROR(ctx.Wait(got));
    return ctx.Wait(announced);
  }
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  uint8_t* incoming = ctx.scratch->Get(0, bytes);
  uint8_t* staging = ctx.scratch->Get(1, bytes * static_cast<size_t>(steps));
  auto combine = [&](int partner) {
    // The lower rank's operand first: both partners compute the same bits.
    if (r < partner) {
      ReduceInto(dt, op, out, out, incoming, count);
    } else {
      ReduceInto(dt, op, out, incoming, out, count);
    }
  };
  if (r + p < n) {
    transport::OpPtr got = ctx.Recv(r + p, Tag(kFold, 0, 0), incoming, bytes);
    FTCCL_RETURN_IF_ERROR(ctx.Wait(got));
    combine(r + p);
  }
  for (int s = 0; s < steps; ++s) {
    const int partner = r ^ (1 << s);
    uint8_t* copy = staging + static_cast<size_t>(s) * bytes;
    if (bytes > 0) std::memcpy(copy, out, bytes);
    transport::OpPtr got = ctx.Recv(partner, Tag(kExchange, s, 0), incoming, bytes);
    sends.push_back(ctx.Send(partner, Tag(kExchange, s, 0), copy, bytes));
    FTCCL_RETURN_IF_ERROR(ctx.Wait(got));
    combine(partner);
  }
  FinalizeReduce(dt, op, out, count, n);
  if (r + p < n) sends.push_back(ctx.Send(r + p, Tag(kUnfold, 0, 0), out, bytes));
  FTCCL_RETURN_IF_ERROR(ctx.WaitAll(sends));
  return ctx.Wait(announced);
}

Status AllReduce(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                 ReduceOp op) {
  if (UsesRecursiveDoubling(ctx, count, dt)) {
    return AllReduceRecursiveDoubling(ctx, send, recv, count, dt, op);
  }
  return AllReduceRing(ctx, send, recv, count, dt, op);
}

bool UsesRecursiveDoubling(const Ctx& ctx, size_t count, DataType dt) {
  return ctx.size > 1 && count * DataTypeSize(dt) <= ctx.small_allreduce_bytes;
}

}  // namespace ftccl::algo
