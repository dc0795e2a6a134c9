#include "runner/core/link_log.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
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
  int64_t v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return v;
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
  return sign * (((d[0] - '0') * 10 + (d[1] - '0')) * 3600 + ((d[2] - '0') * 10 + (d[3] - '0')) * 60);
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

// A decimal number in [lo, hi]; nullopt when empty, not a number, or out of range.
std::optional<int64_t> ToInt(const std::string& s, int64_t lo = 0,
                             int64_t hi = std::numeric_limits<int32_t>::max()) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc() || r.ptr != end || v < lo || v > hi) return std::nullopt;
  return v;
}

std::optional<int> ToInt32(const std::string& s, int64_t hi = std::numeric_limits<int32_t>::max()) {
  auto v = ToInt(s, 0, hi);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

struct Stamps {
  std::optional<double> kernel_s;
  std::optional<int64_t> wall_ns;
  int64_t wall_res_ns = 0;
  bool year_assumed = false;
  std::string node;
  std::string rest;  // the message after the timestamps
};

// The resolution of a stamp with the fraction `frac` (".123", "" for whole seconds).
int64_t ResolutionNs(const std::string& frac) {
  if (frac.size() < 2) return 1'000'000'000;
  int64_t r = 1'000'000'000;
  for (size_t i = 1; i < frac.size() && i <= 9; ++i) r /= 10;
  return r;
}

void SetWall(Stamps& st, int64_t epoch_s, const std::string& frac, bool year_assumed) {
  st.wall_ns = epoch_s * 1'000'000'000LL + FractionNs(frac);
  st.wall_res_ns = ResolutionNs(frac);
  st.year_assumed = year_assumed;
}

// Strips the timestamps (and the syslog/journal host and tag) off the front of a line.
// `year`: the year of classic syslog stamps, which print none.
Stamps Strip(const std::string& line, int year) {
  Stamps st;
  std::string rest = line;
  std::smatch m;
  // ISO 8601 (journalctl -o short-iso / short-iso-precise, rsyslog): time, host, tag.
  if (std::regex_search(rest, m,
                        Re(R"(^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?\s+(\S+)\s+)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      SetWall(st, e - ZoneOffsetS(m[8]), m[7], false);
      st.node = m[9];
      rest = m.suffix();
    }
  } else if (std::regex_search(rest, m,
                               Re(R"(^(\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?\s+(\S+)\s+)"))) {
    // Classic syslog (journalctl -o short, SONiC, EOS): no year; `year` is assumed.
    int64_t e = EpochSeconds(year, MonthIndex(m[1]), std::stoi(m[2]), std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]));
    if (e >= 0) {
      SetWall(st, e, m[6], true);
      st.node = m[7];
      rest = m.suffix();
    }
  } else if (std::regex_search(rest, m,
                               Re(R"(^(\d{4}) (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?(?: (?:UTC|GMT))?:?\s+(?!%)(\S+)\s+)"))) {
    // NX-OS local log ("show logging logfile"): the year first, then the switch's name.
    int64_t e = EpochSeconds(std::stoi(m[1]), MonthIndex(m[2]), std::stoi(m[3]), std::stoi(m[4]),
                             std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      SetWall(st, e, m[7], false);
      st.node = m[8];
      rest = m.suffix();
    }
  }
  if (!st.node.empty()) {
    // The tag: "kernel:", "NetworkManager[812]:".
    if (std::regex_search(rest, m, Re(R"(^[\w.\-/]+(\[\d+\])?:\s*)"))) rest = m.suffix();
    // NX-OS through a syslog relay: the switch's own stamp, with its year, after the relay's.
    if (std::regex_search(rest, m,
                          Re(R"(^(\d{4}) (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?(?: (?:UTC|GMT))?:\s*)"))) {
      int64_t e = EpochSeconds(std::stoi(m[1]), MonthIndex(m[2]), std::stoi(m[3]),
                               std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
      if (e >= 0) {
        SetWall(st, e, m[7], false);
        rest = m.suffix();
      }
    }
  }
  // dmesg -T: "[Tue Mar  5 10:15:02 2024] ".
  if (std::regex_search(rest, m, Re(R"(^\[(\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s*)"))) {
    if (auto ns = AscTimeNs(m[1])) {
      if (!st.wall_ns) {
        st.wall_ns = *ns;
        st.wall_res_ns = 1'000'000'000;
      }
      rest = m.suffix();
    }
  }
  // ip -ts: "[2024-03-05T10:15:02.123456] ".
  if (std::regex_search(rest, m,
                        Re(R"(^\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?\]\s*)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      if (!st.wall_ns) SetWall(st, e, m[7], false);
      rest = m.suffix();
    }
  }
  // dmesg: "[12345.678901] " (at most 9 digits of seconds since boot, so that ns fit).
  if (std::regex_search(rest, m, Re(R"(^\[\s*(\d{1,9}\.\d{1,9})\]\s*)"))) {
    st.kernel_s = std::strtod(m[1].str().c_str(), nullptr);
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

using Event = std::pair<bool, std::vector<std::string>>;

// Something that looks like a known source but cannot be read; `why` says how.
struct Unreadable {
  std::string why;
};

// A switch's own message about one of its ports; nullopt when the line is something else.
// Sets `bad` when the line starts like one but cannot be read.
std::optional<Event> SwitchEvent(const std::string& msg, std::optional<Unreadable>& bad) {
  std::smatch m;
  // SONiC orchagent (portsorch): "updatePortOperStatus: Port Ethernet8 oper state set from up
  // to down".
  if (msg.find("oper state set from") != std::string::npos) {
    if (std::regex_search(msg, m, Re(R"(Port (\S+) oper state set from \w+ to (up|down)\b)"))) {
      return Event{m[2] == "up", {m[1]}};
    }
    bad = Unreadable{"a SONiC oper state line without 'Port NAME ... to up|down'"};
    return std::nullopt;
  }
  // Arista EOS (and IOS-style): "%LINEPROTO-5-UPDOWN: Line protocol on Interface Ethernet1/1,
  // changed state to down"; "%LINK-3-UPDOWN: Interface Ethernet1, changed state to up".
  if (msg.find("%LINEPROTO-") != std::string::npos || msg.find("%LINK-") != std::string::npos) {
    if (std::regex_search(msg, m,
                          Re(R"(%(?:LINEPROTO|LINK)-\d-UPDOWN: (?:Line protocol on )?Interface ([^\s,]+), changed state to (up|down)\b)",
                             true))) {
      std::string state = m[2];
      return Event{state[0] == 'u' || state[0] == 'U', {m[1]}};
    }
    if (msg.find("UPDOWN") != std::string::npos) {
      bad = Unreadable{"an UPDOWN message without 'Interface NAME, changed state to up|down'"};
    }
    return std::nullopt;
  }
  // Cisco NX-OS: "%ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface Ethernet1/1 is down (Link
  // failure)", "%ETHPORT-5-IF_UP: Interface Ethernet1/1 is up in mode access". Port-channel
  // membership (%ETH_PORT_CHANNEL-...) is not a link transition and is ignored.
  if (std::regex_search(msg, m, Re(R"(%ETHPORT-\d-IF_(UP|DOWN)\w*:\s*(.*)$)"))) {
    const std::string body = m[2];
    std::smatch d;
    if (std::regex_search(body, d, Re(R"(^Interface (\S+) is (up|down)\b)"))) {
      return Event{d[2] == "up", {StripColon(d[1])}};
    }
    bad = Unreadable{"an NX-OS ETHPORT message without 'Interface NAME is up|down'"};
    return std::nullopt;
  }
  // Cumulus Linux switchd: "nic_set_carrier: swp17: setting kernel carrier: down" and
  // "libnl: swp1, family 0, ifi 20, oper down".
  if (std::regex_search(msg, m, Re(R"(nic_set_carrier: (\S+?): setting kernel carrier: (up|down)\b)"))) {
    return Event{m[2] == "up", {m[1]}};
  }
  if (std::regex_search(msg, m, Re(R"(libnl: (swp[\w.\-]+), .*\boper (up|down)\b)"))) {
    return Event{m[2] == "up", {m[1]}};
  }
  return std::nullopt;
}

// The ib_port_state / ibv_event_type words of RDMA port messages: true for a usable port.
std::optional<bool> RdmaStateUp(std::string word) {
  std::transform(word.begin(), word.end(), word.begin(), ::toupper);
  if (word == "ACTIVE" || word == "PORT_ACTIVE" || word == "IB_EVENT_PORT_ACTIVE" ||
      word == "ACTIVE_DEFER") {
    return true;
  }
  if (word == "DOWN" || word == "INIT" || word == "ARMED" || word == "PORT_ERR" ||
      word == "IB_EVENT_PORT_ERR" || word == "ERR" || word == "ERROR") {
    return false;
  }
  return std::nullopt;
}

// A kernel message about an RDMA device's port ("mlx5_0" and a port number).
std::optional<Event> RdmaEvent(const std::string& msg, std::optional<Unreadable>& bad) {
  std::smatch m;
  // "infiniband mlx5_0: ..." (dev_printk of ib_core) or "mlx5_ib: mlx5_0 ..." or "mlx5_0:1".
  if (!std::regex_search(msg, m, Re(R"((?:^|[\s:(])((?:mlx[45]|bnxt_re|irdma|efa|hfi1|qedr|rxe|siw)_?\w*?\d+)(?::(\d+))?\b)"))) {
    return std::nullopt;
  }
  const std::string dev = m[1];
  std::string port = m[2];
  std::smatch p;
  if (std::regex_search(msg, p, Re(R"(\bport (\d+)\b)", true))) port = p[1];
  std::smatch s;
  std::string word;
  if (std::regex_search(msg, s,
                        Re(R"(\b(IB_EVENT_PORT_ERR|IB_EVENT_PORT_ACTIVE|PORT_ERR|PORT_ACTIVE)\b)"))) {
    word = s[1];
  } else if (std::regex_search(msg, s,
                               Re(R"(\bport \d+\b.*\b(?:state(?: changed)?(?: from \w+)?(?: to)?:?|is now|changed to)\s+(ACTIVE|DOWN|INIT|ARMED|ACTIVE_DEFER)\b)",
                                  true))) {
    word = s[1];
  } else if (std::regex_search(msg, s, Re(R"(\bport \d+\b.*\b(port error|port active)\b)", true))) {
    word = s[1] == "port error" || s[1] == "Port error" ? "PORT_ERR" : "PORT_ACTIVE";
  } else {
    return std::nullopt;
  }
  if (port.empty()) {
    bad = Unreadable{"an RDMA port state message without a port number"};
    return std::nullopt;
  }
  auto up = RdmaStateUp(word);
  if (!up) return std::nullopt;
  if (!ToInt(port, 0, 255)) {
    bad = Unreadable{"an RDMA port number out of range"};
    return std::nullopt;
  }
  std::vector<std::string> names{dev + "/" + port};
  std::smatch n;
  if (std::regex_search(msg, n, Re(R"(\b(?:netdev|ndev|ifname)[ =:]+([A-Za-z][\w.\-]*))"))) {
    names.push_back(n[1]);
  }
  return Event{*up, names};
}

// Classifies the message of an NCCL WARN/INFO line or an error line of the framework; fills
// the symptom's kind and what the message names. Empty kind: not a symptom.
void ClassifyNcclMessage(const std::string& msg, Symptom& sy, std::optional<Unreadable>& bad) {
  std::smatch m;
  if (msg.find("Got completion from peer") != std::string::npos) {
    // 2.10-2.19: "with error 12, opcode 0, len 0, vendor err 129"; 2.20-2.27: "with
    // status=12 opcode=0 len=0 vendor err 129 (Recv) ... hca mlx5_0"; 2.28+:
    // "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128) ... hca mlx5_0".
    if (!std::regex_search(msg, m,
                           Re(R"(Got completion from peer (\S+) with (?:error (\d{1,9})|status=(?:\w+\()?(\d{1,9})\)?)[ ,])"))) {
      bad = Unreadable{"an NCCL completion error without 'peer ADDR with status'"};
      return;
    }
    sy.kind = "ib_completion_error";
    sy.peer = m[1];
    auto st = ToInt(m[2].matched ? m[2].str() : m[3].str());
    if (st) sy.wc_status = static_cast<int>(*st);
    std::smatch h;
    if (std::regex_search(msg, h, Re(R"(\bhca (\S+))"))) sy.hca = h[1];
    return;
  }
  if (std::regex_search(msg, m, Re(R"(NET/IB ?: ?(?:(\S+:\d+) )?(?:Got (?:non-fatal )?async event|async fatal event))"))) {
    sy.kind = "ib_async_event";
    if (m[1].matched) sy.hca = m[1];
    return;
  }
  if (std::regex_search(msg, m, Re(R"(communicator was aborted on rank (\d+))"))) {
    sy.kind = "abort";
    sy.global_rank = ToInt32(m[1]);
    return;
  }
  if (std::regex_search(msg, m, Re(R"(Call to (ibv_\w+))"))) {
    sy.kind = "ib_verbs_error";
    return;
  }
  if (msg.find("ncclRemoteError") != std::string::npos ||
      msg.find("remote process exited") != std::string::npos) {
    sy.kind = "remote_error";
    return;
  }
  if (msg.find("NET/Socket") != std::string::npos || msg.find("socketProgress") != std::string::npos ||
      msg.find("Connection closed by remote peer") != std::string::npos ||
      std::regex_search(msg, Re(R"(^Net : |Call to \w+ failed|Connection (?:reset|refused))"))) {
    sy.kind = "socket_error";
    if (std::regex_search(msg, m, Re(R"(\bpeer ([^\s,]+))"))) sy.peer = m[1];
    return;
  }
  if (msg.find("ncclSystemError") != std::string::npos) {
    sy.kind = "system_error";
    return;
  }
  if (std::regex_search(msg, Re(R"(\b[Aa]bort(?:ed|ing)?\b)"))) {
    sy.kind = "abort";
    return;
  }
  if (std::regex_search(msg, Re(R"(\b(?:timeout|timed out|Timeout)\b)"))) {
    sy.kind = "timeout";
    return;
  }
}

// An NCCL_DEBUG_TIMESTAMP_FORMAT stamp (default "[%F %T] ", local time), or RAS's "[%F %T]".
bool TakeLocalStamp(std::string& rest, Symptom& sy) {
  std::smatch m;
  if (!std::regex_search(rest, m,
                         Re(R"(^\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)([.,]\d{1,9})?\]\s*)"))) {
    return false;
  }
  int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]), std::stoi(m[4]),
                           std::stoi(m[5]), std::stoi(m[6]));
  if (e < 0) return false;
  std::string frac = m[7];
  if (!frac.empty()) frac[0] = '.';
  if (!sy.wall_ns) {
    sy.wall_ns = e * 1'000'000'000LL + FractionNs(frac);
    sy.wall_res_ns = ResolutionNs(frac);
    sy.year_assumed = false;
    sy.zone_assumed = true;
  }
  rest = m.suffix();
  return true;
}

// A symptom in one line (NCCL debug output, the framework's watchdog, RAS text monitor);
// nullopt when the line is none of these.
std::optional<Symptom> SymptomOf(const std::string& raw, int year, std::optional<Unreadable>& bad) {
  Symptom sy;
  std::string body = raw;
  std::smatch m;
  // Slurm `srun --label`: "3: " (the task, which is the job's global rank).
  std::optional<int> task;
  if (std::regex_search(body, m, Re(R"(^\s*(\d{1,7}): (?=\S))"))) {
    const std::string after = m.suffix();
    if (std::regex_search(after, Re(R"(NCCL (?:WARN|INFO)|\[rank\d+\]|Watchdog|ncclRemoteError|ncclSystemError|remote process exited|communicator was aborted|PEER_|^\[\d{4}-|^[^\s:\[\]]+:\d+:\d+ \[)"))) {
      task = ToInt32(m[1]);
      body = after;
    }
  }
  Stamps st = Strip(body, year);
  sy.node = st.node;
  sy.kernel_s = st.kernel_s;
  sy.wall_ns = st.wall_ns;
  sy.wall_res_ns = st.wall_res_ns;
  sy.year_assumed = st.year_assumed;
  std::string rest = st.rest;
  TakeLocalStamp(rest, sy);
  // NCCL: "node17:12345:12400 [3] NCCL WARN ..." (2.x), with "file.cc:123 " and, in 2.29+,
  // "(function) " between the device and the level.
  if (std::regex_search(rest, Re(R"(^[^\s:\[\]]+:\d+:\d+(?: |$))"))) {
    if (!std::regex_search(rest, m,
                           Re(R"(^([^\s:\[\]]+):(\d+):(\d+) \[(\d+)\] (?:\S+:\d+ (?:\([^)]*\) )?)?NCCL (WARN|INFO)(?: (.*))?$)"))) {
      if (rest.find("NCCL") != std::string::npos || rest.find(" [") != std::string::npos ||
          rest.find(" ") == std::string::npos) {
        bad = Unreadable{"a truncated NCCL debug line"};
      }
      return std::nullopt;
    }
    const std::string msg = m[6];
    auto pid = ToInt(m[2]);
    auto dev = ToInt(m[4], 0, 1023);
    if (!pid || !dev) {
      bad = Unreadable{"an NCCL debug line with a pid or device out of range"};
      return std::nullopt;
    }
    if (m[5] == "WARN" && msg.find_first_not_of(' ') == std::string::npos) {
      bad = Unreadable{"an NCCL WARN line without its message (truncated)"};
      return std::nullopt;
    }
    sy.node = m[1];
    sy.pid = static_cast<int>(*pid);
    sy.local_rank = static_cast<int>(*dev);
    ClassifyNcclMessage(msg, sy, bad);
    if (sy.kind.empty()) return std::nullopt;
    if (task && !sy.global_rank) sy.global_rank = task;
    return sy;
  }
  // RAS text monitor: "[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 10.0.0.5
  // managing GPU 1".
  if (std::regex_search(rest, m, Re(R"(^(PEER_(?:DEAD|TIMEOUT_DEAD|UNRESPONSIVE|DISCONNECTED|SEND_STUCK|KEEPALIVE_TIMEOUT|INIT_TIMEOUT)): ?(.*)$)"))) {
    sy.kind = "ras";
    const std::string what = m[2];
    std::smatch p;
    if (std::regex_search(what, p, Re(R"(Process (\d+) on node (\S+)(?: managing GPU (\d+))?)"))) {
      sy.pid = ToInt32(p[1]);
      sy.node = p[2];
      if (p[3].matched) sy.local_rank = ToInt32(p[3], 1023);
    } else if (std::regex_search(what, p, Re(R"(^(\S+))"))) {
      sy.peer = p[1];
    }
    return sy;
  }
  // The framework (PyTorch ProcessGroupNCCL): "[rank3]:[E1128 03:14:07.123456 ...] [Rank 3]
  // Watchdog caught collective operation timeout: WorkNCCL(...) ran for 600012 milliseconds
  // before timing out.", "NCCL communicator was aborted on rank 3.", "ncclRemoteError: ...".
  std::optional<int> rank = task;
  if (std::regex_search(rest, m, Re(R"(^\[rank(\d{1,7})\]:\s*)"))) {
    rank = ToInt32(m[1]);
    rest = m.suffix();
  }
  if (std::regex_search(rest, m,
                        Re(R"(^\[?[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(\.\d{1,9})?\s)"))) {
    int64_t e = EpochSeconds(year, std::stoi(m[1]) - 1, std::stoi(m[2]), std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]));
    if (e >= 0 && !sy.wall_ns) {
      sy.wall_ns = e * 1'000'000'000LL + FractionNs(m[6]);
      sy.wall_res_ns = ResolutionNs(m[6]);
      sy.year_assumed = true;
      sy.zone_assumed = true;
    }
  }
  if (std::regex_search(rest, m, Re(R"(\[Rank (\d{1,7})\])"))) rank = ToInt32(m[1]);
  if (rest.find("Watchdog caught collective operation timeout") != std::string::npos) {
    if (!std::regex_search(rest, Re(R"(WorkNCCL\(.*\) ran for \d+ milliseconds before timing out)"))) {
      bad = Unreadable{"a watchdog timeout line without 'WorkNCCL(...) ran for N milliseconds'"};
      return std::nullopt;
    }
    sy.kind = "timeout";
  } else if (rest.find("NCCL communicator was aborted") != std::string::npos ||
             rest.find("ncclRemoteError") != std::string::npos ||
             rest.find("remote process exited") != std::string::npos ||
             rest.find("ncclSystemError") != std::string::npos) {
    ClassifyNcclMessage(rest, sy, bad);
  } else {
    return std::nullopt;
  }
  if (sy.kind.empty()) return std::nullopt;
  if (!sy.global_rank && rank) sy.global_rank = rank;
  return sy;
}

