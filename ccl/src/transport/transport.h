// The transport interface: reliable, message-oriented sends and receives between ranks over
// every rail, with deadlines and a sticky communicator-wide error.
//
// A message is `len` bytes identified by (coll_seq, tag) between an ordered pair of ranks and
// carries the Signature of the collective it belongs to; a receive whose signature or length
// differs from the sender's fails the communicator with kMismatch. Send and Recv never block:
// they return an Op that completes later. A send completes only when the receiver has
// acknowledged every chunk, so the sender can resend any chunk (on any connection) until then:
// that is what makes failover lossless. Buffers must stay valid until the Op completes.
//
// Thread-safety: Send, Recv, Wait, Fail, error and Stats may be called from any thread. All
// socket work happens on the transport's own progress thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ftccl/communicator.h"
#include "ftccl/status.h"
#include "ftccl/types.h"

namespace ftccl::transport {

struct MsgKey {
  uint64_t coll_seq = 0;
  uint32_t tag = 0;
  bool operator<(const MsgKey& o) const {
    return coll_seq != o.coll_seq ? coll_seq < o.coll_seq : tag < o.tag;
  }
  bool operator==(const MsgKey& o) const { return coll_seq == o.coll_seq && tag == o.tag; }
};

// What collective a message belongs to; must match between sender and receiver.
struct Signature {
  CollKind kind = CollKind::kBarrier;
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  uint64_t count = 0;
  bool operator==(const Signature& o) const {
    return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root && count == o.count;
  }
  std::string ToString() const;
};

// A posted send or receive. Fields other than `done`/`status` belong to the transport.
struct Op {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = -1;
  MsgKey key;
  Signature sig;
  uint8_t* buf = nullptr;
  size_t len = 0;
  // Payload CRC32C of every chunk: reused from the frames a forwarded receive was checked
  // against, or computed when the chunk is first handed to a path (chunk_crc_pending), just
  // before the kernel copies the same bytes into the socket, so that they are read from memory
  // once.
  std::vector<uint32_t> chunk_crcs;
  std::vector<bool> chunk_crc_pending;
  size_t chunk_bytes = 0;
  // A receive: the payload CRC32C of every chunk accepted into `buf`, as checked on arrival,
  // so that forwarding the same bytes (Transport::Forward) does not read them again. Written
  // by the progress thread before `done`.
  struct RxChunk {
    uint64_t offset = 0;
    uint32_t len = 0;
    uint32_t crc = 0;
  };
  std::vector<RxChunk> rx_crcs;
  // Progress-thread bookkeeping.
  size_t chunks_left = 0;
  bool finished = false;
  // Threads sleeping in Wait on this op (guarded by the engine's wait mutex): only then does
  // its completion wake anyone, so a send acknowledged while the caller waits on a receive
  // costs no context switch.
  int waiters = 0;
  // Completion, published with release semantics once `status` is final.
  std::atomic<bool> done{false};
  Status status;
};
using OpPtr = std::shared_ptr<Op>;

// "rank P rail R channel C": how logs and errors name one connection.
std::string ConnLabel(int peer, int rail, int channel);

class Transport {
 public:
  virtual ~Transport() = default;

  // Declares that this rank now runs collective `coll_seq` with signature `sig` (collectives
  // begin in increasing order). Every data chunk is checked against the signature of its
  // collective, even where no receive is posted, and chunks of a collective that has not begun
  // here yet are held unacknowledged until it does: a send completes only once the receiver
  // has accepted it into the matching collective.
  virtual void Begin(uint64_t coll_seq, const Signature& sig) = 0;

  virtual OpPtr Send(int peer, const MsgKey& key, const Signature& sig, const void* buf,
                     size_t len) = 0;
  virtual OpPtr Recv(int peer, const MsgKey& key, const Signature& sig, void* buf, size_t len) = 0;
  // Sends what the completed receive `received` put into its buffer, unchanged (a ring's or a
  // chain's next hop): as Send(peer, key, sig, received->buf, received->len), except that a
  // chunk whose bytes arrived as one checked frame keeps that frame's CRC instead of being
  // read again to compute it. Every byte on the wire is still covered by a CRC of its bytes.
  virtual OpPtr Forward(int peer, const MsgKey& key, const Signature& sig,
                        const OpPtr& received) = 0;

  // Waits until `op` completes (its status), the transport fails (the sticky error) or
  // `deadline` passes (kTimeout).
  virtual Status Wait(const OpPtr& op, Clock::time_point deadline) = 0;

  // Puts the communicator into the sticky error state `why`: every pending op fails with it
  // and every peer is told to abort collective `coll_seq`. The first call wins.
  virtual void Fail(const Status& why, uint64_t coll_seq) = 0;
  virtual Status error() const = 0;
  // The sticky error where it concerns collective `coll_seq` (the failed collective or a later
  // one), else Ok: a collective before the failed one still runs (a peer that is ahead may
  // abort its next collective while this rank has yet to take part in the current one).
  virtual Status ErrorFor(uint64_t coll_seq) const = 0;

  virtual CommStats Stats() const = 0;
  // The data path's events since the last call (see ftccl::Event).
  virtual std::vector<Event> DrainEvents() = 0;

  // Orderly close: tells every peer (with a final acknowledgement), then stops the progress
  // thread and closes every socket. Bounded in time. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace ftccl::transport
