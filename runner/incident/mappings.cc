// `faultline import`'s --map, --map-switch and --map-rank flags (incident_import.h).
#include <regex>

#include "runner/incident/incident_import.h"

namespace faultline::runner {

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
  RankRef r;
  if (std::regex_match(s, m, std::regex(R"(rank(\d{1,6})=host(\d{1,6})/rank(\d{1,6}))"))) {
    r.host = std::stoi(m[2]);
    r.rank = std::stoi(m[3]);
    return std::make_pair("rank" + std::to_string(std::stoi(m[1])), r);
  }
  if (!std::regex_match(s, m, std::regex(R"(([^:=]+):(\d{1,6})=host(\d{1,6})/rank(\d{1,6}))"))) {
    return InvalidArgument("--map-rank '" + s +
                           "': expected NODE:LOCAL=hostH/rankL (e.g. gpu-node-17:3=host1/rank1) "
                           "or rankG=hostH/rankL (a production job's global rank)");
  }
  r.host = std::stoi(m[3]);
  r.rank = std::stoi(m[4]);
  return std::make_pair(std::string(m[1]) + ":" + std::to_string(std::stoi(m[2])), r);
}

}  // namespace faultline::runner
