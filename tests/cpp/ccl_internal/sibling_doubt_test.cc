// A silent failure of one host's port is found one path at a time: every path on that rail to
// a rank of that host goes silent at once, but each is judged dead only after its own timeout,
// and a chunk put on a second such path after the first was found waits out a second timeout
// (measured: a blackhole on one host's rail 0, 4 ranks on 2 hosts, paths found 60 ms apart).
// Once a path goes down, the engine probes the other paths on its rail to the same host and
// gives them no new data until they answer. The real engine (rank 0) has two channels on each
// of two rails to the fake rank 1; channel 1 of rail 0 answers no probe (it drops what it
// gets), channel 0 of rail 0 is reported down by the peer: the next message must go out on
// rail 1 only. Channel 0 answers no probe either, as a path whose far end is down cannot: if it
// answered, the engine would take it back in use (rightly), and on a loaded machine that came
// before the message was dealt (4 runs of 20 under TSan beside two busy loops).
#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "fake_peer.h"

namespace ftccl::testing {
namespace {

using namespace std::chrono_literals;

TEST(SiblingDoubt, APathOnTheRailOfOneFoundDownTakesNoDataUntilItAnswers) {
  std::string why;
  auto peer = FakePeer::Start(2, &why, /*rails=*/2);  // 0: r0c0, 1: r0c1, 2: r1c0, 3: r1c1
  ASSERT_NE(peer, nullptr) << why;
  peer->Mute(0);
  peer->Mute(1);
  // "My end of rail 0 channel 0 is down", over rail 1.
  wire::FrameHeader notice = wire::MakeHeader(wire::FrameType::kPathDown, FakePeer::kCommId);
  notice.tag = 0u << 16 | 0u;
  ASSERT_TRUE(peer->WriteFrame(2, notice, nullptr));
  ASSERT_NE(peer->PathDown(0, 2s), nullptr) << "the notice did not mark connection 0 down";

  // 1 MiB in four pieces of 256 KiB, dealt over the paths that take data.
  constexpr size_t kLen = 1 << 20;
  const transport::Signature sig = FakePeer::BytesSignature(kLen);
  std::vector<uint8_t> data(kLen);
  std::iota(data.begin(), data.end(), uint8_t{3});
  transport::OpPtr send = peer->engine().Send(1, transport::MsgKey{0, 9}, sig, data.data(), kLen);
  ASSERT_TRUE(Eventually([&] { return peer->DataSeen(2) + peer->DataSeen(3) >= 4; }, 2s))
      << "rail 1 carried " << peer->DataSeen(2) << " + " << peer->DataSeen(3)
      << " data frames; rail 0 channel 1: " << peer->DataSeen(1);
  EXPECT_EQ(peer->DataSeen(1), 0u) << "a chunk went to the silent sibling of the path found down";
  EXPECT_EQ(peer->DataSeen(0), 0u);
  EXPECT_TRUE(peer->engine().error().ok()) << peer->engine().error().ToString();
  peer->Stop();  // before `data`, which the unfinished send points into, goes
}

TEST(SiblingDoubt, ASiblingThatAnswersItsProbeTakesDataAgain) {
  std::string why;
  auto peer = FakePeer::Start(2, &why, /*rails=*/2);
  ASSERT_NE(peer, nullptr) << why;
  wire::FrameHeader notice = wire::MakeHeader(wire::FrameType::kPathDown, FakePeer::kCommId);
  notice.tag = 0u << 16 | 0u;
  ASSERT_TRUE(peer->WriteFrame(2, notice, nullptr));
  ASSERT_NE(peer->PathDown(0, 2s), nullptr);
  constexpr size_t kLen = 1 << 20;
  const transport::Signature sig = FakePeer::BytesSignature(kLen);
  std::vector<uint8_t> data(kLen, 7);
  // Its probe is answered at once; messages sent after that use it like any path.
  std::vector<transport::OpPtr> sends;
  EXPECT_TRUE(Eventually(
      [&] {
        sends.push_back(peer->engine().Send(1, transport::MsgKey{0, static_cast<uint32_t>(10 + sends.size())}, sig,
                                            data.data(), kLen));
        std::this_thread::sleep_for(20ms);
        return peer->DataSeen(1) > 0;
      },
      2s))
      << "rail 0 channel 1 answered its probe but took no data; rail 1: " << peer->DataSeen(2)
      << " + " << peer->DataSeen(3);
  EXPECT_TRUE(peer->engine().error().ok()) << peer->engine().error().ToString();
  peer->Stop();
}

}  // namespace
}  // namespace ftccl::testing
