#include "runner/exec/rail_capacity.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace faultline::runner {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  // A read that fails midway (sysfs answers EINVAL for a down link's speed) sets badbit.
  if (in.bad()) return std::nullopt;
  return ss.str();
}

}  // namespace

std::optional<double> ParseNetdevSpeed(std::string_view text) {
  const std::string s(Trim(text));
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long mbps = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno != 0) return std::nullopt;
  // SPEED_UNKNOWN is -1; older kernels print it unsigned (4294967295).
  if (mbps <= 0 || mbps >= 0xFFFFFFFFLL) return std::nullopt;
  return static_cast<double>(mbps) * 1e6;
}

std::optional<double> ParseRdmaRate(std::string_view text) {
  const std::string s(Trim(text));
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return std::nullopt;
  char* end = nullptr;
  const double gbps = std::strtod(s.c_str(), &end);
  if (!std::isfinite(gbps) || gbps <= 0) return std::nullopt;
  std::string_view rest(end);
  constexpr std::string_view kUnit = " Gb/sec";
  if (rest.substr(0, kUnit.size()) != kUnit) return std::nullopt;
  rest.remove_prefix(kUnit.size());
  // Nothing, or the width and speed in parentheses: " (4X EDR)".
  const std::string_view detail = Trim(rest);
  if (!rest.empty() &&
      (rest.front() != ' ' || detail.empty() || detail.front() != '(' || detail.back() != ')')) {
    return std::nullopt;
  }
  return gbps * 1e9;
}

std::optional<double> ReadNetdevSpeed(const std::string& netdev, const SysfsRoots& roots) {
  auto text = ReadSmallFile(roots.net + "/" + netdev + "/speed");
  if (!text) return std::nullopt;
  return ParseNetdevSpeed(*text);
}

std::optional<double> ReadRdmaPortRate(const std::string& device, int port,
                                       const SysfsRoots& roots) {
  auto text =
      ReadSmallFile(roots.infiniband + "/" + device + "/ports/" + std::to_string(port) + "/rate");
  if (!text) return std::nullopt;
  return ParseRdmaRate(*text);
}

RailCapacity ReadRailCapacity(const InventoryRail& rail, const SysfsRoots& roots) {
  if (rail.is_rdma()) {
    if (auto r = ReadRdmaPortRate(rail.rdma, rail.port, roots)) return {r, "rdma_rate"};
  }
  if (auto s = ReadNetdevSpeed(rail.netdev, roots)) return {s, "netdev_speed"};
  return {std::nullopt, ""};
}

nlohmann::json RailCapacityJson(const InventoryRail& rail, const RailCapacity& c) {
  nlohmann::json j = {{"netdev", rail.netdev}};
  if (rail.is_rdma()) {
    j["rdma"] = rail.rdma;
    j["port"] = rail.port;
  }
  j["capacity_bps"] = c.bps ? nlohmann::json(*c.bps) : nlohmann::json(nullptr);
  j["capacity_source"] = c.bps ? nlohmann::json(c.source) : nlohmann::json(nullptr);
  return j;
}

}  // namespace faultline::runner
