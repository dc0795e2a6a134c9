// RailSampler (runner/exec/rail_sampler.h) on a real namespace topology: the counters of the
// rail a TCP transfer crosses grow by at least what was sent, the rail nothing uses reads exactly 0
// (IPv6 is off on rail ports), a port or namespace that does not exist is an error in
// errors() and an empty cell, not a failed run, and RDMA port counters are read from the
// sysfs layout (a stand-in directory here: this kernel has no RDMA).
#include "runner/exec/rail_sampler.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/clock.h"
#include "injector/realtime_scope.h"
#include "net_test_util.h"
#include "reports/run_files.h"

namespace faultline::runner {
namespace {

using testing::BuildOrSkip;
using testing::Sh;
using testing::TempDir;

// The growth of port p's counter between its first and last valid samples (a sample the
// sampler could not read in time is left out: late_samples()).
uint64_t Delta(const RailSeries& s, size_t p, bool tx) {
  const RailCounters* first = nullptr;
  const RailCounters* last = nullptr;
  for (size_t i = 0; i < s.samples(); ++i) {
    if (!s.Net(i, p).valid) continue;
    if (first == nullptr) first = &s.Net(i, p);
    last = &s.Net(i, p);
  }
  EXPECT_NE(first, last) << "port " << p << ": fewer than two valid samples";
  if (first == nullptr) return 0;
  return tx ? last->tx_bytes - first->tx_bytes : last->rx_bytes - first->rx_bytes;
}

TEST(RailSampler, CountsTheBusyRailAndReadsZeroOnTheIdleOne) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.rails = 2;
  o.rail_gbps = 1.0;
  std::string skip;
  auto topo = BuildOrSkip(o, journal.path(), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(topo, nullptr);
  // IPv6 is off on both ends of every rail veth and on the rail bridges.
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(Sh("ip netns exec " + topo->host(h).netns + " cat /proc/sys/net/ipv6/conf/r" +
                   std::to_string(r) + "/disable_ipv6"),
                "1\n");
      EXPECT_EQ(Sh("ip netns exec " + topo->switch_netns() + " cat /proc/sys/net/ipv6/conf/" +
                   NetTopology::SwitchRailDev(h, r) + "/disable_ipv6"),
                "1\n");
    }
  }
  EXPECT_EQ(Sh("ip netns exec " + topo->switch_netns() +
               " cat /proc/sys/net/ipv6/conf/rail0/disable_ipv6"),
            "1\n");
  // No multicast snooping on the rail bridges (a snooping bridge sends IGMP reports of its own).
  for (int r = 0; r < 2; ++r) {
    nlohmann::json b = testing::ShJson("ip -d -j -n " + topo->switch_netns() + " link show rail" +
                                       std::to_string(r));
    ASSERT_TRUE(b.is_array() && !b.empty());
    EXPECT_EQ(b[0]["linkinfo"]["info_data"].value("mcast_snooping", -1), 0) << r;
  }
  std::vector<RailSamplerPort> ports;
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 2; ++r) {
      ports.push_back({{h, r, std::nullopt, false},
                       topo->host(h).netns,
                       topo->host(h).rail_devs[r],
                       std::nullopt});
    }
  }
  RailSamplerOptions so;
  so.period_ns = 10'000'000;
  so.reserve_samples = 200;
  so.start_at_ns = MonoNow();  // passed by the time the thread runs: the first sample at once
  auto sampler = RailSampler::Start(ports, so);
  ASSERT_TRUE(sampler.ok()) << sampler.status().ToString();
  // 2 MB over TCP from host 0 to host 1 on rail 0.
  constexpr int64_t kBytes = 2'000'000;
  const std::string dst = topo->host(1).rail_addrs[0];
  testing::Listener listener(topo->host(1).netns, dst);
  ASSERT_TRUE(listener.ok());
  std::thread sender([&] {
    Sh("ip netns exec " + topo->host(0).netns + " bash -c 'head -c " + std::to_string(kBytes) +
       " /dev/zero >/dev/tcp/" + dst + "/" + std::to_string(listener.port()) + "'");
  });
  std::string from;
  EXPECT_EQ(listener.AcceptAndDrain(20000, &from, nullptr), kBytes);
  sender.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*sampler)->Stop();
  const RailSeries& s = (*sampler)->series();
  EXPECT_TRUE((*sampler)->errors().empty()) << (*sampler)->errors()[0];
  ASSERT_GE(s.samples(), 3u);
  for (size_t i = 1; i < s.samples(); ++i) EXPECT_GT(s.t_ns[i], s.t_ns[i - 1]);
  // Each sample names the grid tick it was taken for, never before its time; the last may be
  // the one taken at the stop, which names the nearest tick (up to half a period ahead).
  ASSERT_EQ(s.tick.size(), s.samples());
  EXPECT_EQ(s.tick[0], 0);
  for (size_t i = 0; i < s.samples(); ++i) {
    if (i > 0) {
      EXPECT_GT(s.tick[i], s.tick[i - 1]) << i;
    }
    const int64_t due = so.start_at_ns + s.tick[i] * so.period_ns;
    if (i + 1 < s.samples()) {
      EXPECT_GE(s.t_ns[i], due) << i;
    } else {
      EXPECT_GE(s.t_ns[i], due - so.period_ns / 2) << i;
    }
  }
  // Ports in order h0r0, h0r1, h1r0, h1r1. Host 0 sent the bytes out of r0 (and got ACKs);
  // host 1 received them on its r0.
  EXPECT_GE(Delta(s, 0, true), static_cast<uint64_t>(kBytes));
  EXPECT_GT(Delta(s, 0, false), 0u);
  EXPECT_GE(Delta(s, 2, false), static_cast<uint64_t>(kBytes));
  EXPECT_GT(Delta(s, 2, true), 0u);
  // Rail 1: not one byte either way (with multicast snooping on, the bridge's two IGMPv3
  // reports, 108 bytes, arrive on each host's port just after the rail comes up).
  EXPECT_EQ(Delta(s, 1, true), 0u);
  EXPECT_EQ(Delta(s, 1, false), 0u);
  EXPECT_EQ(Delta(s, 3, true), 0u);
  EXPECT_EQ(Delta(s, 3, false), 0u);
  sampler->reset();
  EXPECT_TRUE(topo->Teardown().ok());
}

