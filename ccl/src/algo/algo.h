// Collective algorithms over the transport. Each runs on the communicator's collective thread,
// posts non-blocking sends/receives and waits on them with the collective's deadline.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "ftccl/types.h"
#include "transport/transport.h"

namespace ftccl::algo {

// Scratch memory kept by the communicator across collectives, so that collectives do not pay
// for fresh pages (page faults and zeroing) every call. Contents are undefined.
class Scratch final {
 public:
  // A buffer of at least `bytes`, valid until the next Get of the same slot.
  uint8_t* Get(int slot, size_t bytes) {
    Buf& b = bufs_[static_cast<size_t>(slot)];
    if (b.n < bytes || !b.p) {
      b.p.reset(new uint8_t[std::max<size_t>(1, bytes)]);
      b.n = bytes;
    }
    return b.p.get();
  }

 private:
  struct Buf {
    std::unique_ptr<uint8_t[]> p;
    size_t n = 0;
  };
  std::array<Buf, 4> bufs_;
};

struct Ctx {
  transport::Transport* t = nullptr;
  Scratch* scratch = nullptr;
  int rank = 0;
  int size = 1;
  uint64_t coll_seq = 0;
  transport::Signature sig;
  Clock::time_point deadline;
  size_t slice_bytes = 1 << 20;
  // Allreduce of at most this many bytes uses recursive doubling (CommOptions).
  size_t small_allreduce_bytes = 0;

  transport::OpPtr Send(int peer, uint32_t tag, const void* buf, size_t len) const {
    return t->Send(peer, {coll_seq, tag}, sig, buf, len);
  }
  // Sends on what `received` (complete) put into its buffer: see Transport::Forward.
  transport::OpPtr Forward(int peer, uint32_t tag, const transport::OpPtr& received) const {
    return t->Forward(peer, {coll_seq, tag}, sig, received);
  }
  transport::OpPtr Recv(int peer, uint32_t tag, void* buf, size_t len) const {
    return t->Recv(peer, {coll_seq, tag}, sig, buf, len);
  }
  Status Wait(const transport::OpPtr& op) const { return t->Wait(op, deadline); }
  // True when every op has completed successfully (never blocks).
  static bool AllDone(const std::vector<transport::OpPtr>& ops) {
    for (const auto& op : ops) {
      if (!op->done.load(std::memory_order_acquire) || !op->status.ok()) return false;
    }
    return true;
  }
  Status WaitAll(const std::vector<transport::OpPtr>& ops) const {
    for (const auto& op : ops) {
      if (op) FTCCL_RETURN_IF_ERROR(Wait(op));
    }
    return Status::Ok();
  }
};

// Element ranges: a block of a buffer cut into n near-equal blocks, and its slices.
struct Range {
  size_t off = 0;  // elements
  size_t len = 0;  // elements
};
Range Block(size_t count, int n, int b);
// Number of pipeline slices of a block of `len` elements (at least 1, so empty blocks still
// carry one empty message and the collective's signature).
size_t NumSlices(size_t len, size_t slice_elems);
Range Slice(size_t len, size_t slice_elems, size_t k);
inline uint32_t Tag(uint32_t phase, uint32_t step, uint32_t slice) {
  return (phase & 0xF) << 28 | (step & 0xFFF) << 16 | (slice & 0xFFFF);
}
// Validates the geometry limits of the tag encoding.
Status CheckGeometry(const Ctx& ctx, size_t max_block_elems, size_t slice_elems);
size_t SliceElems(const Ctx& ctx, DataType dt);

// Allreduce: recursive doubling up to ctx.small_allreduce_bytes (latency-bound sizes), else
// the ring (bandwidth-bound sizes). Every rank must have the same threshold.
Status AllReduce(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                 ReduceOp op);
bool UsesRecursiveDoubling(const Ctx& ctx, size_t count, DataType dt);
Status AllReduceRecursiveDoubling(const Ctx& ctx, const void* send, void* recv, size_t count,
                                  DataType dt, ReduceOp op);
Status AllReduceRing(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                     ReduceOp op);
Status ReduceScatterRing(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                         ReduceOp op);
Status AllGatherRing(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt);
Status BroadcastChain(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                      int root);
Status ReduceChain(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt,
                   ReduceOp op, int root);
Status AllToAllPairwise(const Ctx& ctx, const void* send, void* recv, size_t count, DataType dt);
Status BarrierAll(const Ctx& ctx);

}  // namespace ftccl::algo
