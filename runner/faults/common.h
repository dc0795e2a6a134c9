// What fault kinds share: the parsing of `target:` and of the common parameter shapes
// (durations, percentages, the peer rank), the keys every fault has, and small injector
// parameter and capacity helpers. Used by the descriptors under runner/faults/<kind>/ and by
// the scenario parser. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runner/faults/fault_descriptor.h"
#include "runner/core/scenario.h"
#include "runner/core/yaml_reader.h"

namespace faultline::runner::faults {

// One fault's entry while it is parsed.
struct FaultYaml {
  YamlReader& reader;
  const YAML::Node& node;    // the fault's mapping
  const std::string& what;   // "fault 'f1'", for messages
  const Scenario& scenario;  // topology, and whether it validated:
  bool topology_ok = false;
};

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

// The keys a fault of `d` may carry besides `for` where `d` refuses it: id, type, at,
// target, then `for` (held kinds) and the kind's own keys.
std::vector<std::string> FaultKeys(const FaultDescriptor& d);

// The hint for a missing `target:` of a fault with this target shape.
std::string TargetHint(TargetShape shape);

// Parses `n` (a fault's `target:`) into `f->target` for a kind of `shape` against
// `y.scenario`'s topology: host, then rank (rank targets; link targets with nics: per_rank,
// marking `port`), rail (link and path targets) and side (kLink). False after any error.
bool ParseTarget(FaultYaml& y, const YAML::Node& n, TargetShape shape, FaultSpec* f);

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
