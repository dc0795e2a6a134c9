// FaultDescriptor: everything the runner knows about one fault kind, in one place, and the
// table of every kind. A kind is its injector file (injector/<kind>.cc: apply, revert,
// observe) plus one runner folder (runner/faults/<kind>/: its descriptor), each registered by
// name in an explicit registry (injector/registry.cc and runner/faults/registry.cc). The
// scenario parser, the timeline, the executor, the requirement check and the metrics ask the
// descriptor and never name a kind themselves.
//
// Layering: this header is the core's view of the fault kinds. The core (runner/core/) reads
// the kinds only through it and includes nothing of runner/faults/; the kinds' folders include
// the core (scenario types, YAML reads, timeline actions). FaultDescriptors() is the one
// function of the table that the kinds provide: runner/faults/registry.cc defines it (built
// into the same library, faultline_runner_core), and the lookups below are the core's.
//
// A descriptor is an immutable value; its functions are pure (no I/O). Thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/core/timeline.h"

namespace faultline::runner::faults {

struct FaultYaml;  // runner/core/fault_yaml.h

// What a fault's `target:` names, and so how the executor addresses the injector.
enum class TargetShape {
  kLink,        // a rail port {host, rail, side} (+ rank with nics: per_rank): netns + dev
  kSocketLink,  // the sockets on a rail port {host, rail} (+ rank with nics: per_rank): src
  kRank,        // a rank's process {host, rank}: pid
  kRankPath,    // one rank's connection on a path {host, rank, rail}: the rank's fault hook
};

// How long a fault holds, which decides `for`, Permanent() and the reverts of the timeline.
enum class Hold {
  kFor,          // from `at` for `for`; without `for` until the end of the run (permanent)
  kSchedule,     // along its own schedule from its parameters (link_flap); never permanent
  kRestOfRun,    // until the end of the run; `for` is refused (port_drop)
  kOnce,         // acts once at `at`, nothing to revert (conn_reset, qp_error, conn_corrupt)
  kOnceForGood,  // acts once at `at` and its effect lasts the run (rank_kill)
};

// What a fault does to the network capacity the metrics expect a library to keep
// (metrics.h CapacityLeft).
enum class CapacityEffect {
  kNone,     // nothing lasting (a flap, a one-shot): the fault is left out
  kUnknown,  // an amount the model cannot tell (loss, delay, a paused or killed rank)
  kPort,     // its port keeps `port_share` of its rate
};

struct FaultDescriptor {
  // The kind's name: the YAML `type`, the injector registry's name and the report's `type`.
  std::string_view name;
  TargetShape target = TargetShape::kLink;
  Hold hold = Hold::kFor;
  // The hint of the error for a `for` on a kind that refuses it (hold != kFor).
  std::string_view for_refused_hint;
  // The kind's own YAML keys besides id, type, at, target and for, in the order the
  // "expected one of" hint lists them.
  std::vector<std::string> param_keys;
  // Reads the kind's own keys of `y.node` into `f->params`, reporting every problem through
  // `y.reader` and clearing `*ok` on one. `*ok` arrives false when an earlier part of the
  // fault (at, for, target) failed. Null: the kind has no parameters.
  void (*parse)(FaultYaml& y, FaultSpec* f, bool* ok) = nullptr;
  // The injector parameters of the fault's apply in the registry's spelling, without the
  // target keys the executor resolves (netns, dev, pid, hook, src). `run_seed` seeds the
  // fault's random stream (FaultSeed).
  nlohmann::json (*injector_params)(const FaultSpec& f, uint64_t run_seed) = nullptr;
  // hold == kSchedule: the offset at which the effect is certainly over (LatestEndNs) and the
  // timeline actions (apply/revert pairs built from `base`, in order). Null otherwise.
  int64_t (*schedule_end)(const FaultSpec& f) = nullptr;
  void (*schedule)(const FaultSpec& f, uint64_t run_seed, const TimelineAction& base,
                   std::vector<TimelineAction>* out) = nullptr;
  // Features (scenario.h kKnownRequirements) every fault of this kind needs, in check order.
  std::vector<std::string> requires_features;
  // Why the kind has no effect on a rail whose traffic is RDMA (an inventory rail with
  // `rdma:`): it acts in the kernel's datapath (nftables, qdiscs, kernel sockets), which the
  // NIC bypasses. The scenario parser refuses such a fault there with this reason. Empty: the
  // kind acts on RDMA rails too (link state through netlink, the rank's fault hook, a rank).
  std::string_view rdma_refused;
  // The fault ends its target rank's process (its exit is then not a crash).
  bool kills_rank = false;
  CapacityEffect capacity = CapacityEffect::kNone;
  // capacity == kPort: the share of its port's rate `port_bps` the fault leaves, in [0, 1].
  double (*port_share)(const FaultSpec& f, double port_bps) = nullptr;

  // The target is a rank (kRank, kRankPath) rather than a rail port.
  bool rank_target() const {
    return target == TargetShape::kRank || target == TargetShape::kRankPath;
  }
  // Acts at one instant and has no duration.
  bool one_shot() const { return hold == Hold::kOnce || hold == Hold::kOnceForGood; }
  // `for` is one of its keys.
  bool takes_for() const { return hold == Hold::kFor; }
};

// The table of fault kinds, defined by runner/faults/registry.cc: every kind, in
// documentation order (the order error hints list them in).
const std::vector<const FaultDescriptor*>& FaultDescriptors();
// Null for an unknown name.
const FaultDescriptor* FindFaultDescriptor(std::string_view name);
// REQUIRES: `name` is a registered kind (aborts otherwise: a scenario's kinds are checked).
const FaultDescriptor& DescriptorOf(std::string_view name);
// The names of FaultDescriptors(), in its order.
std::vector<std::string> FaultKindNames();

}  // namespace faultline::runner::faults
