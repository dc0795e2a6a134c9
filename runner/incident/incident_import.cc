#include "runner/incident/incident_import.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "runner/incident/import_parts.h"

namespace faultline::runner {

using incident_internal::RoundMs;
using incident_internal::FormatMs;
using incident_internal::FaultId;
using incident_internal::FormatPrecision;
using incident_internal::FormatSeconds;
using incident_internal::FormatWall;
using incident_internal::KernelNs;
using incident_internal::DomainOf;
using incident_internal::EstimateOffset;

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
  auto place = [](const std::string& file, int line) { return file + ":" + std::to_string(line); };
  // Times outside 1970..2200 or kernel clocks over 31 years cannot be placed (and would
  // overflow the arithmetic below): such an item is skipped with a warning.
  constexpr int64_t kMaxWallNs = 7'258'118'400LL * 1'000'000'000;  // 2200-01-01
  auto sane = [&](const std::optional<double>& k, const std::optional<int64_t>& w) {
    return (!k || (*k >= 0 && *k < 1e9)) && (!w || (*w >= 0 && *w < kMaxWallNs));
  };

  // Boots: a host's kernel clock restarts at a reboot. Within one file, a kernel stamp more
  // than a second below the previous one of the same host starts a new clock domain.
  std::map<std::tuple<std::string, std::string, int>, int> boot_of;  // (file, host, line)
  for (const ParsedLog& log : logs) {
    std::vector<std::tuple<int, std::string, std::string, double>> stamped;  // line, host, file
    for (const auto& e : log.links) {
      if (e.kernel_s) stamped.emplace_back(e.line, DomainOf(e.node, e.file), e.file, *e.kernel_s);
    }
    for (const auto& c : log.clocks) stamped.emplace_back(c.line, DomainOf(c.node, c.file), c.file, c.kernel_s);
    for (const auto& s : log.symptoms) {
      if (s.kernel_s) stamped.emplace_back(s.line, DomainOf(s.node, s.file), s.file, *s.kernel_s);
    }
    std::stable_sort(stamped.begin(), stamped.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    std::map<std::pair<std::string, std::string>, std::pair<double, int>> last;  // -> (k, boot)
    for (const auto& [line, host, file, k] : stamped) {
      auto it = last.find({file, host});
      int boot = 0;
      if (it != last.end()) {
        boot = it->second.second + (k < it->second.first - 1.0 ? 1 : 0);
        if (boot != it->second.second) {
          res.warnings.push_back({file, line, "the kernel clock of " + host +
                                                  " restarts here (a reboot): a new clock "
                                                  "from this line on"});
        }
      }
      last[{file, host}] = {k, boot};
      boot_of[{file, host, line}] = boot;
    }
  }
  auto domain_of = [&](const std::string& node, const std::string& file, int line,
                       bool kernel) -> std::string {
    const std::string base = DomainOf(node, file);
    if (!kernel) return base;
    auto it = boot_of.find({file, base, line});
    if (it == boot_of.end() || it->second == 0) return base;
    return base + " (boot " + std::to_string(it->second + 1) + " of " + file + ")";
  };

  // Resolve each event's device to a mapping key.
  struct Mapped {
    const LinkEvent* ev;
    std::string key;
    RailRef rail;
    std::string domain;  // the domain of its kernel clock, or its host's for wall-only events
    int64_t t = 0;       // on the common timeline
  };
  std::vector<Mapped> mapped;
  std::set<std::string> unmapped;
  std::map<std::string, std::set<std::string>> hosts_of_key;  // unqualified --map key -> hosts
  for (const ParsedLog& log : logs) {
    for (const auto& w : log.warnings) res.warnings.push_back({w.file, w.line, w.reason + " (line skipped)"});
    for (const auto& e : log.links) {
      if (e.names.empty()) continue;
      if (!sane(e.kernel_s, e.wall_ns)) {
        res.warnings.push_back({e.file, e.line, "a time out of range: the event is ignored"});
        continue;
      }
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
            hosts_of_key[n].insert(DomainOf(e.node, e.file));
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
      mapped.push_back({&e, key, rail, domain_of(e.node, e.file, e.line, e.kernel_s.has_value())});
    }
  }
  // An interface name without its host, found on several hosts, would merge their outages
  // onto one rail.
  for (const auto& [key, hosts] : hosts_of_key) {
    if (hosts.size() < 2) continue;
    std::string names;
    for (const auto& h : hosts) names += (names.empty() ? "" : ", ") + h;
    return InvalidArgument("--map " + key + " matches " + key + " on several hosts (" + names +
                           "): name the host, e.g. --map " + *hosts.begin() + ":" + key + "=...");
  }
  if (mapped.empty()) {
    res.unmapped.assign(unmapped.begin(), unmapped.end());
    std::string seen;
    for (const auto& u : res.unmapped) seen += (seen.empty() ? "" : ", ") + u;
    return InvalidArgument("no link event of a mapped device" +
                           (seen.empty() ? std::string(" (no link event found at all)")
                                         : " (devices with events: " + seen + ")"));
  }

  // The topology.
  int max_host = 0, max_rail = 0, max_local = 0;
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
  if (o.hosts && max_host >= *o.hosts) {
    return InvalidArgument("a mapping names host " + std::to_string(max_host) + ", but --hosts is " +
                           std::to_string(*o.hosts));
  }
  if (o.ranks_per_host && *o.ranks_per_host < 1) {
    return InvalidArgument("--ranks-per-host must be at least 1");
  }
  if (o.ranks_per_host && max_local >= *o.ranks_per_host) {
    return InvalidArgument("a --map-rank names rank " + std::to_string(max_local) +
                           " of a host, but --ranks-per-host is " +
                           std::to_string(*o.ranks_per_host));
  }
  const int hosts = o.hosts.value_or(std::max(2, max_host + 1));
  const int rails = o.rails.value_or(std::max(2, max_rail + 1));
  const int ranks_per_host = o.ranks_per_host.value_or(max_local + 1);
  if (static_cast<int64_t>(hosts) * ranks_per_host > 1'000'000) {
    return InvalidArgument("the mappings ask for " + std::to_string(hosts) + " hosts of " +
                           std::to_string(ranks_per_host) + " ranks: too many for a replay");
  }

  // Symptoms of mapped processes: NODE:LOCAL, or rankG where the line names only the rank.
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
      if (!sane(s.kernel_s, s.wall_ns)) {
        res.warnings.push_back({s.file, s.line, "a time out of range: the symptom is ignored"});
        continue;
      }
      std::vector<std::string> keys;
      if (!s.node.empty() && s.local_rank) keys.push_back(s.node + ":" + std::to_string(*s.local_rank));
      if (s.global_rank) keys.push_back("rank" + std::to_string(*s.global_rank));
      if (keys.empty()) {
        unmapped.insert("symptom " + place(s.file, s.line) + " (no process named on the line)");
        continue;
      }
      const RankRef* ref = nullptr;
      std::string key;
      for (const auto& k : keys) {
        auto it = o.rank_map.find(k);
        if (it != o.rank_map.end()) {
          ref = &it->second;
          key = k;
          break;
        }
      }
      if (ref == nullptr) {
        unmapped.insert("process " + keys.front());
        continue;
      }
      symptoms.push_back({&s, ref->host * ranks_per_host + ref->rank, key,
                          domain_of(s.node, s.file, s.line, s.kernel_s.has_value()), std::nullopt});
    }
  }
  res.unmapped.assign(unmapped.begin(), unmapped.end());

  // Clock domains (see the header): an offset for every domain with kernel-stamped items.
  std::map<std::string, ClockDomain> domains;
  std::set<std::string> kernel_domains;  // those with kernel-stamped events or symptoms
  for (const auto& m : mapped) {
    domains[m.domain].name = m.domain;
    if (m.ev->kernel_s) kernel_domains.insert(m.domain);
  }
  for (const auto& s : symptoms) {
    domains[s.domain].name = s.domain;
    if (s.s->kernel_s) kernel_domains.insert(s.domain);
  }
  std::map<std::string, std::vector<const ClockSample*>> samples_of;
  for (const ParsedLog& log : logs) {
    for (const auto& c : log.clocks) {
      if (sane(c.kernel_s, c.wall_ns)) samples_of[domain_of(c.node, c.file, c.line, true)].push_back(&c);
    }
  }
  for (auto& [name, d] : domains) {
    if (!kernel_domains.count(name)) continue;
    EstimateOffset(samples_of[name], &d);
    d.kernel = true;
    if (!d.consistent) {
      res.warnings.push_back({name, 0, "the lines with both a kernel and a wall-clock time "
                                       "disagree (a logging delay, a reboot, a clock step or "
                                       "two machines of one name): this host's times are "
                                       "uncertain by " + FormatPrecision(*d.precision_ns)});
    }
  }
  // One kernel-timed host without wall stamps and nothing else: its kernel clock is the
  // timeline (plain dmesg).
  bool kernel_only = false;
  {
    std::set<std::string> event_domains;
    for (const auto& m : mapped) event_domains.insert(m.domain);
    if (event_domains.size() == 1) {
      ClockDomain& d = domains.at(*event_domains.begin());
      const bool all_kernel = std::all_of(mapped.begin(), mapped.end(),
                                          [](const Mapped& m) { return m.ev->kernel_s.has_value(); });
      if (d.kernel && !d.offset_ns && all_kernel) {
        kernel_only = true;
        d.offset_ns = 0;
        d.precision_ns = 0;
      }
    }
  }
  // Each event on its own: its kernel time plus its host's offset where both exist, else its
  // wall time (the middle of its stamp's resolution).
  std::map<std::string, int64_t> wall_res;  // per domain, of the wall stamps used
  for (auto& m : mapped) {
    const ClockDomain& d = domains.at(m.domain);
    if (m.ev->kernel_s && d.offset_ns) {
      m.t = KernelNs(*m.ev->kernel_s) + *d.offset_ns;
    } else if (m.ev->wall_ns) {
      m.t = *m.ev->wall_ns + m.ev->wall_res_ns / 2;
      wall_res[m.domain] = std::max(wall_res[m.domain], m.ev->wall_res_ns);
    } else {
      std::string why = place(m.ev->file, m.ev->line) + ": this event has no wall-clock time";
      if (m.ev->kernel_s) {
        why += ", and its kernel clock cannot be put on the common timeline: no line of " +
               d.name + " carries both a kernel and a wall-clock time";
      } else {
        why += " and no kernel time: it cannot be placed in time";
      }
      return InvalidArgument(why);
    }
  }
  for (auto& s : symptoms) {
    const ClockDomain& d = domains.at(s.domain);
    if (s.s->kernel_s && d.offset_ns && !kernel_only) {
      s.t = KernelNs(*s.s->kernel_s) + *d.offset_ns;
    } else if (s.s->kernel_s && kernel_only && d.offset_ns) {
      s.t = KernelNs(*s.s->kernel_s);
    } else if (s.s->wall_ns && !kernel_only) {
      s.t = *s.s->wall_ns + s.s->wall_res_ns / 2;
      wall_res[s.domain] = std::max(wall_res[s.domain], s.s->wall_res_ns);
    }
  }
  for (auto& [name, d] : domains) {
    auto it = wall_res.find(name);
    if (it == wall_res.end()) continue;
    // Wall stamps used beside (or instead of) the kernel clock.
    d.precision_ns = std::max(d.precision_ns.value_or(0), std::max<int64_t>(it->second / 2, 500));
    if (!d.offset_ns) d.kernel = false;
  }
  for (const auto& [name, d] : domains) res.clocks.push_back(d);

  std::stable_sort(mapped.begin(), mapped.end(),
                   [](const Mapped& a, const Mapped& b) { return a.t < b.t; });
  // The timeline starts at the first down (an up before it is ignored below).
  auto first_down = std::find_if(mapped.begin(), mapped.end(), [](const Mapped& m) { return !m.ev->up; });
  if (first_down == mapped.end()) {
    return InvalidArgument("the mapped devices have link events, but none goes down");
  }
  const int64_t first = first_down->t;
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
    std::vector<const LinkEvent*> also;  // the other views of the same outage
    bool dropped = false;
  };
  std::vector<Fault> faults;
  // One state per rail side: an interface, its PCI address, its RDMA port or a bond's view of
  // it that map to the same rail side are one link, down while any of them is down.
  struct LinkState {
    size_t fault = 0;
    std::set<std::string> down;  // the mapping keys down now
  };
  std::map<std::string, LinkState> open;  // link -> its open outage
  std::map<std::string, int> count;
  for (const auto& m : mapped) {
    const int64_t t = m.t - first + o.at_ns;
    const std::string link = std::to_string(m.rail.host) + "/" + std::to_string(m.rail.rail) +
                             "/" + LinkSideString(m.rail.side);
    auto it = open.find(link);
    if (!m.ev->up) {
      if (it != open.end()) {
        if (!it->second.down.insert(m.key).second) {
          res.warnings.push_back({m.ev->file, m.ev->line, m.key + " down again while down: ignored"});
        } else {
          faults[it->second.fault].also.push_back(m.ev);
        }
        continue;
      }
      faults.push_back({FaultId(m.key, ++count[m.key]), m.key, m.rail, t, std::nullopt, m.ev,
                        nullptr, m.domain, {}, false});
      open[link] = {faults.size() - 1, {m.key}};
    } else if (it != open.end()) {
      LinkState& st = it->second;
      Fault& f = faults[st.fault];
      if (st.down.erase(m.key) == 0 || !st.down.empty()) {
        // Another view of the link came back, or this one was never down: the outage holds
        // until every view that went down is up again.
        f.also.push_back(m.ev);
        continue;
      }
      // Whole milliseconds, the start and the end rounded alike, so that a later outage of
      // the same device never starts before this one ends.
      f.for_ns = std::max<int64_t>(1'000'000, RoundMs(t) - RoundMs(f.at_ns));
      f.up = m.ev;
      open.erase(it);
    } else {
      res.warnings.push_back({m.ev->file, m.ev->line,
                              m.key + " up without an outage open (the log starts mid-outage, "
                                      "or the clocks put it before its down): ignored"});
    }
  }
  // A switch port's outage overlapping the host side's outage of the same rail: one cable
  // seen from both ends. The host's fault stays (timed by its kernel clock).
  const int64_t run_end = last - first + o.at_ns + o.tail_ns;
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
        for (const LinkEvent* a : sw.also) host.also.push_back(a);
        break;
      }
    }
  }
  faults.erase(std::remove_if(faults.begin(), faults.end(), [](const Fault& f) { return f.dropped; }),
               faults.end());

  // The replay verdict from the mapped symptoms, timed from the first fault.
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
      const int64_t scaled = *symptom_delay / 2 * 3;
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
        << d.samples << " line(s) with both stamps, at best " << FormatPrecision(*d.precision_ns);
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
      << " at best: a logging daemon's delay in stamping a line, and any disagreement of the "
         "hosts' wall clocks (NTP/PTP), add to it and the logs cannot show them.\n";
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
      y << "#   " << f.id
        << (a->source == LinkSource::kSwitch ? " also seen by the switch: " : " another view: ")
        << a->file << ":" << a->line << ": " << a->text << "\n";
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
