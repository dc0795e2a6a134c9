// loss and blackhole: nft counters read with the nft tool show drops, a real UDP transfer
// loses packets, the link stays up, and revert leaves no table behind.
#include <poll.h>
#include <unistd.h>

#include <thread>

#include "injector/injection.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

// Sends `n` datagrams A -> B (paced) and returns how many B received.
int UdpTransfer(TwoHosts& t, int n) {
  int rx = UdpSocket(t.b(), TwoHosts::kAddrB, 5300);
  int tx = UdpSocket(t.a(), nullptr, 0);
  if (rx < 0 || tx < 0) return -1;
  int big = 4 << 20;
  ::setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  std::atomic<int> got{0};
  std::atomic<bool> sending{true};
  std::thread reader([&] {
    char buf[256];
    for (;;) {
      pollfd p{rx, POLLIN, 0};
      int rc = ::poll(&p, 1, sending.load() ? 200 : 300);
      if (rc <= 0) {
        if (!sending.load()) break;
        continue;
      }
      if (::recv(rx, buf, sizeof(buf), 0) > 0) got++;
    }
  });
  sockaddr_in dst = Addr(TwoHosts::kAddrB, 5300);
  char payload[64] = "faultline";
  for (int i = 0; i < n; ++i) {
    ::sendto(tx, payload, sizeof(payload), 0, reinterpret_cast<sockaddr*>(&dst), sizeof(dst));
    if (i % 50 == 49) ::usleep(1000);
  }
  sending = false;
  reader.join();
  ::close(rx);
  ::close(tx);
  return got.load();
}

std::unique_ptr<Injection> Arm(TwoHosts& t, const char* kind, nlohmann::json params) {
  auto fault = CreateFault(kind, params);
  EXPECT_TRUE(fault.ok()) << fault.status().ToString();
  if (!fault.ok()) return nullptr;
  auto inj = Injection::Arm(std::move(fault).value(), &t.journal(), t.policy());
  EXPECT_TRUE(inj.ok()) << inj.status().ToString();
  if (!inj.ok()) return nullptr;
  return std::move(inj).value();
}

TEST(Loss, DropsAboutThePercentageAndCountersAgree) {
  FL_SKIP_WITHOUT_NETNS(t);
  ASSERT_EQ(UdpTransfer(*t, 200), 200) << "baseline transfer must be lossless";
  auto inj = Arm(*t, "loss", {{"netns", t->b()}, {"dev", "vb"}, {"percent", "30"}, {"seed", 1}});
  ASSERT_NE(inj, nullptr);
  ASSERT_TRUE(inj->ApplyAt().ok());
  const int sent = 2000;
  int got = UdpTransfer(*t, sent);
  int lost = sent - got;
  EXPECT_GT(lost, sent * 20 / 100) << "got " << got;
  EXPECT_LT(lost, sent * 40 / 100) << "got " << got;
  int64_t dropped = NftDroppedPackets(t->b());
  EXPECT_GE(dropped, lost) << "nft counter must account for every lost datagram";
  EXPECT_NE(NftTables(t->b()), "");
  ASSERT_TRUE(inj->RevertAt().ok());
  EXPECT_EQ(NftTables(t->b()), "");
  EXPECT_EQ(UdpTransfer(*t, 200), 200) << "revert must restore a lossless path";
}

TEST(Blackhole, DropsEverythingWhileTheLinkStaysUp) {
  FL_SKIP_WITHOUT_NETNS(t);
  auto inj = Arm(*t, "blackhole", {{"netns", t->b()}, {"dev", "vb"}});
  ASSERT_NE(inj, nullptr);
  ASSERT_TRUE(inj->ApplyAt().ok());
  EXPECT_EQ(UdpTransfer(*t, 300), 0);
  EXPECT_LT(TcpConnect(t->a(), TwoHosts::kAddrB, 5301, 300), 0);
  EXPECT_GE(NftDroppedPackets(t->b()), 300);
  nlohmann::json link = IpLink(t->b(), "vb");
  bool lower_up = false;
  for (const auto& f : link.value("flags", nlohmann::json::array())) lower_up |= f == "LOWER_UP";
  EXPECT_TRUE(lower_up) << link.dump();
  const int64_t dropped = NftDroppedPackets(t->b());
  ASSERT_TRUE(inj->RevertAt().ok());
  EXPECT_EQ(NftTables(t->b()), "");
  // The revert's observation keeps what the fault did: the counters' totals at removal.
  const nlohmann::json& gone = inj->revert_timing().observation;
  EXPECT_EQ(gone.value("in_effect", true), false) << gone.dump();
  EXPECT_GE(gone.value("dropped_packets", int64_t{-1}), dropped) << gone.dump();
  EXPECT_GE(dropped, 300);
  EXPECT_EQ(UdpTransfer(*t, 100), 100);
}

}  // namespace
}  // namespace faultline::testing
