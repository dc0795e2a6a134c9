// What a SocketLink calls acknowledged: only data the peer acknowledged, never a segment from
// the peer that acknowledges nothing new. Over loopback in a private network namespace, an nft
// rule drops every data segment one end sends (at the receiver's input, so the sender counts
// it as in flight) while the other end keeps sending to it. The peer's segments refresh the
// kernel's "last ACK received" (tcpi_last_ack_recv) now and then (here once the sender
// retransmits), but nothing of what the first end sent is acknowledged, and the link must say
// so on every tick (AwaitingRetransmission true, AcknowledgedWithin false).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "private_net.h"
#include "rank_launcher.h"
#include "transport/tcp/link.h"

namespace ftccl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::RankReporter;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// A connected pair over 127.0.0.1, both ends non-blocking; `port` is the listening end's.
bool Connect(int* client, int* server, int* port, std::string* why) {
  const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    *why = Errno("listen");
    return false;
  }
  *port = ntohs(a.sin_port);
  *client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (*client < 0 || ::connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    *why = Errno("connect");
    return false;
  }
  *server = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(l);
  if (*server < 0) {
    *why = Errno("accept");
    return false;
  }
  for (int fd : {*client, *server}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return true;
}

uint32_t LastAckRecvMs(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len);
  return info.tcpi_last_ack_recv;
}

void Drain(int fd) {
  char buf[65536];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
}

