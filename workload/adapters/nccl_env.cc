#include "workload/adapters/nccl_env.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

namespace faultline::workload::adapters {
namespace {

namespace fs = std::filesystem;

// The address's text in canonical form, or "" when it is neither IPv4 nor IPv6.
std::string Canonical(const std::string& text) {
  char buf[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return inet_ntop(AF_INET, &v4, buf, sizeof buf) ? buf : "";
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    return inet_ntop(AF_INET6, &v6, buf, sizeof buf) ? buf : "";
  }
  return "";
}

std::string FirstLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// netdev -> (RDMA device, port) from the ports' GID netdevs, then from IPoIB device links.
bool RdmaPortOf(const std::string& sysfs, const std::string& netdev, std::string* device,
                int* port) {
  std::error_code ec;
  const fs::path ib = fs::path(sysfs) / "class" / "infiniband";
  for (const auto& dev : fs::directory_iterator(ib, ec)) {
    for (const auto& p : fs::directory_iterator(dev.path() / "ports", ec)) {
      for (const auto& n : fs::directory_iterator(p.path() / "gid_attrs" / "ndevs", ec)) {
        if (FirstLine(n.path()) != netdev) continue;
        *device = dev.path().filename().string();
        *port = std::atoi(p.path().filename().c_str());
        return *port > 0;
      }
    }
  }
  const fs::path own = fs::path(sysfs) / "class" / "net" / netdev / "device" / "infiniband";
  for (const auto& dev : fs::directory_iterator(own, ec)) {
    *device = dev.path().filename().string();
    const std::string dev_port = FirstLine(fs::path(sysfs) / "class" / "net" / netdev / "dev_port");
    *port = (dev_port.empty() ? 0 : std::atoi(dev_port.c_str())) + 1;
    return true;
  }
  return false;
}

}  // namespace

Result<std::vector<RailInterface>> ResolveRails(const std::vector<std::string>& addresses,
                                                const std::string& sysfs) {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return Internal("getifaddrs failed");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> list(raw, freeifaddrs);
  std::map<std::string, std::string> owner;  // canonical address -> interface
  for (const ifaddrs* a = raw; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_name == nullptr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, buf,
                sizeof buf);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf,
                sizeof buf);
    } else {
      continue;
    }
    owner.emplace(buf, a->ifa_name);
  }
  std::vector<RailInterface> out;
  for (const std::string& addr : addresses) {
    const std::string canon = Canonical(addr);
    auto it = canon.empty() ? owner.end() : owner.find(canon);
    if (it == owner.end()) {
      return NotFound("rail address " + addr + " is on no interface of this network namespace");
    }
    RailInterface r;
    r.address = addr;
    r.netdev = it->second;
    if (!RdmaPortOf(sysfs, r.netdev, &r.rdma_device, &r.rdma_port)) {
      r.rdma_device.clear();
      r.rdma_port = 0;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> NcclRailEnv(
    const std::vector<RailInterface>& rails) {
  if (rails.empty()) return {};
  std::string ifnames, hcas;
  bool all_rdma = true;
  std::vector<std::string> seen, seen_hca;
  for (const RailInterface& r : rails) {
    if (std::find(seen.begin(), seen.end(), r.netdev) == seen.end()) {
      ifnames += (ifnames.empty() ? "=" : ",") + r.netdev;
      seen.push_back(r.netdev);
    }
    if (r.rdma_device.empty() || r.rdma_port < 1) {
      all_rdma = false;
      continue;
    }
    const std::string hca = r.rdma_device + ":" + std::to_string(r.rdma_port);
    if (std::find(seen_hca.begin(), seen_hca.end(), hca) == seen_hca.end()) {
      hcas += (hcas.empty() ? "=" : ",") + hca;
      seen_hca.push_back(hca);
    }
  }
  std::vector<std::pair<std::string, std::string>> env = {{"NCCL_SOCKET_IFNAME", ifnames}};
  if (all_rdma) env.emplace_back("NCCL_IB_HCA", hcas);
  return env;
}

std::vector<std::pair<std::string, std::string>> ApplyNcclEnv(
    const std::vector<std::pair<std::string, std::string>>& env) {
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
  std::vector<std::pair<std::string, std::string>> knobs;
  for (const char* name : kNcclKnobs) {
    const char* v = std::getenv(name);
    knobs.emplace_back(name, v != nullptr ? v : "");
  }
  return knobs;
}

}  // namespace faultline::workload::adapters