// Symptoms in one ncclras JSON document (`ncclras -f json`, NCCL 2.28.7+: communicators with
// missing_ranks, each unresponsive or considered_dead; a rank whose status has abort_flag or
// async_error) or one event of its monitor mode (`ncclras -m -f json`, 2.29+: "event":
// "PEER_DEAD" with its "peer").
void RasSymptoms(const nlohmann::json& doc, const Symptom& base, std::vector<Symptom>& out) {
  auto int_of = [](const nlohmann::json& o, const char* key) -> std::optional<int> {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer()) return std::nullopt;
    const int64_t v = it->get<int64_t>();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return std::nullopt;
    return static_cast<int>(v);
  };
  auto str_of = [](const nlohmann::json& o, const char* key) -> std::string {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto bool_of = [](const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_boolean() && it->get<bool>();
  };
  Symptom proto = base;
  proto.kind = "ras";
  {
    std::string ts = str_of(doc, "timestamp");
    std::string rest = "[" + ts + "]";
    TakeLocalStamp(rest, proto);
  }
  auto comms = doc.find("communicators");
  if (comms != doc.end() && comms->is_array()) {
    for (const auto& c : *comms) {
      if (!c.is_object()) continue;
      auto add = [&](const nlohmann::json& r, const std::string& why) {
        Symptom sy = proto;
        sy.global_rank = int_of(r, "rank");
        sy.node = str_of(r, "host");
        auto pid = int_of(r, "pid");
        if (pid && *pid >= 0) sy.pid = pid;
        sy.local_rank = int_of(r, "cuda_dev");
        sy.text = "ras: communicator " + str_of(c, "hash") + " rank " +
                  (sy.global_rank ? std::to_string(*sy.global_rank) : "?") + " on " + sy.node + ": " +
                  why;
        out.push_back(std::move(sy));
      };
      auto missing = c.find("missing_ranks");
      if (missing != c.end() && missing->is_array()) {
        for (const auto& r : *missing) {
          if (!r.is_object()) continue;
          auto status = r.find("status");
          if (status == r.end() || !status->is_object()) continue;
          if (bool_of(*status, "considered_dead")) {
            add(r, "considered dead");
          } else if (bool_of(*status, "unresponsive")) {
            add(r, "unresponsive");
          }
        }
      }
      auto ranks = c.find("ranks");
      if (ranks != c.end() && ranks->is_array()) {
        for (const auto& r : *ranks) {
          if (!r.is_object()) continue;
          auto status = r.find("status");
          if (status == r.end() || !status->is_object()) continue;
          auto err = int_of(*status, "async_error");
          if (bool_of(*status, "abort_flag")) {
            add(r, "aborted");
          } else if (err && *err != 0) {
            add(r, "async error " + std::to_string(*err));
          }
        }
      }
    }
    return;
  }
  const std::string event = str_of(doc, "event");
  static const std::set<std::string> kBad = {"PEER_DEAD",         "PEER_TIMEOUT_DEAD",
                                             "PEER_UNRESPONSIVE", "PEER_DISCONNECTED",
                                             "PEER_SEND_STUCK",   "PEER_KEEPALIVE_TIMEOUT",
                                             "PEER_INIT_TIMEOUT"};
  if (!kBad.count(event)) return;
  Symptom sy = proto;
  auto peer = doc.find("peer");
  if (peer != doc.end() && peer->is_object()) {
    sy.node = str_of(*peer, "host");
    if (sy.node.empty()) sy.peer = str_of(*peer, "addr");
    auto pid = int_of(*peer, "pid");
    if (pid && *pid >= 0) sy.pid = pid;
    auto devs = peer->find("cuda_devs");
    if (devs != peer->end() && devs->is_array() && devs->size() == 1 &&
        (*devs)[0].is_number_integer()) {
      const int64_t d = (*devs)[0].get<int64_t>();
      if (d >= 0 && d < 1024) sy.local_rank = static_cast<int>(d);
    }
  }
  sy.text = "ras: " + event + " " + (sy.node.empty() ? sy.peer : sy.node);
  out.push_back(std::move(sy));
}

