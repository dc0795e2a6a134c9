// bandwidth: the tbf is read back with `tc -j`, a real TCP transfer is throttled to within
// 10% of the set rate, and revert restores the exact previous qdiscs (a user's qdisc is never
// touched).
#include <unistd.h>

#include <thread>

#include "injector/injection.h"
#include "injector/qdisc.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

// Sends from A to B for `seconds` and returns the goodput measured by the receiver after a
// warm-up of 0.5 s, in bits per second.
double MeasureGoodput(TwoHosts& t, double seconds) {
  int lfd = TcpListen(t.b(), TwoHosts::kAddrB, 5201);
  if (lfd < 0) return -1;
  double rate = -1;
  std::thread rx([&] {
    int c = ::accept(lfd, nullptr, nullptr);
    if (c < 0) return;
    std::vector<char> buf(1 << 16);
    MonoNs warm = MonoNow() + 500'000'000;
    MonoNs end = warm + static_cast<MonoNs>(seconds * 1e9);
    uint64_t bytes = 0;
    MonoNs first = 0;
    for (;;) {
      ssize_t n = ::recv(c, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      MonoNs now = MonoNow();
      if (now >= warm) {
        if (first == 0) first = now;
        bytes += static_cast<uint64_t>(n);
      }
      if (now >= end) {
        rate = static_cast<double>(bytes) * 8 / (static_cast<double>(now - first) / 1e9);
        break;
      }
    }
    ::close(c);
  });
  int s = TcpConnect(t.a(), TwoHosts::kAddrB, 5201);
  if (s >= 0) {
    std::vector<char> buf(1 << 16, 'x');
    while (::send(s, buf.data(), buf.size(), MSG_NOSIGNAL) > 0) {
    }
    ::close(s);
  }
  rx.join();
  ::close(lfd);
  return rate;
}

std::unique_ptr<Injection> Arm(TwoHosts& t, nlohmann::json params, Status* st) {
  auto fault = CreateFault("bandwidth", params);
  if (!fault.ok()) {
    *st = fault.status();
    return nullptr;
  }
  auto inj = Injection::Arm(std::move(fault).value(), &t.journal(), t.policy());
  if (!inj.ok()) {
    *st = inj.status();
    return nullptr;
  }
  return std::move(inj).value();
}

TEST(Bandwidth, TcpTransferIsThrottledToTheSetRate) {
  FL_SKIP_WITHOUT_NETNS(t);
  std::string before = TcQdiscs(t->a(), "va");
  Status st;
  auto inj = Arm(*t, {{"netns", t->a()}, {"dev", "va"}, {"rate", "40mbit"}}, &st);
  ASSERT_NE(inj, nullptr) << st.ToString();
  ASSERT_TRUE(inj->ApplyAt().ok());
  auto q = nlohmann::json::parse(TcQdiscs(t->a(), "va"), nullptr, false);
  ASSERT_TRUE(q.is_array() && !q.empty());
  EXPECT_EQ(q[0].value("kind", ""), "tbf");
  EXPECT_EQ(q[0].value("handle", ""), "f1a1:");
  double rate = MeasureGoodput(*t, 2.0);
  EXPECT_GT(rate, 40e6 * 0.90) << "goodput " << rate;
  EXPECT_LT(rate, 40e6 * 1.10) << "goodput " << rate;
  ASSERT_TRUE(inj->RevertAt().ok());
  EXPECT_EQ(before, TcQdiscs(t->a(), "va"));
}

TEST(Bandwidth, RatesAboveThirtyTwoBitBytesUseRate64) {
  FL_SKIP_WITHOUT_NETNS(t);
  Status st;
  auto inj = Arm(*t, {{"netns", t->a()}, {"dev", "va"}, {"rate", "40gbit"}}, &st);
  ASSERT_NE(inj, nullptr) << st.ToString();
  ASSERT_TRUE(inj->ApplyAt().ok());
  std::string shown = Sh("tc -n " + t->a() + " qdisc show dev va");
  EXPECT_NE(shown.find("rate 40Gbit"), std::string::npos) << shown;
  ASSERT_TRUE(inj->RevertAt().ok());
}

TEST(Bandwidth, UserRootQdiscIsRefusedAndUntouched) {
  FL_SKIP_WITHOUT_NETNS(t);
  int rc = 0;
  Sh("tc -n " + t->a() + " qdisc add dev va root handle 1: tbf rate 7mbit burst 32k latency 100ms",
     &rc);
  ASSERT_EQ(rc, 0);
  std::string before = TcQdiscs(t->a(), "va");
  Status st;
  auto inj = Arm(*t, {{"netns", t->a()}, {"dev", "va"}, {"rate", "10mbit"}}, &st);
  EXPECT_EQ(inj, nullptr);
  EXPECT_EQ(st.code(), Code::kAlreadyExists) << st.ToString();
  EXPECT_NE(st.message().find("did not create"), std::string::npos) << st.message();
  EXPECT_EQ(before, TcQdiscs(t->a(), "va"));
  auto entries = t->journal().List();
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());
}

TEST(Bandwidth, UserIngressQdiscSurvivesApplyAndRevert) {
  FL_SKIP_WITHOUT_NETNS(t);
  int rc = 0;
  Sh("tc -n " + t->a() + " qdisc add dev va ingress", &rc);
  ASSERT_EQ(rc, 0);
  std::string before = TcQdiscs(t->a(), "va");
  Status st;
  auto inj = Arm(*t, {{"netns", t->a()}, {"dev", "va"}, {"rate", "10mbit"}}, &st);
  ASSERT_NE(inj, nullptr) << st.ToString();
  ASSERT_TRUE(inj->ApplyAt().ok());
  EXPECT_NE(TcQdiscs(t->a(), "va").find("ingress"), std::string::npos);
  ASSERT_TRUE(inj->RevertAt().ok());
  EXPECT_EQ(before, TcQdiscs(t->a(), "va"));
}

TEST(Bandwidth, ProjectShapingQdiscIsChangedAndRestoredExactly) {
  FL_SKIP_WITHOUT_NETNS(t);
  auto sock = NlSock::ConnectInNetns(t->a());
  ASSERT_TRUE(sock.ok());
  auto link = GetLink(*sock, "va");
  ASSERT_TRUE(link.ok());
  TbfConfig shaping;
  shaping.rate_bits_per_s = 1'000'000'000;
  ASSERT_TRUE(CreateRootTbf(*sock, link->ifindex, kShapingHandle, shaping).ok());
  std::string before = Sh("tc -n " + t->a() + " qdisc show dev va");
  Status st;
  auto inj = Arm(*t, {{"netns", t->a()}, {"dev", "va"}, {"rate", "100mbit"}}, &st);
  ASSERT_NE(inj, nullptr) << st.ToString();
  ASSERT_TRUE(inj->ApplyAt().ok());
  std::string during = Sh("tc -n " + t->a() + " qdisc show dev va");
  EXPECT_NE(during.find("f1a0:"), std::string::npos) << during;
  EXPECT_NE(during.find("rate 100Mbit"), std::string::npos) << during;
  ASSERT_TRUE(inj->RevertAt().ok());
  EXPECT_EQ(before, Sh("tc -n " + t->a() + " qdisc show dev va"));
}

}  // namespace
}  // namespace faultline::testing
