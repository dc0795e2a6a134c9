// RDMA port state changes in kernel messages, and the time lines before `ibstat` dumps
// (log_lines.h).
#include "runner/incident/log_lines.h"


namespace faultline::runner::incident_internal {

namespace {

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

}  // namespace

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

}  // namespace faultline::runner::incident_internal
