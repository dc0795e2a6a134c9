// Ring algorithms (reduce-scatter, allgather, and allreduce as the two back to back), pipelined
// by slices: a slice is forwarded as soon as it has arrived (and been reduced), so every step's
// transfers overlap. Buffer reuse waits for the acknowledgement of what was sent from it, since
// unacknowledged data may have to be resent.
#include <cstring>
#include <vector>

#include "algo/algo.h"
#include "reduce.h"

namespace ftccl::algo {
namespace {

enum Phase : uint32_t { kReduceScatter = 1, kAllGather = 2 };

int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

Status AllReduceRing(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                     ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = DataTypeSize(dt);
  auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  if (n == 1) {
    if (in != out && count > 0) std::memmove(out, in, count * es);
    return Status::Ok();
  }
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  const size_t se = SliceElems(ctx, dt);
  const size_t max_block = Block(count, n, 0).len;
  FTCCL_RETURN_IF_ERROR(CheckGeometry(ctx, max_block, se));
  const int steps = n - 1;
  const bool in_place = in == out;
  // One receive area per reduce-scatter step, so every receive can be posted up front and
  // data never waits in a staging copy. A partial sum is reduced into the area it arrived in
  // (still in the cache) and forwarded from there; only the last step writes `out`.
  uint8_t* tmp = ctx.scratch->Get(0, steps * max_block * es);
  auto tmp_at = [&](int s) { return tmp + s * max_block * es; };

  // rs_sends[s][k], rs_recvs[s][k], ag_*: the ops of every step and slice.
  std::vector<std::vector<transport::OpPtr>> rs_sends(steps), rs_recvs(steps), ag_sends(steps),
      ag_recvs(steps);
  auto post_rs_recv = [&](int s) {
    Range b = Block(count, n, Mod(r - s - 1, n));
    size_t ns = NumSlices(b.len, se);
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(b.len, se, k);
      rs_recvs[s].push_back(ctx.Recv(prev, Tag(kReduceScatter, s, k), tmp_at(s) + sl.off * es, sl.len * es));
    }
  };
  // Allgather step s receives block r-s into `out`. Out of place nothing else touches that
  // block of `out` (reduce-scatter writes only block r+1 there), so every allgather receive is
  // posted up front and early data lands in place. In place, block r-s is still input: step 0
  // (block r) was sent from it and must be acknowledged first; step s > 0 waits until
  // reduce-scatter step s-1 has read it.
  int ag_posted = 0;  // allgather receives are posted for steps < ag_posted
  int rs_reduced = 0;  // reduce-scatter steps whose every slice has been reduced
  auto post_ag_recv = [&](int s) -> Status {
    if (in_place && s == 0) FTCCL_RETURN_IF_ERROR(ctx.WaitAll(rs_sends[0]));
    ag_posted = s + 1;
    Range b = Block(count, n, Mod(r - s, n));
    size_t ns = NumSlices(b.len, se);
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(b.len, se, k);
      ag_recvs[s].push_back(ctx.Recv(prev, Tag(kAllGather, s, k), out + (b.off + sl.off) * es, sl.len * es));
    }
    return Status::Ok();
  };
  // Posts the allgather receives whose buffers are already free, without waiting.
  auto try_post_ag = [&]() -> Status {
    while (ag_posted < steps) {
      const int s = ag_posted;
      const bool ready = !in_place || (s == 0 ? ctx.AllDone(rs_sends[0]) : rs_reduced >= s);
      if (!ready) break;
      FTCCL_RETURN_IF_ERROR(post_ag_recv(s));
    }
    return Status::Ok();
  };

  // Reduce-scatter step 0 sends this rank's own block straight from the input.
  {
    Range b = Block(count, n, r);
    size_t ns = NumSlices(b.len, se);
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(b.len, se, k);
      rs_sends[0].push_back(ctx.Send(next, Tag(kReduceScatter, 0, k), in + (b.off + sl.off) * es, sl.len * es));
    }
  }
  for (int s = 0; s < steps; ++s) post_rs_recv(s);
  FTCCL_RETURN_IF_ERROR(try_post_ag());
  for (int s = 0; s < steps; ++s) {
    Range b = Block(count, n, Mod(r - s - 1, n));
    size_t ns = NumSlices(b.len, se);
    const bool last = s + 1 == steps;
    for (size_t k = 0; k < ns; ++k) {
      FTCCL_RETURN_IF_ERROR(ctx.Wait(rs_recvs[s][k]));
      Range sl = Slice(b.len, se, k);
      uint8_t* part = tmp_at(s) + sl.off * es;
      uint8_t* dst = last ? out + (b.off + sl.off) * es : part;
      ReduceInto(dt, op, dst, in + (b.off + sl.off) * es, part, sl.len);
      if (!last) {
        rs_sends[s + 1].push_back(ctx.Send(next, Tag(kReduceScatter, s + 1, k), dst, sl.len * es));
      } else {
        // Fully reduced: this rank owns block r+1. Finish it and start the allgather.
        FinalizeReduce(dt, op, dst, sl.len, n);
        ag_sends[0].push_back(ctx.Send(next, Tag(kAllGather, 0, k), dst, sl.len * es));
      }
      if (k + 1 == ns) rs_reduced = s + 1;
      // In place, post allgather receives as early as their buffers are free, so that data
      // arriving early lands in place instead of in a staging copy.
      FTCCL_RETURN_IF_ERROR(try_post_ag());
    }
  }
  for (int s = 0; s < steps; ++s) {
    if (ag_posted <= s) FTCCL_RETURN_IF_ERROR(post_ag_recv(s));
    Range b = Block(count, n, Mod(r - s, n));
    size_t ns = NumSlices(b.len, se);
    for (size_t k = 0; k < ns; ++k) {
      FTCCL_RETURN_IF_ERROR(ctx.Wait(ag_recvs[s][k]));
      FTCCL_RETURN_IF_ERROR(try_post_ag());
      if (s + 1 < steps) {
        ag_sends[s + 1].push_back(ctx.Forward(next, Tag(kAllGather, s + 1, k), ag_recvs[s][k]));
      }
    }
  }
  // The receive areas are reused by the next collective: what was sent from them must be
  // acknowledged first (it may have to be resent until then).
  for (auto& v : rs_sends) FTCCL_RETURN_IF_ERROR(ctx.WaitAll(v));
  for (auto& v : ag_sends) FTCCL_RETURN_IF_ERROR(ctx.WaitAll(v));
  return Status::Ok();
}

