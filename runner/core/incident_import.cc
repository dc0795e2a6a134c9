#include "runner/core/incident_import.h"

#include <algorithm>
#include <cctype>
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

Result<ImportResult> ImportLinkEvents(const std::vector<LinkEvent>& events,
                                      const ImportOptions& o) {
  if (o.map.empty()) return InvalidArgument("no --map given: name the rail of each device");
  ImportResult res;
  // Resolve each event's device to a mapping key.
  struct Mapped {
    const LinkEvent* ev;
    std::string key;
  };
  std::vector<Mapped> mapped;
  std::set<std::string> unmapped;
  for (const auto& e : events) {
    std::string key;
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
      continue;
    }
    mapped.push_back({&e, key});
  }
  res.unmapped.assign(unmapped.begin(), unmapped.end());
  if (mapped.empty()) {
    std::string seen;
    for (const auto& u : res.unmapped) seen += (seen.empty() ? "" : ", ") + u;
    return InvalidArgument("no link event of a mapped device" +
                           (seen.empty() ? std::string(" (no link event found at all)")
                                         : " (devices with events: " + seen + ")"));
  }
  // One clock for all: the kernel's when every event has it and they share a boot (one file,
  // one host); else the wall clock.
  std::set<std::string> files, nodes;
  bool all_kernel = true, all_wall = true;
  for (const auto& m : mapped) {
    files.insert(m.ev->file);
    nodes.insert(m.ev->node);
    all_kernel = all_kernel && m.ev->kernel_s.has_value();
    all_wall = all_wall && m.ev->wall_ns.has_value();
  }
  const bool use_kernel = all_kernel && files.size() == 1 && nodes.size() == 1;
  if (!use_kernel && !all_wall) {
    for (const auto& m : mapped) {
      if (!m.ev->wall_ns) {
        return InvalidArgument(m.ev->file + ":" + std::to_string(m.ev->line) +
                               ": this event has no wall-clock time, and the events do not share "
                               "a kernel clock (several files or hosts, or some without one)");
      }
    }
  }
  auto time_of = [&](const LinkEvent& e) -> int64_t {
    return use_kernel ? static_cast<int64_t>(*e.kernel_s * 1e9 + 0.5) : *e.wall_ns;
  };
  std::stable_sort(mapped.begin(), mapped.end(), [&](const Mapped& a, const Mapped& b) {
    return time_of(*a.ev) < time_of(*b.ev);
  });
  const int64_t first = time_of(*mapped.front().ev);
  const int64_t last = time_of(*mapped.back().ev);

  struct Fault {
    std::string id;
    std::string key;
    RailRef rail;
    int64_t at_ns;
    std::optional<int64_t> for_ns;
    const LinkEvent* down;
    const LinkEvent* up = nullptr;
  };
  std::vector<Fault> faults;
  std::map<std::string, size_t> open;  // link -> index of its open fault
  std::map<std::string, int> count;
  // One state per rail: an interface and its PCI address (or a bond's view of it) that map to
  // the same rail are one link.
  for (const auto& m : mapped) {
    const int64_t t = time_of(*m.ev) - first + o.at_ns;
    const RailRef& rail = o.map.at(m.key);
    const std::string link = std::to_string(rail.host) + "/" + std::to_string(rail.rail) + "/" +
                             LinkSideString(rail.side);
    auto it = open.find(link);
    if (!m.ev->up) {
      if (it != open.end()) continue;  // still down
      faults.push_back({FaultId(m.key, ++count[m.key]), m.key, rail, t, std::nullopt, m.ev});
      open[link] = faults.size() - 1;
    } else if (it != open.end()) {
      Fault& f = faults[it->second];
      // Whole milliseconds, the start and the end rounded alike, so that a later outage of
      // the same device never starts before this one ends.
      f.for_ns = std::max<int64_t>(1'000'000, RoundMs(t) - RoundMs(f.at_ns));
      f.up = m.ev;
      open.erase(it);
    }
  }
  if (faults.empty()) {
    return InvalidArgument("the mapped devices have link events, but none goes down");
  }
  int max_host = 0, max_rail = 0;
  for (const auto& [k, r] : o.map) {
    max_host = std::max(max_host, r.host);
    max_rail = std::max(max_rail, r.rail);
  }
  const int hosts = o.hosts.value_or(std::max(2, max_host + 1));
  const int rails = o.rails.value_or(std::max(2, max_rail + 1));
  int64_t end = last - first + o.at_ns + o.tail_ns;
  int64_t duration_s = (end + 999'999'999) / 1'000'000'000;
  for (const auto& f : faults) {
    if (f.for_ns) {
      // Rounding of the printed times must not push a fault past the end.
      end = std::max(end, RoundMs(f.at_ns) + *f.for_ns + o.tail_ns);
    }
  }
  duration_s = std::max<int64_t>(duration_s, (end + 999'999'999) / 1'000'000'000);

  std::ostringstream y;
  y << "# Imported by faultline import from ";
  for (auto it = files.begin(); it != files.end(); ++it) y << (it == files.begin() ? "" : ", ") << *it;
  y << ".\n# " << faults.size() << " link outage(s) on " << (use_kernel ? "the kernel" : "the wall")
    << " clock, the first at " << FormatMs(o.at_ns) << "; device mapping:\n";
  for (const auto& [k, r] : o.map) {
    y << "#   " << k << " -> host " << r.host << " rail " << r.rail << " (" << LinkSideString(r.side)
      << " side)\n";
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
  }
  y << "name: " << o.name << "\n";
  y << "seed: 1\n";
  y << "topology: {hosts: " << hosts << ", ranks_per_host: " << o.ranks_per_host
    << ", rails: " << rails << ", rail_gbps: 1}\n";
  y << "ccl: ftccl\n";
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
  res.yaml = y.str();

  ParseOutcome check = ParseScenario(res.yaml, o.name + ".yaml");
  if (!check.ok()) {
    std::string why;
    for (const auto& d : check.diagnostics) why += "\n  " + d.ToString();
    return InvalidArgument("the imported scenario does not validate (check --map, --hosts, "
                           "--rails):" + why);
  }
  for (const auto& f : faults) {
    res.used.push_back(*f.down);
    if (f.up) res.used.push_back(*f.up);
    if (!f.for_ns) ++res.permanent;
  }
  res.faults = static_cast<int>(faults.size());
  return res;
}

}  // namespace faultline::runner
