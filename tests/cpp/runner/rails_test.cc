// runner/core/rails.h on hand-built counter series: rates, counter resets and wraps, the
// rails.csv layout and the per-fault before / during / after windows.
#include "runner/core/rails.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "reports/run_files.h"
#include "runner/core/report_json.h"

namespace faultline::runner {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

// A series of `ports` ports sampled every `period` from `t_from` to `t_to` inclusive; port p
// carries rate(p, t) bytes/ns each way (tx = rx = the same).
template <typename Rate>
RailSeries Build(int ports, int64_t t_from, int64_t t_to, int64_t period, Rate rate) {
  RailSeries s;
  for (int p = 0; p < ports; ++p) s.ports.push_back({0, p, std::nullopt, false});
  std::vector<double> acc(ports, 0);
  for (int64_t t = t_from; t <= t_to; t += period) {
    if (!s.t_ns.empty()) {
      for (int p = 0; p < ports; ++p) acc[p] += rate(p, t) * static_cast<double>(period);
    }
    s.t_ns.push_back(t);
    for (int p = 0; p < ports; ++p) {
      const auto b = static_cast<uint64_t>(acc[p]);
      s.net.push_back({b, b / 2, true});  // rx is half of tx
    }
  }
  return s;
}

FaultRecord Fault(const std::string& id, std::optional<int64_t> applied,
                  std::optional<int64_t> reverted) {
  FaultRecord f;
  f.id = id;
  f.applied_ns = applied;
  f.reverted_ns = reverted;
  return f;
}

TEST(RailsTest, CounterDeltaHandlesResetAndWrap) {
  EXPECT_EQ(CounterDelta(10, 25, 64), 15u);
  EXPECT_EQ(CounterDelta(25, 10, 64), std::nullopt);                // a reset, not a huge delta
  EXPECT_EQ(CounterDelta(0xFFFFFFF0u, 0x10u, 32), 0x20u);           // a 32-bit counter wrapped
  EXPECT_EQ(CounterDelta(uint64_t{1} << 40, 5, 32), std::nullopt);  // wider than its width
}

TEST(RailsTest, RateIsBitsPerNanosecond) {
  // 125 bytes/ns each way = 1000 Gbit/s tx, 500 rx
  RailSeries s = Build(1, 0, 100 * kMs, 20 * kMs, [](int, int64_t) { return 125.0; });
  auto r = RateAt(s, s.net, 1, 0);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->tx_gbps, 1000.0, 1e-6);
  EXPECT_NEAR(r->rx_gbps, 500.0, 1e-6);
  EXPECT_FALSE(RateAt(s, s.net, 0, 0));  // no interval before the first sample
}

TEST(RailsTest, ResetIntervalHasNoRateAndIsLeftOutOfWindows) {
  RailSeries s = Build(1, 0, 1 * kS, 100 * kMs, [](int, int64_t) { return 1.0; });
  // The device was re-created before sample 5: its counters start again near 0.
  for (size_t i = 5; i < s.samples(); ++i) {
    s.net[i].tx_bytes -= s.net[4].tx_bytes + 1000;
    s.net[i].rx_bytes -= s.net[4].rx_bytes + 1000;
  }
  EXPECT_FALSE(RateAt(s, s.net, 5, 0));
  ASSERT_TRUE(RateAt(s, s.net, 6, 0));
  EXPECT_NEAR(RateAt(s, s.net, 6, 0)->tx_gbps, 8.0, 1e-6);
  std::vector<FaultRails> w = RailWindows(s, {Fault("f", 2 * kS, std::nullopt)}, {0, 1 * kS});
  ASSERT_EQ(w.size(), 1u);
  // 9 intact intervals at 8 Gbit/s; the reset one would have read as ~0 or as ~1.8e19 bytes.
  ASSERT_TRUE(w[0].rails[0].before.tx_gbps);
  EXPECT_NEAR(*w[0].rails[0].before.tx_gbps, 8.0, 1e-6);
}

