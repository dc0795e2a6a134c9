// An acknowledgement written into a path just before that path went down is lost with it (the
// kernel holds it in the dead socket until the link returns). The sender cannot resend what
// it already knows was delivered; only a fresh acknowledgement over a path that works ends
// its wait. The real engine (rank 0) receives a message on connection 0 and acknowledges it
// there; the peer then reports its end of connection 0 down over connection 1, as a rank
// whose link went down does: the engine must acknowledge everything again on connection 1
// at once, not when connection 0 comes back (seen as a whole second's stall in a link_down
// run, where the lost acknowledgement was that of a small allreduce's last step).
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "fake_peer.h"

namespace ftccl::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kLen = 4096;

TEST(AckAfterPathDown, AcknowledgementIsRepeatedOnAWorkingPath) {
  std::string why;
  auto peer = FakePeer::Start(2, &why);
  ASSERT_NE(peer, nullptr) << why;
  transport::Signature sig;
  sig.kind = CollKind::kAllGather;
  sig.dtype = DataType::kU8;
  sig.count = kLen;
  peer->engine().Begin(0, sig);
  const transport::MsgKey key{0, 7};
  GuardedBuffer buf(kLen, false);
  std::vector<uint8_t> data(kLen);
  std::iota(data.begin(), data.end(), uint8_t{5});

  transport::OpPtr recv = peer->engine().Recv(1, key, sig, buf.data(), kLen);
  uint64_t seq = 0;
  ASSERT_TRUE(peer->SendMessage(0, key, sig, data.data(), kLen, 1000, &seq));
  Status st = peer->engine().Wait(recv, Clock::now() + 5s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // Everything is acknowledged, on the connection the data came on.
  ASSERT_TRUE(Eventually([&] { return peer->LastAck() == seq; }, 2s))
      << "acknowledged up to " << peer->LastAck() << " of " << seq;
  ASSERT_GT(peer->AcksSeen(0), 0u);
  const size_t on_1_before = peer->AcksSeen(1);

  // "My end of rail 0 channel 0 is down", over channel 1.
  wire::FrameHeader notice = wire::MakeHeader(wire::FrameType::kPathDown, FakePeer::kCommId);
  notice.tag = 0u << 16 | 0u;
  ASSERT_TRUE(peer->WriteFrame(1, notice, nullptr));
  ASSERT_NE(peer->PathDown(0, 2s), nullptr) << "the notice did not mark connection 0 down";

  EXPECT_TRUE(Eventually([&] { return peer->AcksSeen(1) > on_1_before; }, 500ms))
      << "no acknowledgement on the working connection after the other went down";
  EXPECT_EQ(peer->LastAck(), seq);
  EXPECT_TRUE(peer->engine().error().ok()) << peer->engine().error().ToString();
}

}  // namespace
}  // namespace ftccl::testing
