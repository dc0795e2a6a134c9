// The ftccl wire protocol: fixed 80-byte frame headers, optionally followed by a payload.
//
// DATA frames carry one chunk of one message. A message is identified by (coll_seq, tag) between
// an ordered pair of ranks; chunk_seq numbers every chunk the sender ever sent to that peer, so
// the receiver can acknowledge cumulatively (ACK: all chunk_seq < value received), recognise
// duplicates and ask for a resend (NACK). The collective's signature (kind, dtype, redop, root,
// count) travels in every DATA frame so mismatched collectives are caught on first contact.
// header_crc is the CRC32C of the header with header_crc zeroed; since the header contains
// payload_crc (the CRC32C of the payload), header_crc covers header and payload together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "crc32c.h"

namespace ftccl::wire {

inline constexpr uint32_t kMagic = 0x4C435446;  // "FTCL" little-endian
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kMaxSackRanges = 32;

enum class FrameType : uint8_t {
  kHello = 1,  // first frame on a data connection: root = rank, tag = rail << 16 | channel
  kData = 2,
  kAck = 3,       // chunk_seq = cumulative ack (accepted), offset = cumulative received;
                  // payload: up to kMaxSackRanges [first, end) ranges received beyond that
  kNack = 4,      // chunk_seq = the chunk to resend
  kAbort = 5,     // coll_seq, tag = Code, offset = 1 + the lost rank that caused it (0: none),
                  // payload = reason text
  kBye = 6,       // orderly close; chunk_seq = final cumulative ack
  kPing = 7,      // liveness probe of one connection; chunk_seq = nonce
  kPong = 8,      // the answer, on the same connection; chunk_seq = the ping's nonce
  kPathDown = 9,  // "my end of this path is down": tag = rail << 16 | channel, offset = the
                  // connecting end's TCP port of that connection (0: any), sent on another
  kRedial = 10,   // "connect this path afresh" (to the higher rank of the pair, which connects):
                  // tag = rail << 16 | channel, sent on another path when a rail comes back
};

struct FrameHeader {
  uint32_t magic;
  uint8_t version;
  uint8_t type;
  uint8_t coll_kind;
  uint8_t dtype;
  uint64_t comm_id;
  uint64_t coll_seq;
  uint64_t chunk_seq;
  uint64_t offset;   // of this chunk within its message
  uint64_t msg_len;  // bytes of the whole message
  uint64_t count;    // element count of the collective (signature)
  uint32_t tag;
  uint32_t length;  // payload bytes of this frame
  int32_t root;
  uint8_t redop;
  uint8_t reserved[3];
  uint32_t payload_crc;
  uint32_t header_crc;
};
static_assert(sizeof(FrameHeader) == 80, "frame header layout");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ftccl assumes a little-endian host");

inline FrameHeader MakeHeader(FrameType type, uint64_t comm_id) {
  FrameHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = kMagic;
  h.version = kVersion;
  h.type = static_cast<uint8_t>(type);
  h.comm_id = comm_id;
  return h;
}

inline uint32_t HeaderCrc(const FrameHeader& h) {
  FrameHeader copy = h;
  copy.header_crc = 0;
  return Crc32c(&copy, sizeof(copy));
}

// Fills payload_crc (from `payload`) and header_crc.
inline void Seal(FrameHeader* h, const void* payload) {
  h->payload_crc = h->length ? Crc32c(payload, h->length) : 0;
  h->header_crc = HeaderCrc(*h);
}

inline bool HeaderValid(const FrameHeader& h) {
  return h.magic == kMagic && h.version == kVersion && h.header_crc == HeaderCrc(h);
}

}  // namespace ftccl::wire