TEST(RailsTest, WrappingCounterGivesTheTrueRate) {
  RailSeries s = Build(1, 0, 200 * kMs, 20 * kMs, [](int, int64_t) { return 1.0; });
  s.counter_bits = 32;
  const uint64_t base = 0xFFFFFFFFu - 50'000'000u;  // wraps after ~50 ms
  for (auto& c : s.net) {
    c.tx_bytes = (c.tx_bytes + base) & 0xFFFFFFFFu;
    c.rx_bytes = (c.rx_bytes + base) & 0xFFFFFFFFu;
  }
  for (size_t i = 1; i < s.samples(); ++i) {
    auto r = RateAt(s, s.net, i, 0);
    ASSERT_TRUE(r) << i;
    EXPECT_NEAR(r->tx_gbps, 8.0, 1e-6) << i;
  }
}

TEST(RailsTest, WindowsBeforeDuringAfter) {
  // Port 0 carries 1 byte/ns except while the fault holds (2 s .. 3.5 s); port 1 never.
  auto rate = [](int p, int64_t t) {
    if (p == 1) return 0.0;
    return (t > 2 * kS && t <= 3500 * kMs) ? 0.0 : 1.0;
  };
  RailSeries s = Build(2, 0, 6 * kS, 20 * kMs, rate);
  std::vector<FaultRails> w =
      RailWindows(s, {Fault("f1", 2 * kS, 3500 * kMs)}, {500 * kMs, 6 * kS});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].fault_id, "f1");
  ASSERT_EQ(w[0].rails.size(), 2u);
  const RailWindow& r0 = w[0].rails[0];
  EXPECT_NEAR(*r0.before.gbps(), 8.0, 1e-6);  // max(tx 8, rx 4)
  EXPECT_NEAR(*r0.before.rx_gbps, 4.0, 1e-6);
  EXPECT_NEAR(*r0.during.gbps(), 0.0, 1e-9);
  EXPECT_NEAR(*r0.after.gbps(), 8.0, 1e-6);
  const RailWindow& r1 = w[0].rails[1];
  EXPECT_EQ(*r1.before.gbps(), 0.0);
  EXPECT_EQ(*r1.during.gbps(), 0.0);
  nlohmann::json j = r0.ToJson();
  EXPECT_EQ(j["host"], 0);
  EXPECT_EQ(j["rail"], 0);
  EXPECT_FALSE(j.contains("rank"));
  EXPECT_NEAR(j["before_gbps"].get<double>(), 8.0, 1e-6);
  EXPECT_NEAR(j["during_gbps"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(j["after_tx_gbps"].get<double>(), 8.0, 1e-6);
}

TEST(RailsTest, AfterEndsAtTheNextFaultAndWindowsClipToTheEnd) {
  // 1 byte/ns until 4 s, then 3 bytes/ns.
  auto rate = [](int, int64_t t) { return t <= 4 * kS ? 1.0 : 3.0; };
  RailSeries s = Build(1, 0, 8 * kS, 20 * kMs, rate);
  std::vector<FaultRecord> f = {Fault("a", 1 * kS, 2 * kS), Fault("b", 4 * kS, std::nullopt)};
  std::vector<FaultRails> w = RailWindows(s, f, {0, 6 * kS});
  ASSERT_EQ(w.size(), 2u);
  // a: after = 3 s .. 4 s (b's applied time), not into b's 3-byte period.
  EXPECT_NEAR(*w[0].rails[0].after.tx_gbps, 8.0, 1e-6);
  // b: never reverted: during runs to the window end (6 s), after is null.
  EXPECT_NEAR(*w[1].rails[0].during.tx_gbps, 24.0, 1e-6);
  EXPECT_FALSE(w[1].rails[0].after.tx_gbps);
  // Both share the baseline before the first fault.
  EXPECT_NEAR(*w[1].rails[0].before.tx_gbps, 8.0, 1e-6);
}

TEST(RailsTest, EmptyWindowsAreNull) {
  RailSeries s = Build(1, 0, 2 * kS, 20 * kMs, [](int, int64_t) { return 1.0; });
  // Applied before the warm-up ends: no baseline; reverted + 1 s is past the window end.
  std::vector<FaultRails> w =
      RailWindows(s, {Fault("f", 300 * kMs, 1500 * kMs)}, {500 * kMs, 2 * kS});
  const RailWindow& r = w[0].rails[0];
  EXPECT_FALSE(r.before.gbps());
  EXPECT_TRUE(r.during.gbps());
  EXPECT_FALSE(r.after.gbps());
  EXPECT_TRUE(r.ToJson()["before_gbps"].is_null());
  EXPECT_TRUE(r.ToJson()["after_rx_gbps"].is_null());
  // A window with a single sample in it has no interval: null.
  std::vector<FaultRails> w2 = RailWindows(s, {Fault("g", 1010 * kMs, 1030 * kMs)}, {0, 2 * kS});
  EXPECT_FALSE(w2[0].rails[0].during.gbps());
  // A fault never applied: only the run's baseline.
  std::vector<FaultRails> w3 =
      RailWindows(s, {Fault("h", std::nullopt, std::nullopt)}, {0, 2 * kS});
  EXPECT_TRUE(w3[0].rails[0].before.gbps());
  EXPECT_FALSE(w3[0].rails[0].during.gbps());
  EXPECT_FALSE(w3[0].rails[0].after.gbps());
  // No samples at all.
  RailSeries none;
  none.ports.push_back({1, 0, 2, false});
  std::vector<FaultRails> w4 = RailWindows(none, {Fault("i", 1 * kS, 2 * kS)}, {0, 3 * kS});
  ASSERT_EQ(w4[0].rails.size(), 1u);
  EXPECT_FALSE(w4[0].rails[0].before.gbps());
  EXPECT_EQ(w4[0].rails[0].ToJson()["rank"], 2);
}

TEST(RailsTest, InvalidSamplesAreLeftOut) {
  RailSeries s = Build(1, 0, 1 * kS, 100 * kMs, [](int, int64_t) { return 1.0; });
  s.net[3].valid = false;  // a failed read: the two intervals around it have no rate
  EXPECT_FALSE(RateAt(s, s.net, 3, 0));
  EXPECT_FALSE(RateAt(s, s.net, 4, 0));
  std::vector<FaultRails> w = RailWindows(s, {Fault("f", 2 * kS, std::nullopt)}, {0, 1 * kS});
  EXPECT_NEAR(*w[0].rails[0].before.tx_gbps, 8.0, 1e-6);
}

TEST(RailsTest, CsvHasOneColumnPairPerPortAndEmptyCellsWithoutRate) {
  RailSeries s;
  s.ports = {{0, 0, std::nullopt, false}, {1, 1, 0, true}};
  s.t_ns = {10 * kS, 10 * kS + 20 * kMs, 10 * kS + 40 * kMs};
  s.net = {{0, 0, true},
           {0, 0, true},  // sample 0
           {2'500'000, 0, true},
           {0, 0, false},  // sample 1: port 1 unreadable
           {5'000'000, 1'250'000, true},
           {0, 0, true}};
  s.rdma = {{0, 0, false},    {0, 0, true},  {0, 0, false},
            {100, 200, true}, {0, 0, false}, {50, 400, true}};  // tx went back: a reset
  const std::string csv = reports::RailsCsv(RailsTableOf(s, 10 * kS));
  std::istringstream in(csv);
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_EQ(header,
            "t_s,h0_r0_tx_gbps,h0_r0_rx_gbps,h1_n0_r1_tx_gbps,h1_n0_r1_rx_gbps,"
            "h1_n0_r1_rdma_tx_gbps,h1_n0_r1_rdma_rx_gbps");
  EXPECT_EQ(row1, "0.020000,1.000000,0.000000,,,0.000040,0.000080");
  EXPECT_EQ(row2, "0.040000,1.000000,0.500000,,,,");
}

TEST(RailsTest, ReportJsonCarriesPerFaultRailsAndTheFile) {
  Scenario sc;
  sc.name = "rails";
  History h;
  h.faults = {Fault("f1", 2 * kS, 3 * kS), Fault("f2", 4 * kS, 5 * kS)};
  RunMetrics m;
  for (const char* id : {"f2", "f1"}) {  // a different order than the faults
    FaultMetrics f;
    f.id = id;
    f.values = m.overall;
    m.per_fault.push_back(f);
  }
  std::vector<CheckResult> checks;
  ReportInputs in;
  in.scenario = &sc;
  in.history = &h;
  in.metrics = &m;
  in.checks = &checks;
  // Without rail inputs nothing changes but a null files.rails.
  nlohmann::json plain = BuildReportJson(in);
  EXPECT_TRUE(plain["files"]["rails"].is_null());
  EXPECT_FALSE(plain["per_fault"][0].contains("rails"));
  EXPECT_FALSE(plain.contains("rails"));

  // Port 0: 1 byte/ns until 4 s, 2 after, so each fault's window reads its own rate.
  RailSeries s = Build(2, 0, 7 * kS, 20 * kMs,
                       [](int p, int64_t t) { return p == 0 ? (t <= 4 * kS ? 1.0 : 2.0) : 0.0; });
  std::vector<FaultRails> fr = RailWindows(s, h.faults, {0, 7 * kS});
  in.fault_rails = &fr;
  in.files.rails = "rails.csv";
  in.rails_note = {{"sampled", true}};
  nlohmann::json r = BuildReportJson(in);
  EXPECT_EQ(r["files"]["rails"], "rails.csv");
  EXPECT_EQ(r["rails"]["sampled"], true);
  ASSERT_EQ(r["per_fault"][0]["id"], "f2");
  ASSERT_EQ(r["per_fault"][0]["rails"].size(), 2u);
  EXPECT_EQ(r["per_fault"][0]["rails"][1]["rail"], 1);
  EXPECT_NEAR(r["per_fault"][0]["rails"][0]["during_gbps"].get<double>(), 16.0, 1e-6);
  EXPECT_NEAR(r["per_fault"][1]["rails"][0]["during_gbps"].get<double>(), 8.0, 1e-6);
  EXPECT_EQ(r["per_fault"][1]["rails"][1]["during_gbps"].get<double>(), 0.0);
}

// A host's series as its agent sends it comes back whole; what is not such a series is refused
// with a reason, never read as counters.
TEST(RailsTest, AgentSeriesRoundTripsAndLiesAreRefused) {
  RailSeries s = Build(2, 0, 100 * kMs, 20 * kMs, [](int, int64_t) { return 1.0; });
  s.ports[1].rank = 3;
  s.ports[1].rdma = true;
  s.rdma.assign(s.net.size(), RailCounters{7, 9, true});
  s.net[3].valid = false;
  for (size_t i = 0; i < s.samples(); ++i) s.tick.push_back(2 * static_cast<int64_t>(i));
  std::string why;
  auto back = RailSeriesFromJson(nlohmann::json::parse(RailSeriesToJson(s).dump()), &why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->samples(), s.samples());
  EXPECT_EQ(back->t_ns, s.t_ns);
  EXPECT_EQ(back->tick, s.tick);
  EXPECT_EQ(back->ports[1].rank, 3);
  EXPECT_TRUE(back->ports[1].rdma);
  EXPECT_FALSE(back->ports[0].rank);
  for (size_t i = 0; i < s.net.size(); ++i) {
    EXPECT_EQ(back->net[i].valid, s.net[i].valid) << i;
    if (s.net[i].valid) {
      EXPECT_EQ(back->net[i].tx_bytes, s.net[i].tx_bytes) << i;
    }
  }
  EXPECT_EQ(back->rdma[0].rx_bytes, 9u);

  auto refused = [](nlohmann::json j) {
    std::string e;
    const bool ok = RailSeriesFromJson(j, &e).has_value();
    return !ok && !e.empty();
  };
  const nlohmann::json good = RailSeriesToJson(s);
  EXPECT_TRUE(refused(nlohmann::json::array()));
  EXPECT_TRUE(refused({{"ports", 1}, {"t_ns", {}}}));
  nlohmann::json j = good;
  j["net"].erase(0);  // one entry short
  EXPECT_TRUE(refused(j));
  j = good;
  j["net"][0] = {1, -2};  // a negative counter
  EXPECT_TRUE(refused(j));
  j = good;
  j["net"][0] = "lots";
  EXPECT_TRUE(refused(j));
  j = good;
  j["t_ns"][2] = 0;  // time goes backwards
  EXPECT_TRUE(refused(j));
  j = good;
  j["ports"][0]["host"] = -1;
  EXPECT_TRUE(refused(j));
  j = good;
  j["counter_bits"] = 65;
  EXPECT_TRUE(refused(j));
  j = good;
  j["tick"][2] = j["tick"][1];  // two samples for one tick
  EXPECT_TRUE(refused(j));
  j = good;
  j["tick"].erase(0);
  EXPECT_TRUE(refused(j));
  j = good;
  j["tick"][0] = 0.5;
  EXPECT_TRUE(refused(j));
  j = good;
  j["rdma"].push_back(nullptr);
  EXPECT_TRUE(refused(j));
}

// Two hosts sample on one 20 ms grid of the runner's clock, each a little off it (their clock
// offsets), one skipping ticks (a stalled host) and taking a last sample at the stop: rows go by
// tick, a host without a sample at a tick has invalid counters there, and a rate over a row pair
// is each host's own.
TEST(RailsTest, HostsSeriesMergeByTickOfTheGrid) {
  const int64_t start = 1 * kS, period = 20 * kMs;
  // Host 0: 2 bytes/ns, samples 30 us late; host 1: 1 byte/ns, 40 us early, and no samples at
  // ticks 3 and 4; both at ticks 0..9, host 1 also at 195 ms (its stop, nearest tick 10).
  auto part = [&](int host, double rate, int64_t skew, std::vector<int> skip) {
    RailSeries s;
    s.ports.push_back({host, 0, std::nullopt, false});
    for (int k = 0; k < 10; ++k) {
      if (std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
      const int64_t t = start + k * period + skew;
      const auto b = static_cast<uint64_t>(rate * static_cast<double>(t - start + 10 * kMs));
      s.t_ns.push_back(t);
      s.net.push_back({b, b, true});
    }
    return s;
  };
  RailSeries h0 = part(0, 2.0, 30'000, {});
  RailSeries h1 = part(1, 1.0, -40'000, {3, 4});
  h1.t_ns.push_back(start + 195 * kMs);
  h1.net.push_back({205 * kMs, 205 * kMs, true});
  // Host 0's stop sample comes 4 ms before host 1's: the same tick, far apart.
  h0.t_ns.push_back(start + 191 * kMs);
  h0.net.push_back({2 * 201 * kMs, 2 * 201 * kMs, true});
  // A sample before the grid starts by more than half a period matches no tick.
  h1.t_ns.insert(h1.t_ns.begin(), start - 15 * kMs);
  h1.net.insert(h1.net.begin(), RailCounters{0, 0, true});

  MergedRails m = MergeRailSeries({h0, h1}, start, period);
  const RailSeries& s = m.series;
  ASSERT_EQ(s.ports.size(), 2u);
  EXPECT_EQ(s.ports[1].host, 1);
  ASSERT_EQ(s.samples(), 11u);  // ticks 0..10
  EXPECT_EQ(m.unmatched, 1u);
  EXPECT_EQ(m.max_spread_ns, 4 * kMs);
  EXPECT_EQ(s.t_ns[0], start - 5'000);                // the mean of +30 us and -40 us
  EXPECT_EQ(s.t_ns[3], start + 3 * period + 30'000);  // host 0 alone
  EXPECT_EQ(s.t_ns[10], start + 193 * kMs);
  EXPECT_TRUE(s.Net(3, 0).valid);
  EXPECT_FALSE(s.Net(3, 1).valid);
  EXPECT_TRUE(s.Net(10, 0).valid);
  EXPECT_TRUE(s.Net(10, 1).valid);
  // Each port's rate is over its own host's interval: host 0's 16 Gbit/s and host 1's 8
  // exactly, also over the last row, where the hosts' times are 4 ms apart.
  for (size_t i : {1, 2, 4, 6, 9, 10}) {
    auto r0 = RateAt(s, s.net, i, 0);
    ASSERT_TRUE(r0) << i;
    EXPECT_NEAR(r0->tx_gbps, 16.0, 1e-9) << i;
  }
  for (size_t i : {1, 2, 6, 9, 10}) {
    auto r1 = RateAt(s, s.net, i, 1);
    ASSERT_TRUE(r1) << i;
    EXPECT_NEAR(r1->tx_gbps, 8.0, 1e-9) << i;
  }
  // Windows read the same: host 1 over ticks 5..10 at 8 Gbit/s.
  std::vector<FaultRecord> faults = {Fault("f", start + 95 * kMs, start + 150 * kMs)};
  RailWindowOptions wo{start, start + 200 * kMs, 0};
  auto w = RailWindows(s, faults, wo);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NEAR(*w[0].rails[1].during.tx_gbps, 8.0, 1e-9);
  EXPECT_NEAR(*w[0].rails[0].after.tx_gbps, 16.0, 1e-9);
  EXPECT_FALSE(RateAt(s, s.net, 4, 1));  // host 1 has no sample at tick 3 or 4
  EXPECT_FALSE(RateAt(s, s.net, 5, 1));
  EXPECT_TRUE(RateAt(s, s.net, 4, 0));
  // A host whose samples were lost keeps its columns, all empty.
  RailSeries lost;
  lost.ports.push_back({1, 0, std::nullopt, false});
  MergedRails m2 = MergeRailSeries({h0, lost}, start, period);
  ASSERT_EQ(m2.series.samples(), 11u);
  for (size_t i = 0; i < 11; ++i) EXPECT_FALSE(m2.series.Net(i, 1).valid);
}

// A sampler the scheduler woke 12 ms late for tick 3 of a 20 ms grid: by time alone that sample
// is nearest tick 4, where the next one (on time) also lies. With the ticks the sampler names,
// both are matched, each to its own tick, and the lateness shows in the hosts' spread.
TEST(RailsTest, ALateSampleKeepsTheTickItWasTakenFor) {
  const int64_t start = 1 * kS, period = 20 * kMs;
  auto part = [&](int host, bool with_ticks) {
    RailSeries s;
    s.ports.push_back({host, 0, std::nullopt, false});
    for (int k = 0; k < 8; ++k) {
      const int64_t t = start + k * period + (host == 0 && k == 3 ? 12 * kMs : 100'000);
      const auto b = static_cast<uint64_t>(t - start);
      s.t_ns.push_back(t);
      if (with_ticks) s.tick.push_back(k);
      s.net.push_back({b, b, true});
    }
    return s;
  };
  MergedRails m = MergeRailSeries({part(0, true), part(1, true)}, start, period);
  EXPECT_EQ(m.unmatched, 0u);
  ASSERT_EQ(m.series.samples(), 8u);
  EXPECT_EQ(m.series.tick, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m.max_spread_ns, 12 * kMs - 100'000);
  for (size_t i = 1; i < 8; ++i) {
    for (size_t p = 0; p < 2; ++p) {
      auto r = RateAt(m.series, m.series.net, i, p);
      ASSERT_TRUE(r) << i << " " << p;
      EXPECT_NEAR(r->tx_gbps, 8.0, 1e-9) << i << " " << p;
    }
  }
  // Without the sampler's ticks the late sample collides with the next one.
  EXPECT_EQ(MergeRailSeries({part(0, false), part(1, true)}, start, period).unmatched, 1u);
  // A tick its sample lies more than half a period before is not believed: the nearest tick
  // decides (samples 3 and 4 both by time at tick 4).
  RailSeries lying = part(0, true);
  for (size_t i = 3; i < 8; ++i) lying.tick[i] += 2;
  MergedRails l = MergeRailSeries({lying, part(1, true)}, start, period);
  EXPECT_EQ(l.unmatched, 1u);
}

}  // namespace
}  // namespace faultline::runner
