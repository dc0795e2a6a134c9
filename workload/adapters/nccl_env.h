// NCCL's view of a rank's rails: which network interfaces and RDMA ports carry them, told to
// NCCL through NCCL_SOCKET_IFNAME / NCCL_IB_HCA, and the resiliency knobs in force, recorded
// with the run. Plain C++ (no CUDA), so that it is built and tested on every machine.
//
// A rank knows its rails by address (CclInit::rails). In its network namespace each address
// belongs to one interface (getifaddrs); an interface carries RDMA where some RDMA device's
// port lists it among its GID netdevs (RoCE, soft-RoCE: /sys/class/infiniband/D/ports/P/
// gid_attrs/ndevs/*), or where it is an IPoIB interface of a device
// (/sys/class/net/N/device/infiniband/D, port dev_port + 1). The same holds for the netns
// topology (veth rails, no RDMA) and for an inventory host's real NICs.
//
// Thread-safety: ResolveRails and NcclRailEnv are pure but for their reads; ApplyNcclEnv
// changes the process environment (call it before NCCL starts any thread).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace faultline::workload::adapters {

struct RailInterface {
  std::string address;      // the rail's address, as given
  std::string netdev;       // the interface that has it
  std::string rdma_device;  // "" when the interface carries no RDMA
  int rdma_port = 0;        // 1-based; 0 without an RDMA device
};

// The interface (and RDMA port) of each address, in order. `sysfs` is the sysfs mount ("/sys";
// tests give a tree of their own). kNotFound naming an address no interface of this namespace
// has.
Result<std::vector<RailInterface>> ResolveRails(const std::vector<std::string>& addresses,
                                                const std::string& sysfs = "/sys");

// The variables that point NCCL at these rails: NCCL_SOCKET_IFNAME "=a,b" (exact names, each
// once, in rail order) and, when every rail has an RDMA port, NCCL_IB_HCA "=d:p,..." (exact).
// Empty for no rails.
std::vector<std::pair<std::string, std::string>> NcclRailEnv(
    const std::vector<RailInterface>& rails);

// The knobs recorded with a run: interface selection and the resiliency settings that decide
// how NCCL meets a dead port.
inline constexpr const char* kNcclKnobs[] = {"NCCL_SOCKET_IFNAME",
                                             "NCCL_IB_HCA",
                                             "NCCL_IB_DISABLE",
                                             "NCCL_NET",
                                             "NCCL_IB_TIMEOUT",
                                             "NCCL_IB_RETRY_CNT",
                                             "NCCL_IB_RESILIENCY_PORT_FAILOVER"};

// Sets each of `env` that the environment does not set already (what a user or a job script
// set wins), then returns every kNcclKnobs variable with its value in force, "" for unset.
std::vector<std::pair<std::string, std::string>> ApplyNcclEnv(
    const std::vector<std::pair<std::string, std::string>>& env);

}  // namespace faultline::workload::adapters
