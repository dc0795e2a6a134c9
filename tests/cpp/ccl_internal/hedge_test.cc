// A path whose transport goes silent is hedged before it is judged: the chunks it holds are
// copied to a path that works as soon as its TCP socket has held them unacknowledged for its
// round-trip bound (hedge_floor, 3 ms at least), while the path itself is made suspect only by
// its suspicion timeout. The real engine (rank 0) has one TCP connection on each of two rails
// to the fake rank 1, over 127.0.0.1 in a private network namespace; an nft rule drops every
// segment the engine sends on rail 0 (a blackhole: no ACK comes back either), and that end
// answers no probe. The suspicion floor is 2 s here, so nothing within the test's window is a
// judgment. With hedging off (hedge_floor 0) the chunks dealt to rail 0 wait there; with it on,
// every chunk of the message reaches the fake end over rail 1 within a few milliseconds, and no
// path goes down.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "fake_peer.h"
#include "private_net.h"
#include "rank_launcher.h"

namespace ftccl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::RankReporter;

// Sends 1 MiB with rail 0 blackholed and reports, under `tag`: the chunks the message was cut
// into, the data frames that reached the fake end over rail 1 after 400 ms, the ms until
// they covered every chunk (-1: not within 400 ms), and the path_down events seen.
bool SendIntoBlackhole(Millis hedge_floor, const std::string& tag, RankReporter& rep) {
  std::string why;
  FakePeer::Setup setup;
  setup.tcp = true;
  setup.suspect_floor = 2000ms;
  setup.suspect_ceiling = 4000ms;
  setup.hedge_floor = hedge_floor;
  auto peer = FakePeer::Start(1, &why, /*rails=*/2, setup);  // 0: rail 0, 1: rail 1
  if (peer == nullptr) {
    rep.Fail(why);
    return false;
  }
  peer->Mute(0);
  const std::string table = "fl_hedge_" + tag;
  if (!Nft("table ip " + table + " {\n chain in {\n  type filter hook input priority 0;\n" +
               "  tcp dport " + std::to_string(peer->port(0)) + " drop\n }\n}\n",
           &why)) {
    rep.Fail(why);
    return false;
  }
  constexpr size_t kLen = 1 << 20;
  const transport::Signature sig = FakePeer::BytesSignature(kLen);
  std::vector<uint8_t> data(kLen);
  std::iota(data.begin(), data.end(), uint8_t{5});
  const auto t0 = Clock::now();
  transport::OpPtr send = peer->engine().Send(1, transport::MsgKey{0, 7}, sig, data.data(), kLen);
  const auto numbered = [&] {
    const CommStats st = peer->engine().Stats();
    return st.chunks_numbered_per_peer.size() > 1 ? st.chunks_numbered_per_peer[1] : 0;
  };
  int64_t covered_ms = -1;
  while (Clock::now() - t0 < 400ms) {
    if (covered_ms < 0 && numbered() > 0 && peer->DataSeen(1) >= numbered()) {
      covered_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    }
    std::this_thread::sleep_for(1ms);
  }
  size_t downs = 0;
  for (const Event& e : peer->Events()) downs += e.kind == EventKind::kPathDown ? 1 : 0;
  rep.Value(tag + "_chunks", static_cast<int64_t>(numbered()));
  rep.Value(tag + "_rail0_seen", static_cast<int64_t>(peer->DataSeen(0)));
  rep.Value(tag + "_rail1_seen", static_cast<int64_t>(peer->DataSeen(1)));
  rep.Value(tag + "_covered_ms", covered_ms);
  rep.Value(tag + "_path_downs", static_cast<int64_t>(downs));
  if (!peer->engine().error().ok()) rep.Fail(peer->engine().error().ToString());
  peer->Stop();  // before `data`, which the unfinished send points into, goes
  return Nft("delete table ip " + table + "\n", &why) || (rep.Fail(why), false);
}

TEST(Hedge, ChunksOnAPathWhoseTransportWentSilentAreCopiedBeforeItIsJudged) {
  test::LaunchResult result = test::LaunchRanks(1, 30s, [](int, RankReporter& rep) {
    std::string why;
    if (!EnterPrivateNet(&why)) {
      rep.Fail(why);
      return 1;
    }
    if (!SendIntoBlackhole(Millis(0), "off", rep)) return 1;
    if (!SendIntoBlackhole(Millis(3), "on", rep)) return 1;
    return 0;
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  const test::RankOutcome& r = result.ranks[0];
  // The message was striped over both rails: some of it went into the blackhole.
  ASSERT_GE(r.value("off_chunks"), 2);
  ASSERT_GE(r.value("on_chunks"), 2);
  EXPECT_EQ(r.value("off_rail0_seen"), 0) << "the blackhole let data through";
  EXPECT_EQ(r.value("on_rail0_seen"), 0) << "the blackhole let data through";
  // Without hedging, what was dealt to rail 0 waits for the judgment (2 s away): the control
  // that shows the blackhole held chunks at all.
  EXPECT_LT(r.value("off_rail1_seen"), r.value("off_chunks"))
      << "without hedging every chunk still came over rail 1: nothing was dealt to rail 0";
  EXPECT_EQ(r.value("off_covered_ms"), -1);
  // With it, rail 1 carried every chunk (its own and the copies) long before any judgment.
  EXPECT_GE(r.value("on_rail1_seen"), r.value("on_chunks"));
  EXPECT_GE(r.value("on_covered_ms"), 0) << "the chunks on the silent path were not copied";
  EXPECT_LT(r.value("on_covered_ms"), 200);
  EXPECT_EQ(r.value("on_path_downs"), 0) << "a hedge judged the path";
  EXPECT_EQ(r.value("off_path_downs"), 0);
}

}  // namespace
}  // namespace ftccl::testing
