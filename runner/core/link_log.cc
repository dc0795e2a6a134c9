#include "runner/core/link_log.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <regex>
#include <set>
#include <sstream>

namespace faultline::runner {
namespace {

const std::regex& Re(const char* pattern, bool icase = false) {
  // One compiled regex per pattern for the life of the program.
  static thread_local std::map<std::string, std::regex> cache;
  const std::string key = std::string(icase ? "i:" : "c:") + pattern;
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto flags = std::regex::ECMAScript | std::regex::optimize;
    if (icase) flags |= std::regex::icase;
    it = cache.emplace(key, std::regex(pattern, flags)).first;
  }
  return it->second;
}

int MonthIndex(const std::string& mon) {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i) {
    if (mon == kMonths[i]) return i;
  }
  return -1;
}

// Seconds of a UTC calendar time; -1 when out of range.
// -1 outside 1970..2200, so that the time in ns fits an int64_t.
int64_t EpochSeconds(int year, int mon0, int day, int h, int m, int s) {
  if (year < 1970 || year > 2200) return -1;
  if (mon0 < 0 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60) return -1;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon0;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  return static_cast<int64_t>(timegm(&tm));
}

// ".123456" -> nanoseconds.
int64_t FractionNs(const std::string& frac) {
  if (frac.size() < 2) return 0;
  std::string digits = frac.substr(1, 9);
  while (digits.size() < 9) digits += '0';
  return std::stoll(digits);
}

// "+01:00", "+0100", "Z", "" -> seconds east of UTC.
int64_t ZoneOffsetS(const std::string& z) {
  if (z.empty() || z == "Z") return 0;
  const int sign = z[0] == '-' ? -1 : 1;
  std::string d;
  for (char c : z) {
    if (c >= '0' && c <= '9') d += c;
  }
  if (d.size() != 4) return 0;
  return sign * (std::stoi(d.substr(0, 2)) * 3600 + std::stoi(d.substr(2, 2)) * 60);
}

// "Tue Mar  5 10:15:02 2024" (asctime) -> ns since the epoch.
std::optional<int64_t> AscTimeNs(const std::string& s) {
  std::smatch m;
  if (!std::regex_match(s, m,
                        Re(R"(\w{3} (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4}))"))) {
    return std::nullopt;
  }
  int64_t e = EpochSeconds(std::stoi(m[6]), MonthIndex(m[1]), std::stoi(m[2]), std::stoi(m[3]),
                           std::stoi(m[4]), std::stoi(m[5]));
  if (e < 0) return std::nullopt;
  return e * 1'000'000'000LL;
}

struct Stamps {
  std::optional<double> kernel_s;
  std::optional<int64_t> wall_ns;
  std::string node;
  std::string rest;  // the message after the timestamps
};

// Strips the timestamps (and the syslog/journal host and tag) off the front of a line.
Stamps Strip(const std::string& line) {
  Stamps st;
  std::string rest = line;
  std::smatch m;
  // ISO 8601 (journalctl -o short-iso / short-iso-precise, rsyslog): time, host, tag.
  if (std::regex_search(rest, m,
                        Re(R"(^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?\s+(\S+)\s+)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      st.wall_ns = (e - ZoneOffsetS(m[8])) * 1'000'000'000LL + FractionNs(m[7]);
      st.node = m[9];
      rest = m.suffix();
    }
  } else if (std::regex_search(rest, m,
                               Re(R"(^(\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?\s+(\S+)\s+)"))) {
    // Classic syslog (journalctl -o short): no year; one year is assumed for every line.
    int64_t e = EpochSeconds(2000, MonthIndex(m[1]), std::stoi(m[2]), std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]));
    if (e >= 0) {
      st.wall_ns = e * 1'000'000'000LL + FractionNs(m[6]);
      st.node = m[7];
      rest = m.suffix();
    }
  }
  if (!st.node.empty()) {
    // The tag: "kernel:", "NetworkManager[812]:".
    if (std::regex_search(rest, m, Re(R"(^[\w.\-/]+(\[\d+\])?:\s*)"))) rest = m.suffix();
  }
  // dmesg -T: "[Tue Mar  5 10:15:02 2024] ".
  if (std::regex_search(rest, m, Re(R"(^\[(\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s*)"))) {
    if (auto ns = AscTimeNs(m[1])) {
      if (!st.wall_ns) st.wall_ns = *ns;
      rest = m.suffix();
    }
  }
  // ip -ts: "[2024-03-05T10:15:02.123456] ".
  if (std::regex_search(rest, m,
                        Re(R"(^\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?\]\s*)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      if (!st.wall_ns) st.wall_ns = e * 1'000'000'000LL + FractionNs(m[7]);
      rest = m.suffix();
    }
  }
  // dmesg: "[12345.678901] " (at most 9 digits of seconds since boot, so that ns fit).
  if (std::regex_search(rest, m, Re(R"(^\[\s*(\d{1,9}\.\d+)\]\s*)"))) {
    st.kernel_s = std::stod(m[1]);
    rest = m.suffix();
  }
  st.rest = rest;
  return st;
}

