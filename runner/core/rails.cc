#include "runner/core/rails.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "reports/run_files.h"

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
    const int64_t t0 = s.T(i - 1, p), t1 = s.T(i, p);
    if (t0 < from) continue;
    if (t1 > to) break;
    const RailCounters& a = s.Net(i - 1, p);
    const RailCounters& b = s.Net(i, p);
    if (!a.valid || !b.valid || t1 <= t0) continue;
    auto dtx = CounterDelta(a.tx_bytes, b.tx_bytes, s.counter_bits);
    auto drx = CounterDelta(a.rx_bytes, b.rx_bytes, s.counter_bits);
    if (!dtx || !drx) continue;
    tx += *dtx;
    rx += *drx;
    dt += t1 - t0;
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
  const int64_t dt = s.T(i, p) - s.T(i - 1, p);
  if (!a.valid || !b.valid || dt <= 0) return std::nullopt;
  auto dtx = CounterDelta(a.tx_bytes, b.tx_bytes, s.counter_bits);
  auto drx = CounterDelta(a.rx_bytes, b.rx_bytes, s.counter_bits);
  if (!dtx || !drx) return std::nullopt;
  return RailRate{static_cast<double>(*dtx) * 8.0 / static_cast<double>(dt),
                  static_cast<double>(*drx) * 8.0 / static_cast<double>(dt)};
}

reports::RailsTable RailsTableOf(const RailSeries& s, int64_t t0_ns) {
  reports::RailsTable t;
  for (size_t i = 1; i < s.samples(); ++i) {
    t.t_s.push_back(static_cast<double>(s.t_ns[i] - t0_ns) / 1e9);
  }
  auto column = [&](const RailPort& port, bool rdma, bool tx) {
    reports::RailColumn c;
    c.host = port.host;
    c.rank = port.rank;
    c.rail = port.rail;
    c.rdma = rdma;
    c.tx = tx;
    c.name = reports::RailColumnName(c);
    const std::vector<RailCounters>& counters = rdma ? s.rdma : s.net;
    for (size_t i = 1; i < s.samples(); ++i) {
      const size_t p = static_cast<size_t>(&port - s.ports.data());
      std::optional<RailRate> r = RateAt(s, counters, i, p);
      c.values.push_back(r ? std::optional<double>(tx ? r->tx_gbps : r->rx_gbps) : std::nullopt);
    }
    t.columns.push_back(std::move(c));
  };
  for (const RailPort& port : s.ports) {
    column(port, false, true);
    column(port, false, false);
    if (port.rdma && !s.rdma.empty()) {
      column(port, true, true);
      column(port, true, false);
    }
  }
  return t;
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

namespace {

nlohmann::json CountersJson(const std::vector<RailCounters>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (const RailCounters& c : v) {
    out.push_back(c.valid ? nlohmann::json::array({c.tx_bytes, c.rx_bytes}) : nlohmann::json());
  }
  return out;
}

bool CountersFromJson(const nlohmann::json& j, size_t n, std::vector<RailCounters>* out,
                      std::string* error, const char* what) {
  if (!j.is_array() || j.size() != n) {
    *error = std::string(what) + " must be an array of " + std::to_string(n) + " entries";
    return false;
  }
  out->reserve(n);
  for (const nlohmann::json& c : j) {
    if (c.is_null()) {
      out->push_back(RailCounters{});
      continue;
    }
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_unsigned() ||
        !c[1].is_number_unsigned()) {
      *error = std::string(what) + ": an entry is neither null nor [tx_bytes, rx_bytes]";
      return false;
    }
    out->push_back(RailCounters{c[0].get<uint64_t>(), c[1].get<uint64_t>(), true});
  }
  return true;
}

}  // namespace

nlohmann::json RailSeriesToJson(const RailSeries& s) {
  nlohmann::json ports = nlohmann::json::array();
  for (const RailPort& p : s.ports) {
    nlohmann::json e = {{"host", p.host}, {"rail", p.rail}, {"rdma", p.rdma}};
    if (p.rank) e["rank"] = *p.rank;
    ports.push_back(e);
  }
  nlohmann::json j = {{"ports", ports},
                      {"counter_bits", s.counter_bits},
                      {"t_ns", s.t_ns},
                      {"net", CountersJson(s.net)}};
  if (!s.tick.empty()) j["tick"] = s.tick;
  if (!s.rdma.empty()) j["rdma"] = CountersJson(s.rdma);
  return j;
}

