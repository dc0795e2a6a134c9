// Timeline: what the nemesis must do and when, as a pure function of a validated scenario and
// a seed. Building it does no I/O and reads no clock: the same (scenario, seed) always gives
// the same actions, so a run is reproducible and the timeline is testable on its own.
//
// Each fault becomes an "apply" action at its `at` and, when it ends inside the run, a
// "revert" action, with the parameters its kind's descriptor maps (runner/faults/). A kind
// with its own schedule builds its actions itself: a link_flap is expanded into `count`
// link_down apply/revert pairs whose periods carry a seeded uniform jitter in
// [-jitter, +jitter] (the random stream is derived from the seed and the fault id, so adding
// a fault never changes another fault's jitter).
// Faults that last until the end of the run (port_drop, rank_kill, steady faults without
// `for`) have no revert action: the executor heals them at the end of the run. One-shot
// faults (conn_reset, conn_corrupt, qp_error, rank_kill) have only an apply. Thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/core/scenario.h"

namespace faultline::runner {

enum class ActionType { kApply, kRevert };
const char* ActionTypeName(ActionType t);  // "apply", "revert"

struct TimelineAction {
  int64_t at_ns = 0;       // offset from the start of the workload, jitter included
  int64_t nominal_ns = 0;  // the same without jitter
  ActionType type = ActionType::kApply;
  std::string fault_id;
  std::string kind = "link_down";  // the scenario's kind
  // The injector kind to create (registry name). A link_flap's cycles are link_down.
  std::string injector_kind;
  int cycle = 0;  // link_flap: 0-based cycle; otherwise 0
  FaultTarget target;
  // Injector parameters in the registry's spelling (units as strings, e.g. "200ms"), without
  // the target keys (netns, dev, pid, hook, peer address): the executor resolves those from
  // the topology. Empty for a revert.
  nlohmann::json params = nlohmann::json::object();

  nlohmann::json ToJson() const;
};

struct Timeline {
  uint64_t seed = 0;
  // Sorted by at_ns; at equal times reverts come before applies, then file order.
  std::vector<TimelineAction> actions;
};

// The seed of fault `fault_id`'s random stream (jitter, loss pattern) in a run seeded `seed`.
uint64_t FaultSeed(uint64_t seed, const std::string& fault_id);

// REQUIRES: `scenario` came out of ParseScenario without diagnostics.
Timeline BuildTimeline(const Scenario& scenario, uint64_t seed);

}  // namespace faultline::runner
