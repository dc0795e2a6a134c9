#include "transport/engine/frame_check.h"

#include <cstring>
#include <string>

#include "ftccl/types.h"

namespace ftccl::transport::engine {
namespace {

using wire::FrameType;

Status Lie(std::string what) { return Status(Code::kCorrupt, std::move(what)); }

std::string U(uint64_t v) { return std::to_string(v); }

// An acknowledged value (all chunks below it) no larger than what was written.
Status CheckAcked(const char* what, const char* field, uint64_t value, const FrameContext& ctx) {
  if (value <= ctx.sent_end) return Status::Ok();
  return Lie(std::string(what) + ": " + field + " " + U(value) +
             " acknowledges chunks never sent (only " + U(ctx.sent_end) + " were)");
}

}  // namespace

std::string FrameTypeName(uint8_t type) {
  static constexpr const char* kNames[] = {nullptr, "hello", "data",      "ack",   "nack", "abort",
                                           "bye",   "ping",  "pong", "path-down", "redial"};
  if (type > 0 && type < sizeof(kNames) / sizeof(kNames[0])) return kNames[type];
  return "type " + std::to_string(type);
}

Status CheckHeader(const wire::FrameHeader& h, const FrameContext& ctx) {
  if (!wire::HeaderValid(h)) return Lie("corrupt frame header (magic, version or header CRC)");
  if (h.comm_id != ctx.comm_id) {
    return Lie("frame of communicator " + U(h.comm_id) + ", not this one (" + U(ctx.comm_id) +
               ")");
  }
  if (h.length > ctx.max_frame) {
    return Lie(FrameTypeName(h.type) + " frame announces " + U(h.length) +
               " payload bytes (at most " + U(ctx.max_frame) + ")");
  }
  return Status::Ok();
}

Status CheckFrame(const wire::FrameHeader& h, const FrameContext& ctx) {
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kData:
      return CheckData(h, ctx);
    case FrameType::kAck:
      if (h.length % 16 != 0 || h.length > wire::kMaxSackRanges * 16) {
        return Lie("ack frame: " + U(h.length) + " bytes of selective ranges (a multiple of 16, at most " +
                   U(wire::kMaxSackRanges * 16) + ")");
      }
      if (Status st = CheckAcked("ack frame", "cumulative value", h.chunk_seq, ctx); !st.ok())
        return st;
      return CheckAcked("ack frame", "received value", h.offset, ctx);
    case FrameType::kBye:
      if (h.length != 0) return Lie("bye frame carries " + U(h.length) + " payload bytes");
      if (Status st = CheckAcked("bye frame", "cumulative value", h.chunk_seq, ctx); !st.ok())
        return st;
      return CheckAcked("bye frame", "received value", h.offset, ctx);
    case FrameType::kNack:
      if (h.length != 0) return Lie("nack frame carries " + U(h.length) + " payload bytes");
      if (h.chunk_seq >= ctx.sent_end) {
        return Lie("nack frame: asks for chunk " + U(h.chunk_seq) + ", never sent (only " +
                   U(ctx.sent_end) + " were)");
      }
      return Status::Ok();
    case FrameType::kAbort:
      if (h.length > kMaxAbortReason) {
        return Lie("abort frame: reason of " + U(h.length) + " bytes (at most " +
                   U(kMaxAbortReason) + ")");
      }
      if (h.offset > static_cast<uint64_t>(ctx.size)) {
        return Lie("abort frame: names lost rank " + U(h.offset - 1) + " of " + U(ctx.size) + " ranks");
      }
      return Status::Ok();
    case FrameType::kPing:
    case FrameType::kPong:
    case FrameType::kPathDown:
    case FrameType::kRedial:
      if (h.length != 0) {
        return Lie(FrameTypeName(h.type) + " frame carries " + U(h.length) + " payload bytes");
      }
      return Status::Ok();
    case FrameType::kHello:
      return Lie("hello frame on an established connection");
  }
  return Lie("unknown frame type " + std::to_string(h.type));
}

Status CheckData(const wire::FrameHeader& h, const FrameContext& ctx) {
  // The signature: only what the communicator's own argument checks let through.
  if (h.coll_kind > static_cast<uint8_t>(CollKind::kBarrier)) {
    return Lie("data frame: unknown collective kind " + std::to_string(h.coll_kind));
  }
  if (h.dtype >= kNumDataTypes) {
    return Lie("data frame: unknown data type " + std::to_string(h.dtype));
  }
  if (h.redop >= kNumReduceOps) {
    return Lie("data frame: unknown reduction " + std::to_string(h.redop));
  }
  if (h.root < 0 || h.root >= ctx.size) {
    return Lie("data frame: root " + std::to_string(h.root) + " is outside [0, " +
               std::to_string(ctx.size) + ")");
  }
  if (h.count > kMaxCount) {
    return Lie("data frame: count " + U(h.count) + " is larger than any collective's (" +
               U(kMaxCount) + ")");
  }
  // Before the first collective begins, cur_seq is 0 and the window counts from there.
  if (h.coll_seq > ctx.cur_seq && h.coll_seq - ctx.cur_seq > kCollWindow) {
    return Lie("data frame: collective #" + U(h.coll_seq) + " is more than " + U(kCollWindow) +
               " ahead of this rank's #" + U(ctx.cur_seq) + (ctx.begun ? "" : " (none begun)"));
  }
  // Every message of a collective is at most its count elements (a block or a slice of one).
  const uint64_t coll_bytes = h.count * DataTypeSize(static_cast<DataType>(h.dtype));
  if (h.msg_len > coll_bytes) {
    return Lie("data frame: message of " + U(h.msg_len) + " bytes in a collective of " +
               U(h.count) + " " + DataTypeName(static_cast<DataType>(h.dtype)) + " elements (" +
               U(coll_bytes) + " bytes)");
  }
  // Written so that offset + length cannot wrap around.
  if (h.offset > h.msg_len || h.length > h.msg_len - h.offset) {
    return Lie("data frame: offset " + U(h.offset) + " + length " + U(h.length) +
               " is past the end of its " + U(h.msg_len) + "-byte message");
  }
  return Status::Ok();
}

Status CheckStaging(uint64_t msg_len, uint64_t staged) {
  if (msg_len <= kMaxStagedBytes && staged <= kMaxStagedBytes - msg_len) return Status::Ok();
  return Lie("data frame: an early message of " + U(msg_len) + " bytes would bring staging to " +
             "more than " + U(kMaxStagedBytes) + " bytes (" + U(staged) + " held)");
}

Status CheckSackRanges(const void* data, size_t bytes, uint64_t sent_end) {
  if (bytes % 16 != 0) return Lie("ack frame: " + U(bytes) + " bytes of selective ranges");
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; i += 16) {
    uint64_t first, end;
    std::memcpy(&first, p + i, 8);
    std::memcpy(&end, p + i + 8, 8);
    if (first >= end) {
      return Lie("ack frame: empty selective range [" + U(first) + ", " + U(end) + ")");
    }
    if (end > sent_end) {
      return Lie("ack frame: selective range [" + U(first) + ", " + U(end) +
                 ") acknowledges chunks never sent (only " + U(sent_end) + " were)");
    }
  }
  return Status::Ok();
}

}  // namespace ftccl::transport::engine
