// What fault kinds share: the parsing of the common parameter shapes (durations,
// percentages, the peer rank) and small injector parameter and capacity helpers, beside the
// fault entry's reads they share with the scenario parser (runner/core/fault_yaml.h: the keys
// every fault has, `target:`). Used by the descriptors under runner/faults/<kind>/. Pure
// functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/fault_kind.h"
#include "runner/core/fault_yaml.h"
#include "runner/core/scenario.h"

namespace faultline::runner::faults {

// The hint for a `for` on a kind that acts once.
inline constexpr std::string_view kActsOnceHint = "this fault acts once, at 'at'";

// FaultDescriptor::rdma_refused of the kinds that act in the kernel's datapath.
inline constexpr std::string_view kNftablesBypassedByRdma =
    "it drops packets with nftables in the kernel, and the NIC moves RDMA traffic past the "
    "kernel, so it would have no effect";
inline constexpr std::string_view kQdiscBypassedByRdma =
    "it acts through a qdisc on the netdev, and the NIC moves RDMA traffic past the kernel's "
    "qdiscs, so it would have no effect";
inline constexpr std::string_view kSocketsBypassedByRdma =
    "it destroys kernel TCP sockets, and an RDMA rail's connections are queue pairs in the "
    "NIC, not sockets, so it would have no effect";

// `key` of the fault as a duration into `*out` when present; a missing required key or a bad
// value is reported and clears `*ok`.
void ReadDuration(FaultYaml& y, const char* key, bool required, int64_t* out, bool* ok);
// `percent` of the fault, the same way.
void ReadPercent(FaultYaml& y, bool required, double* out, bool* ok);
// The required `peer` (a global rank other than the target's) into `*out`.
void ReadPeer(FaultYaml& y, const FaultSpec& f, int* out, bool* ok);

// {"side": "host"|"switch"} of a link fault.
nlohmann::json SideParams(const FaultSpec& f);
// {"delay", "jitter"} of the netem delay kinds (delay, jitter): their injector parameters.
nlohmann::json DelayJitterParams(const FaultSpec& f, uint64_t seed);
// port_share of a fault that takes its port out entirely.
double NoShareLeft(const FaultSpec& f, double port_bps);

}  // namespace faultline::runner::faults