TEST(RailSampler, MissingPortsAreErrorsAndRdmaCountersAreRead) {
  TempDir sysfs;
  namespace fs = std::filesystem;
  const fs::path counters = fs::path(sysfs.path()) / "rxe0/ports/1/counters";
  fs::create_directories(counters);
  std::ofstream(counters / "port_xmit_data") << "100\n";
  std::ofstream(counters / "port_rcv_data") << "200\n";
  std::vector<RailSamplerPort> ports = {
      // lo of the runner's own namespace: always there.
      {{0, 0, std::nullopt, false}, "", "lo", RdmaPortRef{"rxe0", 1}},
      {{0, 1, std::nullopt, false}, "", "no-such-dev0", std::nullopt},
      {{1, 0, std::nullopt, false}, "fl-nosuchns-h1", "r0", RdmaPortRef{"rxe9", 1}},
  };
  RailSamplerOptions so;
  so.period_ns = 5'000'000;
  so.sysfs_root = sysfs.path();
  auto sampler = RailSampler::Start(ports, so);
  ASSERT_TRUE(sampler.ok()) << sampler.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::ofstream(counters / "port_xmit_data") << "1100\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*sampler)->Stop();
  const RailSeries& s = (*sampler)->series();
  ASSERT_GE(s.samples(), 5u);
  const size_t last = s.samples() - 1;
  bool lo_read = false;
  for (size_t i = 0; i < s.samples(); ++i) lo_read = lo_read || s.Net(i, 0).valid;
  EXPECT_TRUE(lo_read);
  EXPECT_FALSE(s.Net(last, 1).valid);
  EXPECT_FALSE(s.Net(last, 2).valid);
  ASSERT_NE(s.Rdma(0, 0), nullptr);
  // The counters read before and after the file changed (4-byte units), in valid samples.
  std::vector<uint64_t> tx;
  for (size_t i = 0; i < s.samples(); ++i) {
    if (!s.Rdma(i, 0)->valid) continue;
    EXPECT_EQ(s.Rdma(i, 0)->rx_bytes, 800u);
    if (tx.empty() || tx.back() != s.Rdma(i, 0)->tx_bytes) tx.push_back(s.Rdma(i, 0)->tx_bytes);
    EXPECT_FALSE(s.Rdma(i, 2)->valid);
  }
  EXPECT_EQ(tx, (std::vector<uint64_t>{400, 4400}))
      << (*sampler)->late_samples() << " late of " << s.samples();
  EXPECT_LE((*sampler)->late_samples(), s.samples() / 2);
  std::string all;
  for (const auto& e : (*sampler)->errors()) all += e + "\n";
  EXPECT_NE(all.find("no-such-dev0"), std::string::npos) << all;
  EXPECT_NE(all.find("fl-nosuchns-h1"), std::string::npos) << all;
  EXPECT_NE(all.find("rxe9"), std::string::npos) << all;
  // rails.csv keeps the columns, with empty cells where nothing was read.
  const std::string csv = reports::RailsCsv(RailsTableOf(s, s.t_ns[0]));
  EXPECT_NE(csv.find("h0_r0_rdma_tx_gbps"), std::string::npos);
  EXPECT_NE(csv.find(",,"), std::string::npos);
}

// The sampling thread runs SCHED_FIFO below the fault timing's priority where the process may
// (root), so ordinary load does not push its ticks off the grid and it never delays a fault.
TEST(RailSampler, SamplesAtARealtimePriorityBelowTheFaultTiming) {
  {
    const sched_param p{RealtimeScope::kSamplerPriority};
    if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) GTEST_SKIP() << "SCHED_FIFO not permitted";
    const sched_param normal{};
    sched_setscheduler(0, SCHED_OTHER, &normal);
  }
  RailSamplerOptions so;
  so.period_ns = 5'000'000;
  auto sampler = RailSampler::Start({{{0, 0, std::nullopt, false}, "", "lo", std::nullopt}}, so);
  ASSERT_TRUE(sampler.ok()) << sampler.status().ToString();
  int fifo_at = -1;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t tid = std::stoi(t.path().filename().string());
    sched_param p{};
    if ((sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO &&
        sched_getparam(tid, &p) == 0) {
      fifo_at = p.sched_priority;
    }
  }
  (*sampler)->Stop();
  EXPECT_EQ(fifo_at, RealtimeScope::kSamplerPriority) << "no sampling thread at SCHED_FIFO";
  EXPECT_LT(RealtimeScope::kSamplerPriority, RealtimeScope::kPriority);
}

TEST(RailSampler, RejectsBadOptions) {
  EXPECT_EQ(RailSampler::Start({}, {}).status().code(), Code::kInvalidArgument);
  RailSamplerOptions so;
  so.period_ns = 100'000;
  EXPECT_EQ(RailSampler::Start({{{0, 0, std::nullopt, false}, "", "lo", std::nullopt}}, so)
                .status()
                .code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace faultline::runner
