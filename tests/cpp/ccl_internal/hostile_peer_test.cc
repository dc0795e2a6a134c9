// A real engine against a peer that lies in frames with valid CRCs (fake_peer.h): each lie
// fails the connection it came on, with a reason that names it, writes nothing outside the
// receive buffer, and leaves the communicator working: the same receive then completes with
// the right bytes over the second connection.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "fake_peer.h"
#include "transport/engine/frame_check.h"

namespace ftccl::testing {
namespace {

using namespace std::chrono_literals;
using transport::MsgKey;
using transport::engine::kCollWindow;
using transport::engine::kMaxAbortReason;
using transport::engine::kMaxCount;
using transport::Signature;
using wire::FrameHeader;
using wire::FrameType;

constexpr size_t kLen = 4096;

class HostilePeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    peer_ = FakePeer::Start(2, &why);
    ASSERT_NE(peer_, nullptr) << why;
    sig_.kind = CollKind::kAllGather;
    sig_.dtype = DataType::kU8;
    sig_.count = kLen;
    peer_->engine().Begin(0, sig_);
    data_.resize(kLen);
    std::iota(data_.begin(), data_.end(), uint8_t{3});
  }
  void TearDown() override { peer_.reset(); }

  transport::OpPtr PostRecv() { return peer_->engine().Recv(1, key_, sig_, buf_.data(), kLen); }
  FrameHeader Data(uint64_t seq, uint64_t off, uint32_t len, uint64_t msg_len = kLen) {
    return FakePeer::DataHeader(key_, sig_, seq, off, len, msg_len);
  }