// An `ibstat` dump, possibly several, each after a timestamp line: the state of every
// DEVICE/PORT; a state that differs from the previous dump's is an event.
struct IbstatState {
  std::string ca;                         // the current "CA 'mlx5_0'"
  int ca_line = 0;
  std::string port;                       // the current "Port 1:"
  int port_line = 0;
  bool port_has_state = false;
  std::map<std::string, bool> last;       // "mlx5_0/1" -> up, from the previous dump
  std::optional<int64_t> stamp_ns;        // the dump's time
  int64_t stamp_res_ns = 0;
};

// A line that is only a time (a `date` before the dump, "# 2026-11-28T03:14:07Z").
std::optional<std::pair<int64_t, int64_t>> StampLine(const std::string& line) {
  std::smatch m;
  if (std::regex_match(line, m,
                       Re(R"(^#?\s*(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d{1,9})?(Z|[+-]\d\d:?\d\d)?\s*$)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]), std::stoi(m[4]),
                             std::stoi(m[5]), std::stoi(m[6]));
    if (e < 0) return std::nullopt;
    return std::make_pair((e - ZoneOffsetS(m[8])) * 1'000'000'000LL + FractionNs(m[7]),
                          ResolutionNs(m[7]));
  }
  // date(1): "Sat Nov 28 03:14:07 UTC 2026" (only UTC/GMT zones are read).
  if (std::regex_match(line, m,
                       Re(R"(^#?\s*(\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d) (?:UTC|GMT) (\d{4})\s*$)"))) {
    auto ns = AscTimeNs(m[1].str() + " " + m[2].str());
    if (!ns) return std::nullopt;
    return std::make_pair(*ns, int64_t{1'000'000'000});
  }
  return std::nullopt;
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

namespace {

constexpr size_t kMaxLine = 8192;        // longer lines are not log lines of any source here
constexpr size_t kMaxJsonBytes = 4 << 20;
constexpr int kMaxJsonDepth = 32;

// The parse of one log: the state that spans lines.
class Parser {
 public:
  Parser(const std::string& file, const std::string& node, int year)
      : file_(file), node_(node), year_(year) {}

  void Line(std::string raw, int lineno) {
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (json_start_) {
      // ncclras indents everything inside its documents: a line at column 0 other than the
      // closing brace ends a document that never closed, and is read as itself.
      if (!raw.empty() && raw[0] != ' ' && raw[0] != '\t' && raw[0] != '}' && raw[0] != ']') {
        Warn(json_start_, "a JSON document that does not end (lines " +
                              std::to_string(json_start_) + "-" + std::to_string(lineno - 1) + ")");
        json_start_ = 0;
      } else {
        JsonLine(raw, lineno);
        return;
      }
    }
    if (raw.size() > kMaxLine) {
      Warn(lineno, "line longer than " + std::to_string(kMaxLine) + " bytes, skipped");
      return;
    }
    const size_t first = raw.find_first_not_of(" \t");
    if (first != std::string::npos && raw[first] == '{' &&
        raw.find_first_not_of(" \t", first + 1) == std::string::npos) {
      EndIbstatBlock();
      json_start_ = lineno;
      json_.clear();
      json_depth_ = 0;
      json_max_depth_ = 0;
      json_in_string_ = false;
      json_escape_ = false;
      JsonLine(raw, lineno);
      return;
    }
    std::smatch m;
    if (std::regex_search(raw, m,
                          Re(R"(^Timestamp: (\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}) (\d{1,6}) usec)"))) {
      ip_stamp_ = AscTimeNs(m[1]);
      if (ip_stamp_) *ip_stamp_ += std::stoll(m[2]) * 1000;
      return;
    }
    if (Ibstat(raw, lineno)) return;
    if (raw.empty() || raw[0] == ' ' || raw[0] == '\t') return;  // ip's continuation lines
    Stamps st = Strip(raw, year_);
    const std::string node = st.node.empty() ? node_ : st.node;
    if (st.kernel_s && st.wall_ns) {
      ClockSample c;
      c.file = file_;
      c.line = lineno;
      c.node = node;
      c.kernel_s = *st.kernel_s;
      c.wall_ns = *st.wall_ns;
      c.wall_res_ns = st.wall_res_ns;
      c.year_assumed = st.year_assumed;
      out_.clocks.push_back(std::move(c));
    }
    std::optional<Unreadable> bad;
    LinkSource source = LinkSource::kIpMonitor;
    auto ev = IpMonitorEvent(st.rest);
    if (ev) {
      if (!st.wall_ns && ip_stamp_) {
        st.wall_ns = ip_stamp_;
        st.wall_res_ns = 1000;
      }
    } else if ((ev = SwitchEvent(st.rest, bad))) {
      source = LinkSource::kSwitch;
    } else if (!bad && (ev = RdmaEvent(st.rest, bad))) {
      source = LinkSource::kRdmaPort;
    } else if (!bad && (ev = KernelEvent(st.rest))) {
      source = LinkSource::kKernel;
    }
    ip_stamp_.reset();
    if (ev && !ev->second.empty()) {
      LinkEvent e;
      e.file = file_;
      e.line = lineno;
      e.text = raw;
      e.node = node;
      e.names = ev->second;
      e.up = ev->first;
      e.source = source;
      e.kernel_s = st.kernel_s;
      e.wall_ns = st.wall_ns;
      e.wall_res_ns = st.wall_ns ? st.wall_res_ns : 0;
      e.year_assumed = st.wall_ns && st.year_assumed;
      out_.links.push_back(std::move(e));
      return;
    }
    if (bad) {
      Warn(lineno, bad->why);
      return;
    }
    auto sy = SymptomOf(raw, year_, bad);
    if (bad) {
      Warn(lineno, bad->why);
      return;
    }
    if (sy) {
      sy->file = file_;
      sy->line = lineno;
      sy->text = raw;
      if (sy->node.empty()) sy->node = node_;
      if (!sy->wall_ns) sy->wall_res_ns = 0;
      out_.symptoms.push_back(std::move(*sy));
    }
  }

  ParsedLog Finish(int last_line) {
    if (json_start_) {
      Warn(json_start_, "a JSON document that does not end (from line " +
                            std::to_string(json_start_) + " to the end, line " +
                            std::to_string(last_line) + ")");
      json_start_ = 0;
    }
    EndIbstatBlock();
    return std::move(out_);
  }

  void Warn(int line, std::string why) {
    out_.warnings.push_back(LogWarning{file_, line, std::move(why)});
  }

 private:
  void JsonLine(const std::string& raw, int lineno) {
    json_ += raw;
    json_ += '\n';
    for (char c : raw) {
      if (json_in_string_) {
        if (json_escape_) {
          json_escape_ = false;
        } else if (c == '\\') {
          json_escape_ = true;
        } else if (c == '"') {
          json_in_string_ = false;
        }
        continue;
      }
      if (c == '"') json_in_string_ = true;
      if (c == '{' || c == '[') json_max_depth_ = std::max(json_max_depth_, ++json_depth_);
      if (c == '}' || c == ']') --json_depth_;
    }
    if (json_.size() > kMaxJsonBytes) {
      Warn(json_start_, "a JSON document longer than " + std::to_string(kMaxJsonBytes) +
                            " bytes, skipped to line " + std::to_string(lineno));
      json_start_ = 0;
      return;
    }
    const bool top_close = raw == "}";  // ncclras closes its documents at column 0
    if ((json_depth_ > 0 || json_in_string_) && !top_close) return;
    const int start = json_start_;
    json_start_ = 0;
    if (json_depth_ != 0 || json_in_string_ || json_max_depth_ > kMaxJsonDepth) {
      Warn(start, "bad JSON (unbalanced or nested deeper than " + std::to_string(kMaxJsonDepth) +
                      ") in lines " + std::to_string(start) + "-" + std::to_string(lineno));
      return;
    }
    nlohmann::json doc = nlohmann::json::parse(json_, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      Warn(start, "bad JSON in lines " + std::to_string(start) + "-" + std::to_string(lineno));
      return;
    }
    if (!doc.contains("communicators") && !doc.contains("event")) return;  // not from ncclras
    Symptom base;
    base.file = file_;
    base.line = start;
    base.node = node_;
    std::vector<Symptom> found;
    RasSymptoms(doc, base, found);
    for (Symptom& sy : found) {
      if (sy.node.empty()) sy.node = node_;
      out_.symptoms.push_back(std::move(sy));
    }
  }

  // An ibstat line (or a dump's timestamp line); false for anything else.
  bool Ibstat(const std::string& raw, int lineno) {
    std::smatch m;
    if (auto stamp = StampLine(raw)) {
      EndIbstatBlock();
      ib_.stamp_ns = stamp->first;
      ib_.stamp_res_ns = stamp->second;
      return true;
    }
    if (std::regex_match(raw, m, Re(R"(^CA '([^']*)'\s*$)"))) {
      EndIbstatBlock();
      ib_.ca = m[1];
      ib_.ca_line = lineno;
      if (ib_.ca.empty()) {
        Warn(lineno, "an ibstat block without a device name");
        ib_.ca_line = 0;
      }
      return true;
    }
    if (ib_.ca.empty()) return false;
    if (raw.empty() || (raw[0] != ' ' && raw[0] != '\t')) {
      EndIbstatBlock();
      return false;
    }
    if (std::regex_match(raw, m, Re(R"(^\s+Port (\S+):\s*$)"))) {
      EndPort();
      if (!ToInt(m[1], 0, 255)) {
        Warn(lineno, "an ibstat port number out of range: " + m[1].str());
        ib_.port.clear();
        return true;
      }
      ib_.port = m[1];
      ib_.port_line = lineno;
      ib_.port_has_state = false;
      return true;
    }
    if (std::regex_match(raw, m, Re(R"(^\s+State:\s*(\S*)\s*$)"))) {
      if (ib_.port.empty()) return true;  // a CA-level line, or after a bad port
      ib_.port_has_state = true;
      std::string word = m[1];
      std::transform(word.begin(), word.end(), word.begin(), ::toupper);
      std::optional<bool> up;
      if (word == "ACTIVE") up = true;
      if (word == "DOWN" || word == "INITIALIZING" || word == "INIT" || word == "ARMED") up = false;
      if (!up) {
        Warn(lineno, "an ibstat port state that is not Active/Down/Initializing/Armed: '" +
                         m[1].str() + "'");
        return true;
      }
      const std::string key = ib_.ca + "/" + ib_.port;
      auto it = ib_.last.find(key);
      if (it != ib_.last.end() && it->second != *up) {
        LinkEvent e;
        e.file = file_;
        e.line = lineno;
        e.text = key + " State: " + m[1].str();
        e.node = node_;
        e.names = {key};
        e.up = *up;
        e.source = LinkSource::kRdmaPort;
        e.wall_ns = ib_.stamp_ns;
        e.wall_res_ns = ib_.stamp_ns ? ib_.stamp_res_ns : 0;
        out_.links.push_back(std::move(e));
      }
      ib_.last[key] = *up;
      return true;
    }
    return true;  // the other indented lines of a CA block
  }

  void EndPort() {
    if (!ib_.port.empty() && !ib_.port_has_state) {
      Warn(ib_.port_line, "ibstat port " + ib_.ca + "/" + ib_.port + " without a State line");
    }
    ib_.port.clear();
    ib_.port_has_state = false;
  }

  void EndIbstatBlock() {
    if (ib_.ca.empty()) return;
    EndPort();
    ib_.ca.clear();
  }

  const std::string& file_;
  const std::string& node_;
  const int year_;
  ParsedLog out_;
  std::optional<int64_t> ip_stamp_;  // from the last "Timestamp:" line of `ip -t monitor`
  IbstatState ib_;
  int json_start_ = 0;  // the first line of a JSON document being read; 0: none
  std::string json_;
  int json_depth_ = 0;
  int json_max_depth_ = 0;
  bool json_in_string_ = false;
  bool json_escape_ = false;
};

// A log without years in its stamps that runs over New Year: within one file and host, a
// year-less stamp more than half a year before the previous one is in the next year.
void RollOverYears(ParsedLog* log) {
  struct Stamp {
    int line;
    std::string node;
    int64_t* wall;
  };
  std::vector<Stamp> stamps;
  for (auto& e : log->links) {
    if (e.wall_ns && e.year_assumed) stamps.push_back({e.line, e.node, &*e.wall_ns});
  }
  for (auto& e : log->symptoms) {
    if (e.wall_ns && e.year_assumed) stamps.push_back({e.line, e.node, &*e.wall_ns});
  }
  for (auto& e : log->clocks) {
    if (e.year_assumed) stamps.push_back({e.line, e.node, &e.wall_ns});
  }
  std::stable_sort(stamps.begin(), stamps.end(),
                   [](const Stamp& x, const Stamp& y) { return x.line < y.line; });
  constexpr int64_t kHalfYearNs = 182LL * 86'400 * 1'000'000'000;
  std::map<std::string, std::pair<int64_t, int>> last;  // node -> (previous stamp, years added)
  for (Stamp& st : stamps) {
    auto [prev, years] = last.count(st.node) ? last[st.node] : std::make_pair(*st.wall, 0);
    auto shifted = [&](int add) {
      if (add == 0) return *st.wall;
      const std::time_t t = static_cast<std::time_t>(*st.wall / 1'000'000'000);
      std::tm tm{};
      if (!gmtime_r(&t, &tm)) return *st.wall;
      // Never past 2200 (the parsers' range, so that the time in ns fits an int64_t): a log
      // whose months go back and forth many times stops rolling there.
      if (tm.tm_year + add > 2200 - 1900) return *st.wall;
      tm.tm_year += add;
      return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000 + *st.wall % 1'000'000'000;
    };
    int64_t now = shifted(years);
    if (now < prev - kHalfYearNs) now = shifted(++years);
    *st.wall = now;
    last[st.node] = {now, years};
  }
}

}  // namespace

ParsedLog ParseIncidentLog(std::string_view text, const std::string& file,
                           const std::string& node, int year) {
  Parser parser(file, node, year);
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    ++lineno;
    try {
      parser.Line(std::string(text.substr(pos, nl - pos)), lineno);
    } catch (const std::exception& e) {
      parser.Warn(lineno, std::string("unreadable line: ") + e.what());
    } catch (...) {
      parser.Warn(lineno, "unreadable line");
    }
    pos = nl + 1;
  }
  ParsedLog parsed = parser.Finish(lineno);
  RollOverYears(&parsed);
  return parsed;
}

}  // namespace faultline::runner
