// The frame checks (transport/engine/frame_check.h) on synthetic headers.
#include "transport/engine/frame_check.h"

#include <gtest/gtest.h>

#include "ftccl/types.h"

namespace ftccl::transport::engine {
namespace {

using wire::FrameHeader;
using wire::FrameType;

FrameContext Ctx() {
  FrameContext c;
  c.comm_id = 42;
  c.max_frame = 1u << 20;
  c.size = 4;
  c.begun = true;
  c.cur_seq = 10;
  c.sent_end = 100;
  return c;
}

FrameHeader Data(uint64_t offset, uint32_t length, uint64_t msg_len) {
  FrameHeader h = wire::MakeHeader(FrameType::kData, 42);
  h.coll_kind = static_cast<uint8_t>(CollKind::kAllReduce);
  h.dtype = static_cast<uint8_t>(DataType::kF32);
  h.count = 1000;  // 4000 bytes
  h.coll_seq = 10;
  h.offset = offset;
  h.length = length;
  h.msg_len = msg_len;
  return h;
}

std::string Why(const Status& st) { return st.ok() ? "ok" : st.message(); }

TEST(FrameCheck, HeaderIntegrityAndIdentity) {
  FrameHeader h = Data(0, 10, 10);
  wire::Seal(&h, "0123456789");
  EXPECT_TRUE(CheckHeader(h, Ctx()).ok());
  FrameHeader bad = h;
  bad.offset = 1;
  EXPECT_EQ(CheckHeader(bad, Ctx()).code(), Code::kCorrupt);
  bad = h;
  bad.comm_id = 43;
  wire::Seal(&bad, "0123456789");
  EXPECT_NE(Why(CheckHeader(bad, Ctx())).find("communicator 43"), std::string::npos);
  bad = h;
  bad.length = (1u << 20) + 1;
  bad.header_crc = wire::HeaderCrc(bad);
  EXPECT_NE(Why(CheckHeader(bad, Ctx())).find("at most 1048576"), std::string::npos);
}

TEST(FrameCheck, DataGeometry) {
  EXPECT_TRUE(CheckData(Data(0, 4000, 4000), Ctx()).ok());
  EXPECT_TRUE(CheckData(Data(3990, 10, 4000), Ctx()).ok());
  EXPECT_TRUE(CheckData(Data(4000, 0, 4000), Ctx()).ok());
  EXPECT_FALSE(CheckData(Data(3991, 10, 4000), Ctx()).ok());
  EXPECT_FALSE(CheckData(Data(4001, 0, 4000), Ctx()).ok());
  // offset + length wraps around to a small number.
  EXPECT_FALSE(CheckData(Data(UINT64_MAX - 5, 10, 4000), Ctx()).ok());
  EXPECT_FALSE(CheckData(Data(UINT64_MAX, 1, UINT64_MAX), Ctx()).ok());
  // Larger than its collective (1000 f32).
  EXPECT_NE(Why(CheckData(Data(0, 10, 4001), Ctx())).find("collective of 1000 f32"),
            std::string::npos);
}

TEST(FrameCheck, DataSignatureInRange) {
  auto with = [](auto f) {
    FrameHeader h = Data(0, 10, 10);
    f(h);
    return CheckData(h, Ctx());
  };
  EXPECT_TRUE(with([](FrameHeader& h) { h.coll_kind = 6; h.root = 3; }).ok());
  EXPECT_FALSE(with([](FrameHeader& h) { h.coll_kind = 7; }).ok());
  EXPECT_FALSE(with([](FrameHeader& h) { h.dtype = 7; }).ok());
  EXPECT_FALSE(with([](FrameHeader& h) { h.redop = 5; }).ok());
  EXPECT_FALSE(with([](FrameHeader& h) { h.root = 4; }).ok());
  EXPECT_FALSE(with([](FrameHeader& h) { h.root = -1; }).ok());
  EXPECT_FALSE(with([](FrameHeader& h) { h.count = kMaxCount + 1; }).ok());
}

TEST(FrameCheck, CollectiveWindow) {
  FrameHeader h = Data(0, 10, 10);
  h.coll_seq = 10 + kCollWindow;
  EXPECT_TRUE(CheckData(h, Ctx()).ok());
  h.coll_seq = 11 + kCollWindow;
  EXPECT_NE(Why(CheckData(h, Ctx())).find("ahead of this rank's #10"), std::string::npos);
  h.coll_seq = 0;  // behind: a late copy, for the duplicate logic
  EXPECT_TRUE(CheckData(h, Ctx()).ok());
  h.coll_seq = UINT64_MAX;
  EXPECT_FALSE(CheckData(h, Ctx()).ok());
}

TEST(FrameCheck, Staging) {
  EXPECT_TRUE(CheckStaging(1 << 20, 0).ok());
  EXPECT_TRUE(CheckStaging(kMaxStagedBytes, 0).ok());
  EXPECT_FALSE(CheckStaging(kMaxStagedBytes, 1).ok());
  EXPECT_FALSE(CheckStaging(UINT64_MAX, 0).ok());
  EXPECT_FALSE(CheckStaging(1, kMaxStagedBytes).ok());
}

TEST(FrameCheck, AcknowledgementsOnlyOfWhatWasSent) {
  FrameHeader ack = wire::MakeHeader(FrameType::kAck, 42);
  ack.chunk_seq = ack.offset = 100;
  EXPECT_TRUE(CheckFrame(ack, Ctx()).ok());
  ack.offset = 101;
  EXPECT_FALSE(CheckFrame(ack, Ctx()).ok());
  ack.offset = 100;
  ack.chunk_seq = 101;
  EXPECT_FALSE(CheckFrame(ack, Ctx()).ok());
  ack.chunk_seq = 0;
  ack.length = 24;
  EXPECT_FALSE(CheckFrame(ack, Ctx()).ok());
  ack.length = wire::kMaxSackRanges * 16 + 16;
  EXPECT_FALSE(CheckFrame(ack, Ctx()).ok());

  FrameHeader bye = wire::MakeHeader(FrameType::kBye, 42);
  bye.chunk_seq = 100;
  EXPECT_TRUE(CheckFrame(bye, Ctx()).ok());
  bye.chunk_seq = 101;
  EXPECT_FALSE(CheckFrame(bye, Ctx()).ok());

  FrameHeader nack = wire::MakeHeader(FrameType::kNack, 42);
  nack.chunk_seq = 99;
  EXPECT_TRUE(CheckFrame(nack, Ctx()).ok());
  nack.chunk_seq = 100;
  EXPECT_NE(Why(CheckFrame(nack, Ctx())).find("never sent"), std::string::npos);
}

TEST(FrameCheck, SelectiveRanges) {
  uint64_t ok[4] = {3, 5, 7, 100};
  EXPECT_TRUE(CheckSackRanges(ok, sizeof(ok), 100).ok());
  EXPECT_FALSE(CheckSackRanges(ok, sizeof(ok), 99).ok());
  uint64_t empty[2] = {5, 5};
  EXPECT_FALSE(CheckSackRanges(empty, sizeof(empty), 100).ok());
  EXPECT_FALSE(CheckSackRanges(ok, 8, 100).ok());
}

TEST(FrameCheck, TypesAndPayloads) {
  const FrameContext c = Ctx();
  for (FrameType t : {FrameType::kPing, FrameType::kPong, FrameType::kPathDown,
                      FrameType::kRedial}) {
    FrameHeader h = wire::MakeHeader(t, 42);
    EXPECT_TRUE(CheckFrame(h, c).ok());
    h.length = 1;
    EXPECT_FALSE(CheckFrame(h, c).ok()) << FrameTypeName(h.type);
  }
  FrameHeader abort = wire::MakeHeader(FrameType::kAbort, 42);
  abort.length = kMaxAbortReason;
  EXPECT_TRUE(CheckFrame(abort, c).ok());
  abort.length++;
  EXPECT_FALSE(CheckFrame(abort, c).ok());
  // The lost rank it names (offset = rank + 1) must be one of the group.
  abort.length = 0;
  abort.offset = static_cast<uint64_t>(c.size);
  EXPECT_TRUE(CheckFrame(abort, c).ok());
  abort.offset++;
  EXPECT_NE(Why(CheckFrame(abort, c)).find("names lost rank"), std::string::npos);
  FrameHeader h = wire::MakeHeader(FrameType::kHello, 42);
  EXPECT_FALSE(CheckFrame(h, c).ok());
  h.type = 0;
  EXPECT_NE(Why(CheckFrame(h, c)).find("unknown frame type 0"), std::string::npos);
  h.type = 11;
  EXPECT_FALSE(CheckFrame(h, c).ok());
}

}  // namespace
}  // namespace ftccl::transport::engine