  // Connection 0 was failed for `lie`, nothing else was, and a correct message on connection
  // 1 still completes `recv` with the right bytes.
  void ExpectRefused(const transport::OpPtr& recv, const std::string& lie) {
    ASSERT_TRUE(peer_->Closed(0, 5s)) << "the lying connection stays open";
    const Event* down = peer_->PathDown(0, 2s);
    ASSERT_NE(down, nullptr) << "no path_down event for the lying connection";
    EXPECT_NE(down->reason.find(lie), std::string::npos) << down->reason;
    EXPECT_TRUE(peer_->engine().error().ok()) << peer_->engine().error().ToString();
    EXPECT_TRUE(buf_.Intact()) << "bytes written outside the receive buffer";
    EXPECT_FALSE(peer_->Closed(1, 0ms));
    uint64_t seq = 0;
    ASSERT_TRUE(peer_->SendMessage(1, key_, sig_, data_.data(), kLen, 1000, &seq));
    Status st = peer_->engine().Wait(recv, Clock::now() + 5s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(0, std::memcmp(buf_.data(), data_.data(), kLen));
    EXPECT_TRUE(buf_.Intact());
    for (const Event& e : peer_->Events()) {
      EXPECT_FALSE(e.kind == EventKind::kPathDown && e.channel == 1) << e.reason;
      EXPECT_NE(e.kind, EventKind::kAbort) << e.reason;
    }
  }

  // Writes `h` (sealed) with `payload_len` bytes of payload on connection 0.
  void Lie(FrameHeader h, size_t payload_len = 0) {
    std::vector<uint8_t> payload(payload_len, 0xEE);
    h.length = static_cast<uint32_t>(payload_len);
    peer_->WriteFrame(0, h, payload.empty() ? nullptr : payload.data());
  }

  std::unique_ptr<FakePeer> peer_;
  GuardedBuffer buf_{kLen, false};
  Signature sig_;
  MsgKey key_{0, 7};
  std::vector<uint8_t> data_;
};

TEST_F(HostilePeerTest, CorrectFramesCompleteTheReceive) {
  auto recv = PostRecv();
  uint64_t seq = 0;
  ASSERT_TRUE(peer_->SendMessage(0, key_, sig_, data_.data(), kLen, 1000, &seq));
  ASSERT_TRUE(peer_->engine().Wait(recv, Clock::now() + 5s).ok());
  EXPECT_EQ(0, std::memcmp(buf_.data(), data_.data(), kLen));
  EXPECT_TRUE(buf_.Intact());
  EXPECT_FALSE(peer_->Closed(0, 0ms));
}

// A copy of a chunk begins on connection 1; an older copy, still queued on connection 0 by a
// sender that has already given that connection up (and resent the chunk on connection 1),
// begins after it and takes over; then connection 0 ends mid-frame. Both copies are lost and
// the sender cannot know: the engine asks for the chunk again, and the resend completes it.
TEST_F(HostilePeerTest, ChunkLostAfterItsCopyTookOverIsAskedForAgain) {
  auto recv = PostRecv();
  FrameHeader h = Data(0, 0, kLen);
  wire::Seal(&h, data_.data());
  ASSERT_TRUE(peer_->WriteRaw(1, &h, sizeof(h)));
  ASSERT_TRUE(peer_->WriteRaw(1, data_.data(), kLen / 2));
  peer_->Drain(1, 2s);
  ASSERT_TRUE(peer_->WriteRaw(0, &h, sizeof(h)));
  ASSERT_TRUE(peer_->WriteRaw(0, data_.data(), kLen / 4));
  peer_->Drain(0, 2s);
  peer_->Hangup(0);
  const auto until = Clock::now() + 5s;
  while (peer_->FramesSeen(FrameType::kNack) == 0 && Clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(peer_->FramesSeen(FrameType::kNack), 1u) << "the lost chunk was not asked for again";
  // The rest of the discarded copy, then the resend.
  ASSERT_TRUE(peer_->WriteRaw(1, data_.data() + kLen / 2, kLen / 2));
  ASSERT_TRUE(peer_->WriteFrame(1, Data(0, 0, kLen), data_.data()));
  ASSERT_TRUE(peer_->engine().Wait(recv, Clock::now() + 5s).ok());
  EXPECT_EQ(0, std::memcmp(buf_.data(), data_.data(), kLen));
  EXPECT_TRUE(buf_.Intact());
  EXPECT_TRUE(peer_->engine().error().ok()) << peer_->engine().error().ToString();
}

TEST_F(HostilePeerTest, PayloadPastTheEndOfItsMessage) {
  auto recv = PostRecv();
  Lie(Data(0, kLen - 100, 0), 200);
  ExpectRefused(recv, "past the end of its 4096-byte message");
}

TEST_F(HostilePeerTest, OffsetThatWrapsAround) {
  auto recv = PostRecv();
  Lie(Data(0, UINT64_MAX - 50, 0), 100);  // offset + length wraps to 49
  ExpectRefused(recv, "past the end");
}

TEST_F(HostilePeerTest, PayloadLongerThanAnyFrame) {
  auto recv = PostRecv();
  FrameHeader h = Data(0, 0, 0);
  h.length = (64u << 20) + 1;
  peer_->WriteFrame(0, h, nullptr);
  ExpectRefused(recv, "payload bytes (at most");
}

TEST_F(HostilePeerTest, HugeEarlyMessageIsNotStaged) {
  auto recv = PostRecv();
  Signature big = sig_;
  big.count = kMaxCount;
  // A message nobody posted a receive for yet, of 2^39 bytes.
  FrameHeader h = FakePeer::DataHeader({0, 99}, big, 0, 0, 0, uint64_t{1} << 39);
  big.count = kLen;
  Lie(h, 64);
  ExpectRefused(recv, "staging");
}

TEST_F(HostilePeerTest, MessageLargerThanItsCollective) {
  auto recv = PostRecv();
  Lie(Data(0, 0, 0, 2 * kLen), 100);
  ExpectRefused(recv, "in a collective of 4096 u8 elements");
}

TEST_F(HostilePeerTest, CollectiveFarAhead) {
  auto recv = PostRecv();
  FrameHeader h = Data(0, 0, 0);
  h.coll_seq = kCollWindow + 1;
  Lie(h, 100);
  ExpectRefused(recv, "ahead of this rank's #0");
}

TEST_F(HostilePeerTest, UnknownFrameType) {
  auto recv = PostRecv();
  FrameHeader h = wire::MakeHeader(FrameType::kData, FakePeer::kCommId);
  h.type = 42;
  Lie(h);
  ExpectRefused(recv, "unknown frame type 42");
}

TEST_F(HostilePeerTest, HelloOnAnEstablishedConnection) {
  auto recv = PostRecv();
  Lie(wire::MakeHeader(FrameType::kHello, FakePeer::kCommId));
  ExpectRefused(recv, "hello frame on an established connection");
}

TEST_F(HostilePeerTest, WrongCommunicator) {
  auto recv = PostRecv();
  FrameHeader h = Data(0, 0, 0);
  h.comm_id = FakePeer::kCommId + 1;
  Lie(h, 100);
  ExpectRefused(recv, "not this one");
}

TEST_F(HostilePeerTest, CorruptHeader) {
  auto recv = PostRecv();
  FrameHeader h = Data(0, 0, 100);
  wire::Seal(&h, data_.data());
  h.offset = 5;  // after sealing: the header CRC no longer matches
  peer_->WriteFrame(0, h, data_.data(), false);
  ExpectRefused(recv, "corrupt frame header");
}

TEST_F(HostilePeerTest, AckOfChunksNeverSent) {
  auto recv = PostRecv();
  // The engine sends one message; the liar acknowledges far more than it.
  std::vector<uint8_t> out(100, 1);
  auto send = peer_->engine().Send(1, {0, 3}, sig_, out.data(), out.size());
  for (int i = 0; i < 5000 && peer_->FramesSeen(FrameType::kData) == 0; ++i)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(peer_->FramesSeen(FrameType::kData), 1u);
  FrameHeader h = wire::MakeHeader(FrameType::kAck, FakePeer::kCommId);
  h.chunk_seq = 1000;
  h.offset = 1000;
  Lie(h);
  ExpectRefused(recv, "acknowledges chunks never sent");
  EXPECT_FALSE(send->done.load()) << "a lie completed a send";
  // The honest acknowledgement completes it.
  h.chunk_seq = h.offset = 1;
  peer_->WriteFrame(1, h, nullptr);
  EXPECT_TRUE(peer_->engine().Wait(send, Clock::now() + 5s).ok());
}

TEST_F(HostilePeerTest, SelectiveAckOfChunksNeverSent) {
  auto recv = PostRecv();
  FrameHeader h = wire::MakeHeader(FrameType::kAck, FakePeer::kCommId);
  uint64_t ranges[2] = {2, 9};
  h.length = sizeof(ranges);
  peer_->WriteFrame(0, h, ranges);
  ExpectRefused(recv, "selective range [2, 9) acknowledges chunks never sent");
}

TEST_F(HostilePeerTest, SelectiveAckOfOddLength) {
  auto recv = PostRecv();
  FrameHeader h = wire::MakeHeader(FrameType::kAck, FakePeer::kCommId);
  Lie(h, 24);
  ExpectRefused(recv, "24 bytes of selective ranges");
}

TEST_F(HostilePeerTest, ByeAcknowledgingChunksNeverSent) {
  auto recv = PostRecv();
  FrameHeader h = wire::MakeHeader(FrameType::kBye, FakePeer::kCommId);
  h.chunk_seq = 7;
  Lie(h);
  ExpectRefused(recv, "bye frame: cumulative value 7 acknowledges chunks never sent");
}

TEST_F(HostilePeerTest, NackOfChunkNeverSent) {
  auto recv = PostRecv();
  FrameHeader h = wire::MakeHeader(FrameType::kNack, FakePeer::kCommId);
  h.chunk_seq = 0;
  Lie(h);
  ExpectRefused(recv, "asks for chunk 0, never sent");
}

TEST_F(HostilePeerTest, ControlFrameWithPayload) {
  auto recv = PostRecv();
  Lie(wire::MakeHeader(FrameType::kPing, FakePeer::kCommId), 16);
  ExpectRefused(recv, "ping frame carries 16 payload bytes");
}

TEST_F(HostilePeerTest, AbortReasonTooLong) {
  auto recv = PostRecv();
  Lie(wire::MakeHeader(FrameType::kAbort, FakePeer::kCommId), kMaxAbortReason + 1);
  ExpectRefused(recv, "abort frame: reason of");
}

struct SignatureLie {
  const char* name;
  void (*apply)(FrameHeader*);
  const char* reason;
};

class HostileSignatureTest : public HostilePeerTest,
                             public ::testing::WithParamInterface<SignatureLie> {};

TEST_P(HostileSignatureTest, OutOfRange) {
  auto recv = PostRecv();
  FrameHeader h = Data(0, 0, 0);
  GetParam().apply(&h);
  Lie(h, 100);
  ExpectRefused(recv, GetParam().reason);
}

INSTANTIATE_TEST_SUITE_P(
    Lies, HostileSignatureTest,
    ::testing::Values(
        SignatureLie{"Kind", [](FrameHeader* h) { h->coll_kind = 7; }, "unknown collective kind 7"},
        SignatureLie{"Dtype", [](FrameHeader* h) { h->dtype = 7; }, "unknown data type 7"},
        SignatureLie{"Op", [](FrameHeader* h) { h->redop = 5; }, "unknown reduction 5"},
        SignatureLie{"Root", [](FrameHeader* h) { h->root = 2; }, "root 2 is outside [0, 2)"},
        SignatureLie{"NegativeRoot", [](FrameHeader* h) { h->root = -1; }, "root -1"},
        SignatureLie{"Count", [](FrameHeader* h) { h->count = kMaxCount + 1; },
                     "is larger than any collective's"}),
    [](const auto& info) { return std::string(info.param.name); });

// A message length that differs from the posted receive, with the signature in range and
// equal, is a collective mismatch (ranks that disagree, e.g. on their slice size): it fails the
// collective with kMismatch, by design, and still writes nothing outside the buffer.
TEST_F(HostilePeerTest, MessageLengthDifferentFromTheReceiveIsAMismatch) {
  auto recv = PostRecv();
  std::vector<uint8_t> payload(100, 0xEE);
  peer_->WriteFrame(0, Data(0, 0, 100, kLen - 100), payload.data());
  Status st = peer_->engine().Wait(recv, Clock::now() + 5s);
  EXPECT_EQ(st.code(), Code::kMismatch) << st.ToString();
  EXPECT_TRUE(buf_.Intact());
}

}  // namespace
}  // namespace ftccl::testing
