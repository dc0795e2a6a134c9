// A host kernel's link messages (NIC drivers, bonding, addrconf) and `ip monitor link`
// lines (log_lines.h).
#include "runner/incident/log_lines.h"

namespace faultline::runner::incident_internal {

namespace {

const char* kPci = R"(([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))";

// The device names of a driver message: the interface named by `ifname` (may be empty) and
// the PCI address in the line, if any.
std::vector<std::string> Names(const std::string& msg, const std::string& ifname) {
  std::vector<std::string> out;
  if (!ifname.empty()) out.push_back(ifname);
  std::smatch m;
  if (std::regex_search(msg, m, Re(kPci))) out.push_back(m[1]);
  return out;
}

}  // namespace

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

}  // namespace faultline::runner::incident_internal
