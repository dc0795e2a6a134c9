// A peer that has finished writes its last acknowledgement and its BYE, closes, and is gone.
// If this rank then writes on that connection before reading it (an acknowledgement of its
// own, due in the same pass of the loop), the write fails with EPIPE. That failure must not
// throw away what the peer wrote before it went: the acknowledgement completes this rank's
// send, the BYE says the peer ended in order. Seen as a 1-in-100 failure of an 8-rank test
// under load: a rank waited for the acknowledgement of its barrier message from a rank that
// had already closed, then gave it up as lost ("no working path to rank 4 for 2000 ms").
//
// The real engine (rank 0) has one connection to the fake rank 1. The test holds the progress
// thread (RunOnProgress) so that one pass of the loop reads a data chunk from the peer (its
// acknowledgement becomes due) and only then, in the same pass, finds the peer's end gone
// with its acknowledgement and BYE unread behind the chunk.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "fake_peer.h"

namespace ftccl::testing {
namespace {

using namespace std::chrono_literals;

// Blocks the progress thread until `release` (at most 3 s), saying so in `held`.
std::function<Status()> Hold(std::atomic<bool>* held, std::atomic<bool>* release) {
  return [held, release] {
    held->store(true);
    Eventually([&] { return release->load(); }, 3000ms);
    return Status::Ok();
  };
}

TEST(PeerEnd, ItsLastWordsAreReadWhenAWriteFindsItsEndGone) {
  std::string why;
  auto peer = FakePeer::Start(1, &why);
  ASSERT_NE(peer, nullptr) << why;
  auto& engine = peer->engine();
  constexpr size_t kLen = 100;
  transport::Signature sig;
  sig.kind = CollKind::kAllGather;
  sig.dtype = DataType::kU8;
  sig.count = kLen;
  engine.Begin(0, sig);
  std::vector<uint8_t> out(kLen, 1), in(kLen, 0), theirs(kLen, 2);
  transport::OpPtr send = engine.Send(1, {0, 3}, sig, out.data(), kLen);
  transport::OpPtr recv = engine.Recv(1, {0, 5}, sig, in.data(), kLen);
  ASSERT_TRUE(Eventually([&] { return peer->FramesSeen(wire::FrameType::kData) == 1; }, 2s));

  // Pass 1 is held while the peer's chunk and the second hold are queued; pass 2 reads the
  // chunk, then is held until the peer has written its last words and gone.
  std::atomic<bool> held1{false}, release1{false}, held2{false}, release2{false};
  auto first =
      std::async(std::launch::async, [&] { return engine.RunOnProgress(Hold(&held1, &release1)); });
  ASSERT_TRUE(Eventually([&] { return held1.load(); }, 2s));
  uint64_t seq = 0;
  ASSERT_TRUE(peer->SendMessage(0, {0, 5}, sig, theirs.data(), kLen, kLen, &seq));
  auto second =
      std::async(std::launch::async, [&] { return engine.RunOnProgress(Hold(&held2, &release2)); });
  // The second hold is posted by now (were it late, the pass would write its acknowledgement
  // before the peer goes, and the test would pass without testing anything; never fail).
  std::this_thread::sleep_for(200ms);
  release1 = true;
  ASSERT_TRUE(Eventually([&] { return held2.load(); }, 2s));
  EXPECT_TRUE(recv->done.load()) << "pass 2 did not read the chunk before the hold";
  wire::FrameHeader ack = wire::MakeHeader(wire::FrameType::kAck, FakePeer::kCommId);
  ack.chunk_seq = ack.offset = 1;  // the engine's one chunk, and ours
  ASSERT_TRUE(peer->WriteFrame(0, ack, nullptr));
  wire::FrameHeader bye = wire::MakeHeader(wire::FrameType::kBye, FakePeer::kCommId);
  bye.chunk_seq = bye.offset = 1;
  ASSERT_TRUE(peer->WriteFrame(0, bye, nullptr));
  peer->Hangup(0);
  release2 = true;  // the pass goes on to write its acknowledgement: EPIPE
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(second.get().ok());

  const Status st = engine.Wait(send, Clock::now() + 2s);
  EXPECT_TRUE(st.ok()) << "the send the peer acknowledged before it went: " << st.ToString();
  EXPECT_TRUE(engine.Wait(recv, Clock::now() + 1s).ok());
  EXPECT_EQ(in, theirs);
  // Nothing is left to lose: the peer ended in order, no error past its abort timeout.
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(engine.error().ok()) << engine.error().ToString();
  peer->Stop();
}

}  // namespace
}  // namespace ftccl::testing