const char* kPci = R"(([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))";

std::string StripColon(std::string s) {
  while (!s.empty() && s.back() == ':') s.pop_back();
  return s;
}

// The device names of a driver message: the interface named by `ifname` (may be empty) and
// the PCI address in the line, if any.
std::vector<std::string> Names(const std::string& msg, const std::string& ifname) {
  std::vector<std::string> out;
  if (!ifname.empty()) out.push_back(ifname);
  std::smatch m;
  if (std::regex_search(msg, m, Re(kPci))) out.push_back(m[1]);
  return out;
}

// A kernel message about a link; nullopt when the line is something else.
std::optional<std::pair<bool, std::vector<std::string>>> KernelEvent(const std::string& msg) {
  std::smatch m;
  // ice, i40e, ixgbe, igb, bnxt, e1000e: "ens1f0: NIC Link is Down", "eth0 NIC Link is Up ...".
  if (std::regex_search(msg, m, Re(R"((\S+) NIC Link is (Up|Down)\b)", true))) {
    const std::string state = m[2];
    return std::make_pair(state[0] == 'U' || state[0] == 'u', Names(msg, StripColon(m[1])));
  }
  // Bonding: "bond0: (slave eth2): link status definitely down, disabling slave" and the older
  // "bond0: link status definitely down for interface eth2, disabling it".
  if (std::regex_search(msg, m, Re(R"(\(slave (\S+?)\): link status definitely (up|down))"))) {
    return std::make_pair(m[2] == "up", std::vector<std::string>{m[1]});
  }
  if (std::regex_search(msg, m,
                        Re(R"(link status definitely (up|down) for interface ([^\s,]+))"))) {
    return std::make_pair(m[1] == "up", std::vector<std::string>{m[2]});
  }
  // mlx5 module events carry the PCI function only.
  if (std::regex_search(msg, m,
                        Re(R"(Port module event(\[error\])?: module \d+, Cable (plugged|unplugged|error))"))) {
    auto names = Names(msg, "");
    if (names.empty()) return std::nullopt;
    return std::make_pair(std::string(m[2]) == "plugged", names);
  }
  // Port state changes: "... Port state changed to DOWN", "port 1 state changed to ACTIVE".
  if (std::regex_search(msg, m, Re(R"(state changed(?: to)?:? (DOWN|UP|ACTIVE)\b)", true))) {
    std::string s = m[1];
    std::transform(s.begin(), s.end(), s.begin(), ::toupper);
    std::smatch d;
    std::string ifname;
    if (std::regex_search(msg, d, Re(R"((?:^|\s)([A-Za-z][\w.\-]*): )"))) ifname = d[1];
    auto names = Names(msg, ifname == "mlx5_core" || ifname == "mlx5_ib" ? "" : ifname);
    if (names.empty()) return std::nullopt;
    return std::make_pair(s != "DOWN", names);
  }
  // IPv6 addrconf after carrier: "ADDRCONF(NETDEV_CHANGE): eth2: link becomes ready".
  if (std::regex_search(msg, m, Re(R"(NETDEV_CHANGE\): (\S+?): link becomes ready)"))) {
    return std::make_pair(true, std::vector<std::string>{m[1]});
  }
  // mlx5, mlx4, virtio and others: "mlx5_core 0000:08:00.0 eth2: Link down", "eth2: Link Up".
  if (std::regex_search(msg, m, Re(R"((\S+): Link (up|down)\b)", true))) {
    const std::string state = m[2];
    return std::make_pair(state[0] == 'u' || state[0] == 'U', Names(msg, m[1]));
  }
  return std::nullopt;
}

