// A switch's own messages about its ports: SONiC, Arista EOS, Cumulus, Cisco NX-OS (log_lines.h).
#include "runner/incident/log_lines.h"


namespace faultline::runner::incident_internal {

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

}  // namespace faultline::runner::incident_internal