Status ReduceScatterRing(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                         ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = DataTypeSize(dt);
  const size_t bytes = count * es;
  auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  if (n == 1) {
    if (in != out && bytes > 0) std::memmove(out, in, bytes);
    return Status::Ok();
  }
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  const size_t se = SliceElems(ctx, dt);
  FTCCL_RETURN_IF_ERROR(CheckGeometry(ctx, count, se));
  const int steps = n - 1;
  const size_t ns = NumSlices(count, se);
  uint8_t* tmp = ctx.scratch->Get(0, steps * bytes);
  uint8_t* work = ctx.scratch->Get(1, 2 * bytes);
  auto tmp_at = [&](int s) { return tmp + s * bytes; };
  auto work_at = [&](int s) { return work + (s % 2) * bytes; };
  std::vector<std::vector<transport::OpPtr>> sends(steps), recvs(steps);
  auto post_recv = [&](int s) {
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(count, se, k);
      recvs[s].push_back(ctx.Recv(prev, Tag(kReduceScatter, s, k), tmp_at(s) + sl.off * es, sl.len * es));
    }
  };
  // Step s sends block r-s-1 and receives block r-s-2; after n-1 steps this rank holds block r.
  {
    const uint8_t* b = in + static_cast<size_t>(Mod(r - 1, n)) * bytes;
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(count, se, k);
      sends[0].push_back(ctx.Send(next, Tag(kReduceScatter, 0, k), b + sl.off * es, sl.len * es));
    }
  }
  for (int s = 0; s < steps; ++s) post_recv(s);
  for (int s = 0; s < steps; ++s) {
    const uint8_t* mine = in + static_cast<size_t>(Mod(r - s - 2, n)) * bytes;
    const bool last = s + 1 == steps;
    uint8_t* acc = last ? out : work_at(s);
    for (size_t k = 0; k < ns; ++k) {
      FTCCL_RETURN_IF_ERROR(ctx.Wait(recvs[s][k]));
      // work_at(s) was last sent from at step s-1: that copy must be acknowledged first.
      if (!last && s >= 2) FTCCL_RETURN_IF_ERROR(ctx.Wait(sends[s - 1][k]));
      Range sl = Slice(count, se, k);
      ReduceInto(dt, op, acc + sl.off * es, mine + sl.off * es, tmp_at(s) + sl.off * es, sl.len);
      if (!last) {
        sends[s + 1].push_back(ctx.Send(next, Tag(kReduceScatter, s + 1, k), acc + sl.off * es, sl.len * es));
      } else {
        FinalizeReduce(dt, op, acc + sl.off * es, sl.len, n);
      }
    }
  }
  for (auto& v : sends) FTCCL_RETURN_IF_ERROR(ctx.WaitAll(v));
  return Status::Ok();
}

Status AllGatherRing(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = DataTypeSize(dt);
  const size_t bytes = count * es;
  auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  if (in != out + r * bytes && bytes > 0) std::memmove(out + r * bytes, in, bytes);
  if (n == 1) return Status::Ok();
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  const size_t se = SliceElems(ctx, dt);
  FTCCL_RETURN_IF_ERROR(CheckGeometry(ctx, count, se));
  const int steps = n - 1;
  const size_t ns = NumSlices(count, se);
  std::vector<std::vector<transport::OpPtr>> recvs(steps);
  std::vector<transport::OpPtr> sends;
  // Every block is written once and only sent after it was written: post all receives now.
  for (int s = 0; s < steps; ++s) {
    uint8_t* b = out + static_cast<size_t>(Mod(r - s - 1, n)) * bytes;
    for (size_t k = 0; k < ns; ++k) {
      Range sl = Slice(count, se, k);
      recvs[s].push_back(ctx.Recv(prev, Tag(kAllGather, s, k), b + sl.off * es, sl.len * es));
    }
  }
  for (size_t k = 0; k < ns; ++k) {
    Range sl = Slice(count, se, k);
    sends.push_back(ctx.Send(next, Tag(kAllGather, 0, k), out + r * bytes + sl.off * es, sl.len * es));
  }
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < ns; ++k) {
      FTCCL_RETURN_IF_ERROR(ctx.Wait(recvs[s][k]));
      if (s + 1 < steps) sends.push_back(ctx.Forward(next, Tag(kAllGather, s + 1, k), recvs[s][k]));
    }
  }
  return ctx.WaitAll(sends);
}

}  // namespace ftccl::algo