// An `ip monitor link` message ("3: eth2: <FLAGS> ... state DOWN ...").
std::optional<std::pair<bool, std::vector<std::string>>> IpMonitorEvent(const std::string& msg) {
  std::smatch m;
  if (!std::regex_search(msg, m,
                         Re(R"(^(?:\[LINK\]\s*)?(Deleted\s+)?\d+: ([^:@\s]+)(?:@[^:\s]+)?: <([^>]*)>(.*)$)"))) {
    return std::nullopt;
  }
  const std::string dev = m[2];
  if (m[1].matched) return std::make_pair(false, std::vector<std::string>{dev});
  std::string flags = ",";
  flags.append(m[3].first, m[3].second);
  flags.push_back(',');
  const std::string tail = m[4];
  std::smatch s;
  std::string state;
  if (std::regex_search(tail, s, Re(R"(\bstate (\S+))"))) state = s[1];
  bool up;
  if (flags.find(",NO-CARRIER,") != std::string::npos || state == "DOWN" ||
      state == "LOWERLAYERDOWN") {
    up = false;
  } else if (flags.find(",LOWER_UP,") != std::string::npos || state == "UP") {
    up = true;
  } else {
    return std::nullopt;  // admin changes without a carrier verdict
  }
  return std::make_pair(up, std::vector<std::string>{dev});
}

}  // namespace

const char* LinkSourceName(LinkSource s) {
  switch (s) {
    case LinkSource::kKernel:
      return "kernel";
    case LinkSource::kIpMonitor:
      return "ip_monitor";
    case LinkSource::kRdmaPort:
      return "rdma_port";
    case LinkSource::kSwitch:
      return "switch";
  }
  return "kernel";
}

std::vector<LinkEvent> ParseLinkLog(std::string_view text, const std::string& file) {
  return ParseIncidentLog(text, file).links;
}

ParsedLog ParseIncidentLog(std::string_view text, const std::string& file,
                           const std::string& node, int year) {
  (void)year;  // classic syslog stamps: see Strip
  ParsedLog parsed;
  std::vector<LinkEvent>& out = parsed.links;
  std::istringstream in{std::string(text)};
  std::string raw;
  int lineno = 0;
  std::optional<int64_t> ip_stamp;  // from the last "Timestamp:" line of `ip -t monitor`
  while (std::getline(in, raw)) {
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    std::smatch m;
    if (std::regex_search(raw, m,
                          Re(R"(^Timestamp: (\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}) (\d{1,6}) usec)"))) {
      ip_stamp = AscTimeNs(m[1]);
      if (ip_stamp) *ip_stamp += std::stoll(m[2]) * 1000;
      continue;
    }
    if (raw.empty() || raw[0] == ' ' || raw[0] == '\t') continue;  // ip's continuation lines
    Stamps st = Strip(raw);
    auto ev = IpMonitorEvent(st.rest);
    if (ev) {
      if (!st.wall_ns && ip_stamp) st.wall_ns = ip_stamp;
    } else {
      ev = KernelEvent(st.rest);
    }
    ip_stamp.reset();
    if (!ev || ev->second.empty()) continue;
    LinkEvent e;
    e.file = file;
    e.line = lineno;
    e.text = raw;
    e.node = st.node;
    e.names = ev->second;
    e.up = ev->first;
    e.kernel_s = st.kernel_s;
    e.wall_ns = st.wall_ns;
    if (e.node.empty()) e.node = node;
    out.push_back(std::move(e));
  }
  return parsed;
}

}  // namespace faultline::runner
