// What a received frame may claim: the checks that keep a lying peer from steering the chunk
// engine (rx.cc). A frame whose header CRC is valid can still lie about its fields: a payload
// that reaches past its message, a message larger than its collective or than staging allows,
// an acknowledgement of chunks never sent, a collective far in the future. Each check is a pure
// function of the header and what this rank knows (FrameContext); it returns OK or a kCorrupt
// Status whose message names the lie ("data frame: offset 5 + length 9 is past the end of its
// 10-byte message").
//
// A refused frame is a path error: the engine fails that connection only (the other paths and
// the communicator go on, as for a corrupt header). What is a genuine collective mismatch
// (a signature or message length that differs from this rank's, both in range) is not checked
// here: the engine reports it as kMismatch, by design.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ftccl/status.h"
#include "wire.h"

namespace ftccl::transport::engine {

// How far a correct peer's collective sequence can be ahead of this rank's current one. A
// rank's sends of collective N complete only once every receiver has begun N (chunks of a
// collective not begun are held unacknowledged), so a peer is in practice at most one or two
// collectives ahead; 16 leaves ample room and still bounds what a liar can make this rank hold.
inline constexpr uint64_t kCollWindow = 16;
// The largest element count of a collective (the communicator refuses larger ones).
inline constexpr uint64_t kMaxCount = uint64_t{1} << 40;
// Bytes that messages arriving before their receive may hold in staging, all peers together.
// A correct peer is at most kCollWindow collectives ahead, and most of its messages are
// pipeline slices; a larger claim is refused rather than allocated.
inline constexpr uint64_t kMaxStagedBytes = uint64_t{1} << 30;
// The longest abort reason (a correct peer sends a one-line error message).
inline constexpr uint32_t kMaxAbortReason = 64u << 10;

// What this rank knows when a frame arrives from one peer.
struct FrameContext {
  uint64_t comm_id = 0;
  uint32_t max_frame = 0;  // the largest payload a frame may announce
  int size = 0;            // ranks in the communicator
  bool begun = false;      // a collective has begun on this rank
  uint64_t cur_seq = 0;    // the collective begun last
  uint64_t sent_end = 0;   // every data chunk whose header this rank wrote to the peer is below this
};

// Magic, version, header CRC, communicator id and announced payload length. A failure here
// means the byte stream cannot be trusted at all.
Status CheckHeader(const wire::FrameHeader& h, const FrameContext& ctx);

// The fields of a header-valid frame for its type: a known type that may appear after setup
// (not kHello), payload lengths each type allows, and for kData the geometry and signature
// (CheckData), for kAck/kBye the acknowledged values, for kNack the chunk named.
Status CheckFrame(const wire::FrameHeader& h, const FrameContext& ctx);

// A kData frame: signature in range (kind, dtype, op, root < size, count <= kMaxCount), the
// collective not more than kCollWindow ahead, the message no larger than its collective's
// count elements, and [offset, offset + length) inside the message (without overflow).
Status CheckData(const wire::FrameHeader& h, const FrameContext& ctx);

// Staging a message that arrived before its receive: `msg_len` more bytes on top of the
// `staged` bytes held now must stay within kMaxStagedBytes.
Status CheckStaging(uint64_t msg_len, uint64_t staged);

// An acknowledgement's selective ranges (`bytes` of payload: [first, end) pairs of uint64):
// a whole number of pairs, each non-empty and below `sent_end`.
Status CheckSackRanges(const void* data, size_t bytes, uint64_t sent_end);

// A readable name of a frame type for messages ("data", "ack", ..., "type 42").
std::string FrameTypeName(uint8_t type);

}  // namespace ftccl::transport::engine