// Runs 1 s of traffic: the link's end writes 4 KiB at the start, `peer` writes 1000 bytes
// every 2 ms and reads what arrives, the link's end reads what arrives; the link is asked on
// every tick. Reports, in ms from the write, when the link first said AwaitingRetransmission
// (-1: never), on how many ticks after that it did not, whether AcknowledgedWithin(50 ms)
// held at the end or at any tick after 60 ms, and on how many ticks after the first "awaiting"
// TCP's last ACK was under 20 ms old (where tcpi_last_ack_recv would have said "not awaiting").
void Exchange(transport::tcp::SocketLink& link, int peer, const char* tag, RankReporter& rep) {
  std::vector<char> data(4096, 'x');
  const auto t0 = Clock::now();
  if (::write(link.fd(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    rep.Fail(Errno("write"));
    return;
  }
  int64_t awaiting_ms = -1, lapses = 0, last_ack_fresh = 0;
  // ReadTransportAcks on the same ticks: the longest time it reported without delivery, and
  // the segments unacknowledged at the end.
  int64_t max_quiet_ms = 0, unacked_at_end = -1;
  bool acknowledged = false, acknowledged_late = false;
  std::vector<char> small(1000, 'y');
  while (Clock::now() - t0 < 1000ms) {
    (void)!::write(peer, small.data(), small.size());
    Drain(peer);
    Drain(link.fd());
    acknowledged = link.AcknowledgedWithin(50ms);
    const bool awaiting = link.AwaitingRetransmission();
    if (const auto a = link.ReadTransportAcks()) {
      max_quiet_ms = std::max<int64_t>(
          max_quiet_ms,
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - a->quiet_since)
              .count());
      unacked_at_end = a->unacked_segments;
    }
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (acknowledged && ms > 60) acknowledged_late = true;
    if (awaiting_ms < 0 && awaiting) {
      awaiting_ms = ms;
    } else if (awaiting_ms >= 0) {
      if (!awaiting) ++lapses;
      if (LastAckRecvMs(link.fd()) < 20) ++last_ack_fresh;
    }
    std::this_thread::sleep_for(2ms);
  }
  const std::string t(tag);
  rep.Value(t + "_awaiting_ms", awaiting_ms);
  rep.Value(t + "_awaiting_lapses", lapses);
  rep.Value(t + "_last_ack_fresh", last_ack_fresh);
  rep.Value(t + "_acknowledged", acknowledged ? 1 : 0);
  rep.Value(t + "_acknowledged_late", acknowledged_late ? 1 : 0);
  rep.Value(t + "_max_quiet_ms", max_quiet_ms);
  rep.Value(t + "_unacked_at_end", unacked_at_end);
}

TEST(SocketLinkAcks, OnlyDataTheyAcknowledgeCountsNotThePeersOwnSegments) {
  test::LaunchResult result = test::LaunchRanks(1, 30s, [](int, RankReporter& rep) {
    std::string why;
    if (!EnterPrivateNet(&why)) {
      rep.Fail(why);
      return 1;
    }
    // Fault-free: each end reads, everything is acknowledged.
    int client = -1, server = -1, port = 0;
    if (!Connect(&client, &server, &port, &why)) {
      rep.Fail(why);
      return 1;
    }
    {
      transport::tcp::SocketLink link{net::Fd(client)};
      Exchange(link, server, "clean", rep);
      ::close(server);
    }
    // The same, with every data segment to the listening end dropped (pure ACKs, 52 bytes
    // with timestamps, go through; so does all the listening end sends).
    if (!Connect(&client, &server, &port, &why)) {
      rep.Fail(why);
      return 1;
    }
    if (!Nft("table ip fl_link_acks {\n chain in {\n  type filter hook input priority 0;\n"
             "  tcp dport " +
                 std::to_string(port) + " ip length > 200 drop\n }\n}\n",
             &why)) {
      rep.Fail(why);
      return 1;
    }
    transport::tcp::SocketLink link{net::Fd(client)};
    Exchange(link, server, "dropped", rep);
    ::close(server);
    return 0;
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  const test::RankOutcome& r = result.ranks[0];
  EXPECT_EQ(r.value("clean_awaiting_ms"), -1) << "fault-free, the link waited for a retransmission";
  EXPECT_EQ(r.value("clean_acknowledged"), 1);
  // Nothing was acknowledged: waiting from 20 ms on (8 loopback round trips are less), on
  // every tick to the end, and never acknowledged after the first 50 ms window.
  EXPECT_GE(r.value("dropped_awaiting_ms"), 20);
  EXPECT_LT(r.value("dropped_awaiting_ms"), 150);
  EXPECT_EQ(r.value("dropped_awaiting_lapses"), 0) << "the peer's own segments read as progress";
  EXPECT_EQ(r.value("dropped_acknowledged_late"), 0) << "nothing new was acknowledged";
  EXPECT_EQ(r.value("dropped_acknowledged"), 0);
  // What makes the case: the peer's segments refreshed TCP's last-ACK time meanwhile (once
  // the sender retransmits, here), so that time alone would have shown no loss on those ticks.
  EXPECT_GT(r.value("dropped_last_ack_fresh"), 0)
      << "tcpi_last_ack_recv never refreshed: this run cannot tell the two criteria apart";
  // ReadTransportAcks (the engine's hedge): fault-free, everything is acknowledged within a
  // loopback round trip, so no reading finds the link quiet for long; with the data dropped it
  // is quiet from the first reading to the last (about 1 s), the peer's segments and the
  // sender's retransmissions notwithstanding, and still holds the unacknowledged segments.
  EXPECT_LT(r.value("clean_max_quiet_ms"), 100) << "fault-free, the link read as quiet";
  EXPECT_GE(r.value("dropped_max_quiet_ms"), 900) << "dropped data read as delivered";
  EXPECT_GE(r.value("dropped_unacked_at_end"), 1);
  EXPECT_EQ(r.value("clean_unacked_at_end"), 0);
}

// A busy socket read by two callers: the engine's hedge check reads ReadTransportAcks every
// millisecond and the suspicion check asks AcknowledgedWithin every tick, on the same link. A
// growth seen by the first must count for the second (it once did not: a working path read as
// silent and was suspected in a fault-free run). Over loopback shaped to 200 Mbit/s (tbf, in a
// private namespace), so that the socket holds unacknowledged data while its acknowledgements
// flow, one end writes without pause while the other reads; on every tick both are asked,
// ReadTransportAcks first.
TEST(SocketLinkAcks, AGrowthSeenByOneReaderCountsForTheOther) {
  test::LaunchResult result = test::LaunchRanks(1, 30s, [](int, RankReporter& rep) {
    std::string why;
    if (!EnterPrivateNet(&why)) {
      rep.Fail(why);
      return 1;
    }
    if (std::system("tc qdisc add dev lo root tbf rate 200mbit burst 256kb latency 50ms") != 0) {
      rep.Fail("tc qdisc add dev lo root tbf failed");
      return 1;
    }
    int client = -1, server = -1, port = 0;
    if (!Connect(&client, &server, &port, &why)) {
      rep.Fail(why);
      return 1;
    }
    transport::tcp::SocketLink link{net::Fd(client)};
    std::vector<char> data(256 << 10, 'z');
    const auto t0 = Clock::now();
    // The truth, read by the test itself after both calls: when tcpi_bytes_acked last grew.
    uint64_t acked = 0;
    Clock::time_point grew{};
    int64_t busy = 0, silent = 0;
    while (Clock::now() - t0 < 500ms) {
      (void)!::write(link.fd(), data.data(), data.size());
      Drain(server);
      const auto a = link.ReadTransportAcks();
      const bool acknowledged = link.AcknowledgedWithin(50ms);
      tcp_info info{};
      socklen_t len = sizeof info;
      ::getsockopt(link.fd(), IPPROTO_TCP, TCP_INFO, &info, &len);
      const auto now = Clock::now();
      if (info.tcpi_bytes_acked != acked) {
        acked = info.tcpi_bytes_acked;
        grew = now;
      }
      // Busy, and acknowledged well within the window by the test's own readings (a loss the
      // shaper causes may hold acknowledgements back for longer: not counted either way).
      if (a && now - t0 > 60ms && a->unacked_segments > 0 && now - grew < 30ms) {
        ++busy;
        if (!acknowledged) ++silent;
      }
      std::this_thread::sleep_for(1ms);
    }
    ::close(server);
    rep.Value("busy", busy);
    rep.Value("silent", silent);
    return 0;
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  const test::RankOutcome& r = result.ranks[0];
  ASSERT_GT(r.value("busy"), 50) << "the socket seldom held unacknowledged data: nothing tested";
  EXPECT_EQ(r.value("silent"), 0) << "of " << r.value("busy")
                                  << " busy ticks, these read as acknowledging nothing";
}

}  // namespace
}  // namespace ftccl::testing
