#include "runner/core/incident_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <regex>
#include <set>
#include <sstream>

namespace faultline::runner {
namespace {

int64_t RoundMs(int64_t ns) { return (ns + 500'000) / 1'000'000 * 1'000'000; }

std::string FormatMs(int64_t ns) {
  int64_t ms = (ns + 500'000) / 1'000'000;
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string FaultId(const std::string& dev, int n) {
  std::string id;
  for (char c : dev) id += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  return id + "-down" + std::to_string(n);
}

// "+-0.5 ms", "+-1.2 s".
std::string FormatPrecision(int64_t ns) {
  char buf[48];
  if (ns >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "+-%.2f s", static_cast<double>(ns) / 1e9);
  } else if (ns >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "+-%.1f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "+-%.0f us", std::max(1.0, static_cast<double>(ns) / 1e3));
  }
  return buf;
}

std::string FormatSeconds(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%+.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// ns since the epoch -> "2026-11-28T03:14:07.123Z".
std::string FormatWall(int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>((ns % 1'000'000'000) / 1'000'000));
  return buf;
}

int64_t KernelNs(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }

}  // namespace

Result<std::pair<std::string, RailRef>> ParseRailMapping(std::string_view flag) {
  const std::string s(flag);
  std::smatch m;
  if (!std::regex_match(s, m, std::regex(R"((.+)=host(\d{1,6})/rail(\d{1,6})(?:/(host|switch))?)"))) {
    return InvalidArgument("--map '" + s +
                           "': expected DEVICE=hostH/railR[/switch], e.g. eth2=host0/rail1");
  }
  RailRef r;
  r.host = std::stoi(m[2]);
  r.rail = std::stoi(m[3]);
  r.side = m[4] == "switch" ? LinkSide::kSwitch : LinkSide::kHost;
  return std::make_pair(std::string(m[1]), r);
}

Result<std::pair<std::string, RailRef>> ParseSwitchMapping(std::string_view flag) {
  const std::string s(flag);
  std::smatch m;
  if (!std::regex_match(s, m, std::regex(R"(([^:=]+):([^=]+)=host(\d{1,6})/rail(\d{1,6}))"))) {
    return InvalidArgument("--map-switch '" + s +
                           "': expected SWITCH:PORT=hostH/railR, e.g. leaf1:Ethernet1/1=host0/rail1");
  }
  RailRef r;
  r.host = std::stoi(m[3]);
  r.rail = std::stoi(m[4]);
  r.side = LinkSide::kSwitch;
  return std::make_pair(std::string(m[1]) + ":" + std::string(m[2]), r);
}

Result<std::pair<std::string, RankRef>> ParseRankMapping(std::string_view flag) {
  const std::string s(flag);
  std::smatch m;
  if (!std::regex_match(s, m, std::regex(R"(([^:=]+):(\d{1,6})=host(\d{1,6})/rank(\d{1,6}))"))) {
    return InvalidArgument("--map-rank '" + s +
                           "': expected NODE:LOCAL=hostH/rankL, e.g. gpu-node-17:3=host1/rank1");
  }
  RankRef r;
  r.host = std::stoi(m[3]);
  r.rank = std::stoi(m[4]);
  return std::make_pair(std::string(m[1]) + ":" + std::to_string(std::stoi(m[2])), r);
}

namespace {

std::string DomainOf(const std::string& node, const std::string& file) {
  return node.empty() ? "file:" + file : node;
}

// The wall - kernel offset of one domain from its clock samples (see the header).
void EstimateOffset(const std::vector<const ClockSample*>& samples, ClockDomain* d) {
  d->samples = static_cast<int>(samples.size());
  if (samples.empty()) return;
  int64_t lo = INT64_MIN, hi = INT64_MAX, max_res = 0;
  std::vector<int64_t> mids;
  for (const ClockSample* c : samples) {
    const int64_t res = std::max<int64_t>(c->wall_res_ns, 1000);
    const int64_t base = c->wall_ns - KernelNs(c->kernel_s);
    lo = std::max(lo, base);
    hi = std::min(hi, base + res);
    max_res = std::max(max_res, res);
    mids.push_back(base + res / 2);
  }
  if (lo <= hi) {
    d->offset_ns = lo + (hi - lo) / 2;
    d->precision_ns = std::max<int64_t>((hi - lo) / 2, 500);
    return;
  }
  d->consistent = false;
  std::sort(mids.begin(), mids.end());
  d->offset_ns = mids[mids.size() / 2];
  d->precision_ns = (mids.back() - mids.front()) / 2 + max_res / 2;
}

}  // namespace

Result<ImportResult> ImportLinkEvents(const std::vector<LinkEvent>& events,
                                      const ImportOptions& o) {
  ParsedLog log;
  log.links = events;
  return ImportIncident({log}, o);
}

Result<ImportResult> ImportIncident(const std::vector<ParsedLog>& logs, const ImportOptions& o) {
  if (o.map.empty() && o.switch_map.empty()) {
    return InvalidArgument("no --map or --map-switch given: name the rail of each device");
  }
  ImportResult res;
  // Resolve each event's device to a mapping key.
  struct Mapped {
    const LinkEvent* ev;
    std::string key;
    RailRef rail;
    std::string domain;
    int64_t t = 0;  // on the common timeline
  };
  std::vector<Mapped> mapped;
  std::set<std::string> unmapped;
  for (const ParsedLog& log : logs) {
    for (const auto& w : log.warnings) res.warnings.push_back(w);
    for (const auto& e : log.links) {
      if (e.names.empty()) continue;
      std::string key;
      RailRef rail;
      if (e.source == LinkSource::kSwitch) {
        for (const auto& n : e.names) {
          auto it = o.switch_map.find(e.node + ":" + n);
          if (it != o.switch_map.end()) {
            key = it->first;
            rail = it->second;
            break;
          }
        }
        if (key.empty()) unmapped.insert("switch " + e.node + ":" + e.names.front());
      } else {
        for (const auto& n : e.names) {
          if (!e.node.empty() && o.map.count(e.node + ":" + n)) {
            key = e.node + ":" + n;
            break;
          }
          if (o.map.count(n)) {
            key = n;
            break;
          }
        }
        if (key.empty()) {
          unmapped.insert((e.node.empty() ? "" : e.node + ":") + e.names.front());
        } else {
          rail = o.map.at(key);
        }
      }
      if (key.empty()) continue;
      mapped.push_back({&e, key, rail, DomainOf(e.node, e.file)});
    }
  }
  if (mapped.empty()) {
    res.unmapped.assign(unmapped.begin(), unmapped.end());
    std::string seen;
    for (const auto& u : res.unmapped) seen += (seen.empty() ? "" : ", ") + u;
    return InvalidArgument("no link event of a mapped device" +
                           (seen.empty() ? std::string(" (no link event found at all)")
                                         : " (devices with events: " + seen + ")"));
  }

  // Symptoms of mapped processes.
  int max_host = 0, max_rail = 0, max_local = o.ranks_per_host - 1;
  for (const auto& [k, r] : o.map) {
    max_host = std::max(max_host, r.host);
    max_rail = std::max(max_rail, r.rail);
  }
  for (const auto& [k, r] : o.switch_map) {
    max_host = std::max(max_host, r.host);
    max_rail = std::max(max_rail, r.rail);
  }
  for (const auto& [k, r] : o.rank_map) {
    max_host = std::max(max_host, r.host);
    max_local = std::max(max_local, r.rank);
  }
  const int hosts = o.hosts.value_or(std::max(2, max_host + 1));
  const int rails = o.rails.value_or(std::max(2, max_rail + 1));
  const int ranks_per_host = max_local + 1;
  if (o.hosts && max_host >= *o.hosts) {
    return InvalidArgument("a mapping names host " + std::to_string(max_host) + ", but --hosts is " +
                           std::to_string(*o.hosts));
  }
  if (ranks_per_host > o.ranks_per_host && o.ranks_per_host > 1) {
    return InvalidArgument("a --map-rank names rank " + std::to_string(max_local) +
                           " of a host, but --ranks-per-host is " +
                           std::to_string(o.ranks_per_host));
  }
  struct MappedSymptom {
    const Symptom* s;
    int rank;  // global replay rank
    std::string key;
    std::string domain;
    std::optional<int64_t> t;
  };
  std::vector<MappedSymptom> symptoms;
  for (const ParsedLog& log : logs) {
    for (const auto& s : log.symptoms) {
      if (s.node.empty() || !s.local_rank) {
        unmapped.insert("symptom " + s.file + ":" + std::to_string(s.line) +
                        " (no host and local rank on the line)");
        continue;
      }
      const std::string key = s.node + ":" + std::to_string(*s.local_rank);
      auto it = o.rank_map.find(key);
      if (it == o.rank_map.end()) {
        unmapped.insert("process " + key);
        continue;
      }
      symptoms.push_back({&s, it->second.host * ranks_per_host + it->second.rank, key,
                          DomainOf(s.node, s.file), std::nullopt});
    }
  }
  res.unmapped.assign(unmapped.begin(), unmapped.end());

  // Clock domains (see the header).
  std::map<std::string, ClockDomain> domains;
  for (const auto& m : mapped) {
    ClockDomain& d = domains[m.domain];
    d.name = m.domain;
  }
  for (const auto& s : symptoms) domains[s.domain].name = s.domain;
  for (auto& [name, d] : domains) {
    bool all_kernel = true, any = false;
    for (const auto& m : mapped) {
      if (m.domain != name) continue;
      any = true;
      all_kernel = all_kernel && m.ev->kernel_s.has_value() &&
                   m.ev->source != LinkSource::kSwitch;
    }
    d.kernel = any && all_kernel;
    std::vector<const ClockSample*> samples;
    for (const ParsedLog& log : logs) {
      for (const auto& c : log.clocks) {
        if (DomainOf(c.node, c.file) == name) samples.push_back(&c);
      }
    }
    const std::string& dname = name;  // a lambda cannot capture a structured binding
    if (d.kernel || std::any_of(symptoms.begin(), symptoms.end(), [&](const MappedSymptom& s) {
          return s.domain == dname && s.s->kernel_s;
        })) {
      EstimateOffset(samples, &d);
    }
  }
  // Kernel domains that cannot be aligned: on their own kernel clock when they are the only
  // domain, else on their wall stamps where every event has one.
  int timed_domains = 0;
  for (const auto& kv : domains) {
    if (std::any_of(mapped.begin(), mapped.end(),
                    [&](const Mapped& m) { return m.domain == kv.first; })) {
      ++timed_domains;
    }
  }
  bool kernel_only = false;
  for (auto& [name, d] : domains) {
    if (!d.kernel || d.offset_ns) continue;
    if (timed_domains == 1) {
      kernel_only = true;
      d.offset_ns = 0;
      d.precision_ns = 0;
      continue;
    }
    d.kernel = false;  // fall back to the wall clock, checked below
  }
  for (auto& m : mapped) {
    const ClockDomain& d = domains.at(m.domain);
    if (d.kernel) {
      m.t = KernelNs(*m.ev->kernel_s) + *d.offset_ns;
    } else if (m.ev->wall_ns) {
      m.t = *m.ev->wall_ns + m.ev->wall_res_ns / 2;
    } else {
      std::string why = m.ev->file + ":" + std::to_string(m.ev->line) +
                        ": this event has no wall-clock time";
      if (m.ev->kernel_s) {
        why += ", and its host's kernel clock cannot be aligned with the other hosts' (no line "
               "of " + d.name + " carries both a kernel and a wall-clock time)";
      } else {
        why += " and no kernel time: it cannot be placed in time";
      }
      return InvalidArgument(why);
    }
  }
  for (auto& [name, d] : domains) {
    if (d.kernel) continue;
    int64_t res = 0;
    for (const auto& m : mapped) {
      if (m.domain == name) res = std::max(res, m.ev->wall_res_ns);
    }
    for (const auto& s : symptoms) {
      if (s.domain == name && s.s->wall_ns) res = std::max(res, s.s->wall_res_ns);
    }
    d.precision_ns = std::max<int64_t>(res / 2, 500);
  }
  for (auto& s : symptoms) {
    const ClockDomain& d = domains.at(s.domain);
    if (s.s->kernel_s && d.offset_ns && (d.kernel || !kernel_only)) {
      s.t = KernelNs(*s.s->kernel_s) + *d.offset_ns;
    } else if (s.s->wall_ns && !kernel_only) {
      s.t = *s.s->wall_ns + s.s->wall_res_ns / 2;
    }
  }
  for (const auto& [name, d] : domains) res.clocks.push_back(d);

  std::stable_sort(mapped.begin(), mapped.end(),
                   [](const Mapped& a, const Mapped& b) { return a.t < b.t; });
  const int64_t first = mapped.front().t;
  const int64_t last = mapped.back().t;

  struct Fault {
    std::string id;
    std::string key;
    RailRef rail;
    int64_t at_ns;
    std::optional<int64_t> for_ns;
    const LinkEvent* down;
    const LinkEvent* up = nullptr;
    std::string domain;
    std::vector<const LinkEvent*> also;  // the switch's view of the same outage
    bool dropped = false;
  };
  std::vector<Fault> faults;
  std::map<std::string, size_t> open;  // link -> index of its open fault
  std::map<std::string, int> count;
  // One state per rail side: an interface and its PCI address (or a bond's or the RDMA
  // port's view of it) that map to the same rail are one link.
  for (const auto& m : mapped) {
    const int64_t t = m.t - first + o.at_ns;
    const std::string link = std::to_string(m.rail.host) + "/" + std::to_string(m.rail.rail) +
                             "/" + LinkSideString(m.rail.side);
    auto it = open.find(link);
    if (!m.ev->up) {
      if (it != open.end()) continue;  // still down
      faults.push_back(
          {FaultId(m.key, ++count[m.key]), m.key, m.rail, t, std::nullopt, m.ev, nullptr, m.domain, {}, false});
      open[link] = faults.size() - 1;
    } else if (it != open.end()) {
      Fault& f = faults[it->second];
      // The length on the down's own clock where the up shares it (exact within a host);
      // whole milliseconds, the start and the end rounded alike, so that a later outage of
      // the same device never starts before this one ends.
      const int64_t end_t = t;
      f.for_ns = std::max<int64_t>(1'000'000, RoundMs(end_t) - RoundMs(f.at_ns));
      f.up = m.ev;
      open.erase(it);
    }
  }
  if (faults.empty()) {
    return InvalidArgument("the mapped devices have link events, but none goes down");
  }
  // A switch port's outage overlapping the host side's outage of the same rail: one cable
  // seen from both ends. The host's fault stays (timed by its kernel clock).
  int64_t run_end = last - first + o.at_ns + o.tail_ns;
  auto end_of = [&](const Fault& f) { return f.for_ns ? f.at_ns + *f.for_ns : run_end; };
  for (auto& sw : faults) {
    if (sw.down->source != LinkSource::kSwitch) continue;
    for (auto& host : faults) {
      if (host.down->source == LinkSource::kSwitch || host.dropped) continue;
      if (host.rail.host != sw.rail.host || host.rail.rail != sw.rail.rail) continue;
      const int64_t margin = domains.at(sw.domain).precision_ns.value_or(0) +
                             domains.at(host.domain).precision_ns.value_or(0);
      if (sw.at_ns <= end_of(host) + margin && host.at_ns <= end_of(sw) + margin) {
        sw.dropped = true;
        host.also.push_back(sw.down);
        if (sw.up) host.also.push_back(sw.up);
        break;
      }
    }
  }
  faults.erase(std::remove_if(faults.begin(), faults.end(), [](const Fault& f) { return f.dropped; }),
               faults.end());

  // The replay verdict from the mapped symptoms.
  std::optional<Reproduce> reproduce;
  std::optional<int64_t> symptom_delay;
  if (!symptoms.empty()) {
    Reproduce r;
    r.ccl = o.reproduce_ccl;
    std::set<int> ranks;
    bool all_timeouts = true;
    for (const auto& s : symptoms) {
      ranks.insert(s.rank);
      all_timeouts = all_timeouts && s.s->kind == "timeout";
      if (s.t) symptom_delay = std::max(symptom_delay.value_or(INT64_MIN), *s.t - first);
    }
    r.ranks.assign(ranks.begin(), ranks.end());
    r.outcome = o.reproduce_outcome.value_or(all_timeouts ? "hung" : "aborted_clean");
    if (o.within_ns) {
      r.within_ns = *o.within_ns;
    } else if (symptom_delay && *symptom_delay > 0) {
      const int64_t scaled = *symptom_delay * 3 / 2;
      r.within_ns = std::max<int64_t>(30'000'000'000LL,
                                      (scaled + 999'999'999) / 1'000'000'000 * 1'000'000'000);
    }
    reproduce = r;
    std::stable_sort(symptoms.begin(), symptoms.end(),
                     [](const MappedSymptom& a, const MappedSymptom& b) {
                       return a.t.value_or(INT64_MAX) < b.t.value_or(INT64_MAX);
                     });
  }

  int64_t end = run_end;
  for (const auto& f : faults) {
    if (f.for_ns) {
      // Rounding of the printed times must not push a fault past the end.
      end = std::max(end, RoundMs(f.at_ns) + *f.for_ns + o.tail_ns);
    }
  }
  const int64_t duration_s = (end + 999'999'999) / 1'000'000'000;

  std::set<std::string> files;
  for (const auto& m : mapped) files.insert(m.ev->file);
  for (const auto& s : symptoms) files.insert(s.s->file);
  std::ostringstream y;
  y << "# Imported by faultline import from ";
  for (auto it = files.begin(); it != files.end(); ++it) y << (it == files.begin() ? "" : ", ") << *it;
  y << ".\n# " << faults.size() << " link outage(s), the first at " << FormatMs(o.at_ns) << ".\n";
  // Clocks.
  y << "# Clocks:\n";
  int64_t worst = 0;
  for (const auto& d : res.clocks) {
    y << "#   " << d.name << ": ";
    if (d.kernel && kernel_only) {
      y << "its kernel clock (no line carries a wall-clock time: the only clock of this import)";
    } else if (d.kernel) {
      y << "its kernel clock, booted at " << FormatWall(*d.offset_ns) << " by the wall clock of "
        << d.samples << " line(s) with both stamps, " << FormatPrecision(*d.precision_ns);
      if (!d.consistent) y << " (the lines disagree: a logging delay, a reboot or a clock step)";
    } else {
      y << "its wall clock, " << FormatPrecision(d.precision_ns.value_or(0))
        << " (the stamps' resolution)";
    }
    y << "\n";
    worst = std::max(worst, d.precision_ns.value_or(0));
  }
  if (res.clocks.size() > 1) {
    y << "# Outage lengths within one kernel-timed host are exact to 1 us; times across "
         "hosts are aligned within "
      << FormatPrecision(2 * worst)
      << ", assuming the hosts' wall clocks agree (NTP/PTP), which the logs cannot show.\n";
  }
  y << "# Device mapping:\n";
  for (const auto& [k, r] : o.map) {
    y << "#   " << k << " -> host " << r.host << " rail " << r.rail << " (" << LinkSideString(r.side)
      << " side)\n";
  }
  for (const auto& [k, r] : o.switch_map) {
    y << "#   switch port " << k << " -> host " << r.host << " rail " << r.rail
      << " (switch side)\n";
  }
  if (!o.rank_map.empty()) {
    y << "# Rank mapping (production process -> replay rank):\n";
    for (const auto& [k, r] : o.rank_map) {
      y << "#   " << k << " -> host " << r.host << " rank " << r.rank << " (global rank "
        << r.host * ranks_per_host + r.rank << ")\n";
    }
  }
  y << "# Source lines:\n";
  for (const auto& f : faults) {
    y << "#   " << f.id << " down: " << f.down->file << ":" << f.down->line << ": " << f.down->text
      << "\n";
    if (f.up) {
      y << "#   " << f.id << " up:   " << f.up->file << ":" << f.up->line << ": " << f.up->text
        << "\n";
    } else {
      y << "#   " << f.id << " never came back up in the log: it holds to the end of the run\n";
    }
    for (const LinkEvent* a : f.also) {
      y << "#   " << f.id << " also seen by the switch: " << a->file << ":" << a->line << ": "
        << a->text << "\n";
    }
  }
  if (reproduce) {
    y << "# Symptoms (what the production job saw; judged by reproduce: on "
      << CclNameString(reproduce->ccl) << "):\n";
    for (const auto& s : symptoms) {
      y << "#   rank " << s.rank << " (" << s.key << ", " << s.s->kind << ") at "
        << (s.t ? FormatSeconds(*s.t - first) + " after the first fault" : std::string("an unknown time"))
        << ": " << s.s->file << ":" << s.s->line << ": " << s.s->text << "\n";
    }
    if (!symptom_delay) {
      y << "# No symptom carries a time that can be put on the faults' timeline: within is the "
           "default.\n";
    }
  }
  y << "name: " << o.name << "\n";
  y << "seed: 1\n";
  y << "topology: {hosts: " << hosts << ", ranks_per_host: " << ranks_per_host
    << ", rails: " << rails << ", rail_gbps: 1}\n";
  if (reproduce && reproduce->ccl != CclName::kFtccl) {
    y << "# ftccl is judged by expect:, " << CclNameString(reproduce->ccl)
      << " by reproduce: (did the replay reproduce the incident).\n";
    y << "matrix: {ccl: [ftccl, " << CclNameString(reproduce->ccl) << "]}\n";
  } else {
    y << "ccl: ftccl\n";
  }
  y << "workload: {op: " << o.op << ", dtype: f32, bytes: " << o.bytes
    << ", duration: " << duration_s << "s, warmup: 1s, check: true}\n";
  y << "faults:\n";
  for (const auto& f : faults) {
    y << "  - {id: " << f.id << ", at: " << FormatMs(f.at_ns) << ", type: link_down, target: {host: "
      << f.rail.host << ", rail: " << f.rail.rail << ", side: " << LinkSideString(f.rail.side)
      << "}";
    if (f.for_ns) y << ", for: " << (*f.for_ns / 1'000'000) << "ms";
    y << "}\n";
  }
  y << "expect:\n  outcome: survive\n  wrong_results: 0\n";
  if (reproduce) {
    y << "reproduce:\n  ccl: " << CclNameString(reproduce->ccl) << "\n  outcome: " << reproduce->outcome
      << "\n  ranks: [";
    for (size_t i = 0; i < reproduce->ranks.size(); ++i) y << (i ? ", " : "") << reproduce->ranks[i];
    y << "]\n  within: " << FormatMs(reproduce->within_ns) << "\n";
  }
  res.yaml = y.str();

  ExpandOutcome check = ExpandScenario(res.yaml, o.name + ".yaml");
  if (!check.ok()) {
    std::string why;
    for (const auto& d : check.diagnostics) why += "\n  " + d.ToString();
    return InvalidArgument("the imported scenario does not validate (check --map, --map-switch, "
                           "--map-rank, --hosts, --rails):" + why);
  }
  for (const auto& f : faults) {
    res.used.push_back(*f.down);
    if (f.up) res.used.push_back(*f.up);
    if (!f.for_ns) ++res.permanent;
  }
  for (const auto& s : symptoms) res.symptoms.push_back(*s.s);
  res.faults = static_cast<int>(faults.size());
  return res;
}

}  // namespace faultline::runner
