#include "runner/core/rails.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace faultline::runner {
namespace {

nlohmann::json OptNumber(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Average tx/rx Gbit/s over the intervals of `s` lying entirely in [from, to].
RailWindowRate Average(const RailSeries& s, size_t p, int64_t from, int64_t to) {
  RailWindowRate out;
  if (to <= from) return out;
  uint64_t tx = 0, rx = 0;
  int64_t dt = 0;
  for (size_t i = 1; i < s.samples(); ++i) {
    if (s.t_ns[i - 1] < from) continue;
    if (s.t_ns[i] > to) break;
    const RailCounters& a = s.Net(i - 1, p);
    const RailCounters& b = s.Net(i, p);
    if (!a.valid || !b.valid || s.t_ns[i] <= s.t_ns[i - 1]) continue;
    auto dtx = CounterDelta(a.tx_bytes, b.tx_bytes, s.counter_bits);
    auto drx = CounterDelta(a.rx_bytes, b.rx_bytes, s.counter_bits);
    if (!dtx || !drx) continue;
    tx += *dtx;
    rx += *drx;
    dt += s.t_ns[i] - s.t_ns[i - 1];
  }
  if (dt <= 0) return out;
  // bits per nanosecond = Gbit/s
  out.tx_gbps = static_cast<double>(tx) * 8.0 / static_cast<double>(dt);
  out.rx_gbps = static_cast<double>(rx) * 8.0 / static_cast<double>(dt);
  return out;
}

}  // namespace

std::string RailPort::Prefix() const {
  // Appended piece by piece (GCC 12 warns falsely on `"h" + std::to_string(n)` at -O3).
  std::string out = "h";
  out.append(std::to_string(host));
  if (rank) out.append("_n").append(std::to_string(*rank));
  out.append("_r").append(std::to_string(rail));
  return out;
}

std::optional<uint64_t> CounterDelta(uint64_t prev, uint64_t cur, int bits) {
  if (cur >= prev) return cur - prev;
  if (bits >= 64 || bits <= 0) return std::nullopt;  // a 64-bit counter does not wrap: reset
  const uint64_t modulus = uint64_t{1} << bits;
  if (prev >= modulus || cur >= modulus) return std::nullopt;
  return cur + (modulus - prev);
}

std::optional<RailRate> RateAt(const RailSeries& s, const std::vector<RailCounters>& counters,
                               size_t i, size_t p) {
  if (i == 0 || i >= s.samples() || counters.empty()) return std::nullopt;
  const RailCounters& a = counters[(i - 1) * s.ports.size() + p];
  const RailCounters& b = counters[i * s.ports.size() + p];
  const int64_t dt = s.t_ns[i] - s.t_ns[i - 1];
  if (!a.valid || !b.valid || dt <= 0) return std::nullopt;
  auto dtx = CounterDelta(a.tx_bytes, b.tx_bytes, s.counter_bits);
  auto drx = CounterDelta(a.rx_bytes, b.rx_bytes, s.counter_bits);
  if (!dtx || !drx) return std::nullopt;
  return RailRate{static_cast<double>(*dtx) * 8.0 / static_cast<double>(dt),
                  static_cast<double>(*drx) * 8.0 / static_cast<double>(dt)};
}

std::string RailsCsv(const RailSeries& s, int64_t t0_ns) {
  std::string out = "t_s";
  for (const RailPort& p : s.ports) {
    const std::string pre = p.Prefix();
    out += "," + pre + "_tx_gbps," + pre + "_rx_gbps";
    if (p.rdma && !s.rdma.empty()) out += "," + pre + "_rdma_tx_gbps," + pre + "_rdma_rx_gbps";
  }
  out += "\n";
  char buf[64];
  auto cell = [&](const std::optional<RailRate>& r, bool tx) {
    out += ",";
    if (!r) return;
    std::snprintf(buf, sizeof(buf), "%.6f", tx ? r->tx_gbps : r->rx_gbps);
    out += buf;
  };
  for (size_t i = 1; i < s.samples(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.6f", static_cast<double>(s.t_ns[i] - t0_ns) / 1e9);
    out += buf;
    for (size_t p = 0; p < s.ports.size(); ++p) {
      auto r = RateAt(s, s.net, i, p);
      cell(r, true);
      cell(r, false);
      if (s.ports[p].rdma && !s.rdma.empty()) {
        auto q = RateAt(s, s.rdma, i, p);
        cell(q, true);
        cell(q, false);
      }
    }
    out += "\n";
  }
  return out;
}

std::optional<double> RailWindowRate::gbps() const {
  if (!tx_gbps || !rx_gbps) return std::nullopt;
  return std::max(*tx_gbps, *rx_gbps);
}

nlohmann::json RailWindow::ToJson() const {
  nlohmann::json j = {{"host", port.host}, {"rail", port.rail}};
  if (port.rank) j["rank"] = *port.rank;
  const std::pair<const char*, const RailWindowRate*> windows[] = {
      {"before", &before}, {"during", &during}, {"after", &after}};
  for (const auto& [name, w] : windows) j[std::string(name) + "_gbps"] = OptNumber(w->gbps());
  for (const auto& [name, w] : windows) {
    j[std::string(name) + "_tx_gbps"] = OptNumber(w->tx_gbps);
    j[std::string(name) + "_rx_gbps"] = OptNumber(w->rx_gbps);
  }
  return j;
}

std::vector<FaultRails> RailWindows(const RailSeries& s, const std::vector<FaultRecord>& faults,
                                    const RailWindowOptions& o) {
  const int64_t from = o.baseline_from_ns;
  const int64_t end = o.window_end_ns;
  int64_t first_applied = std::numeric_limits<int64_t>::max();
  for (const FaultRecord& f : faults) {
    if (f.applied_ns) first_applied = std::min(first_applied, *f.applied_ns);
  }
  const int64_t before_to = std::min(first_applied, end);
  std::vector<FaultRails> out;
  for (const FaultRecord& f : faults) {
    FaultRails fr;
    fr.fault_id = f.id;
    int64_t during_from = 0, during_to = 0, after_from = 0, after_to = 0;
    if (f.applied_ns) {
      during_from = std::max(*f.applied_ns, from);
      during_to = std::min(f.reverted_ns.value_or(end), end);
      if (f.reverted_ns) {
        int64_t next = end;
        for (const FaultRecord& g : faults) {
          if (&g != &f && g.applied_ns && *g.applied_ns > *f.applied_ns) {
            next = std::min(next, *g.applied_ns);
          }
        }
        after_from = *f.reverted_ns + o.after_delay_ns;
        after_to = next;
      }
    }
    for (size_t p = 0; p < s.ports.size(); ++p) {
      RailWindow w;
      w.port = s.ports[p];
      w.before = Average(s, p, from, before_to);
      if (f.applied_ns) w.during = Average(s, p, during_from, during_to);
      if (f.applied_ns && f.reverted_ns) w.after = Average(s, p, after_from, after_to);
      fr.rails.push_back(std::move(w));
    }
    out.push_back(std::move(fr));
  }
  return out;
}

}  // namespace faultline::runner