std::optional<RailSeries> RailSeriesFromJson(const nlohmann::json& j, std::string* error) {
  RailSeries s;
  if (!j.is_object() || !j.contains("ports") || !j["ports"].is_array() || !j.contains("t_ns") ||
      !j["t_ns"].is_array()) {
    *error = "not a rail series (an object with ports and t_ns)";
    return std::nullopt;
  }
  for (const nlohmann::json& p : j["ports"]) {
    auto int_at = [&](const char* k) -> std::optional<int> {
      if (!p.is_object() || !p.contains(k) || !p[k].is_number_integer()) return std::nullopt;
      const int64_t v = p[k].get<int64_t>();
      if (v < 0 || v > 1'000'000) return std::nullopt;
      return static_cast<int>(v);
    };
    const auto host = int_at("host"), rail = int_at("rail");
    if (!host || !rail || (p.contains("rank") && !int_at("rank")) ||
        (p.contains("rdma") && !p["rdma"].is_boolean())) {
      *error = "a port is not {host, rail, rank?, rdma?} with small non-negative integers";
      return std::nullopt;
    }
    s.ports.push_back(
        {*host, *rail, p.contains("rank") ? int_at("rank") : std::nullopt, p.value("rdma", false)});
  }
  const nlohmann::json& bits = j.value("counter_bits", nlohmann::json(64));
  if (!bits.is_number_integer() || bits.get<int64_t>() < 1 || bits.get<int64_t>() > 64) {
    *error = "counter_bits must be 1..64";
    return std::nullopt;
  }
  s.counter_bits = bits.get<int>();
  for (const nlohmann::json& t : j["t_ns"]) {
    if (!t.is_number_integer() || (!s.t_ns.empty() && t.get<int64_t>() < s.t_ns.back())) {
      *error = "t_ns must be integers in time order";
      return std::nullopt;
    }
    s.t_ns.push_back(t.get<int64_t>());
  }
  if (j.contains("tick")) {
    if (!j["tick"].is_array() || j["tick"].size() != s.t_ns.size()) {
      *error = "tick must be an array as long as t_ns";
      return std::nullopt;
    }
    for (const nlohmann::json& k : j["tick"]) {
      if (!k.is_number_integer() || (!s.tick.empty() && k.get<int64_t>() <= s.tick.back())) {
        *error = "tick must be increasing integers";
        return std::nullopt;
      }
      s.tick.push_back(k.get<int64_t>());
    }
  }
  const size_t n = s.t_ns.size() * s.ports.size();
  if (!CountersFromJson(j.value("net", nlohmann::json()), n, &s.net, error, "net")) {
    return std::nullopt;
  }
  if (j.contains("rdma") && !CountersFromJson(j["rdma"], n, &s.rdma, error, "rdma")) {
    return std::nullopt;
  }
  return s;
}

MergedRails MergeRailSeries(const std::vector<RailSeries>& parts, int64_t start_ns,
                            int64_t period_ns) {
  MergedRails m;
  RailSeries& out = m.series;
  bool any_rdma = false;
  out.counter_bits = 64;
  for (const RailSeries& p : parts) {
    out.ports.insert(out.ports.end(), p.ports.begin(), p.ports.end());
    any_rdma = any_rdma || !p.rdma.empty();
    out.counter_bits = std::min(out.counter_bits, p.counter_bits);
  }
  // Each part's sample index by tick.
  std::vector<std::map<int64_t, size_t>> at(parts.size());
  std::set<int64_t> ticks;
  for (size_t h = 0; h < parts.size(); ++h) {
    for (size_t i = 0; i < parts[h].samples(); ++i) {
      const int64_t d = parts[h].t_ns[i] - start_ns;
      // The sampler's own tick unless the sample lies more than half a period before it (a
      // sampler wakes late, never early; the slack is for clock-offset error). A stalled
      // sampler goes on at the next tick after its late sample, so no two samples share one.
      // Else the nearest tick, rounding half away from the grid's start.
      int64_t k = (d >= 0 ? d + period_ns / 2 : d - period_ns / 2) / period_ns;
      int64_t off = d - k * period_ns;
      if (parts[h].tick.size() == parts[h].samples()) {
        const int64_t own = parts[h].tick[i];
        const int64_t late = d - own * period_ns;
        if (late >= -period_ns / 2) {
          k = own;
          off = 0;
        }
      }
      if (k < 0 || off > period_ns / 2 || off < -period_ns / 2 || !at[h].emplace(k, i).second) {
        ++m.unmatched;
        continue;
      }
      ticks.insert(k);
    }
  }
  for (int64_t k : ticks) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    long double sum = 0;
    int matched = 0;
    for (size_t h = 0; h < parts.size(); ++h) {
      const RailSeries& p = parts[h];
      auto it = at[h].find(k);
      const size_t np = p.ports.size();
      for (size_t q = 0; q < np; ++q) {
        // A port without a sample here is placed at the tick (its counters are invalid).
        out.port_t_ns.push_back(it == at[h].end() ? start_ns + k * period_ns : p.T(it->second, q));
        out.net.push_back(it == at[h].end() ? RailCounters{} : p.Net(it->second, q));
        if (any_rdma) {
          const RailCounters* r = it == at[h].end() ? nullptr : p.Rdma(it->second, q);
          out.rdma.push_back(r ? *r : RailCounters{});
        }
      }
      if (it == at[h].end()) continue;
      const int64_t t = p.t_ns[it->second];
      lo = std::min(lo, t);
      hi = std::max(hi, t);
      sum += t;
      ++matched;
    }
    // The rows stay in time order: a late sample can bring its row's mean past the next row's
    // when another host has none there.
    const auto mean = static_cast<int64_t>(sum / matched);
    out.t_ns.push_back(out.t_ns.empty() ? mean : std::max(mean, out.t_ns.back()));
    out.tick.push_back(k);
    m.max_spread_ns = std::max(m.max_spread_ns, hi - lo);
  }
  return m;
}

}  // namespace faultline::runner
