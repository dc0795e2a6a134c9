// Fault: one kind of fault as a small uniform unit (apply, revert, observe).
//
// A Fault is built from a typed parameter struct (each kind's header) or from JSON parameters
// through the registry (registry.h). Lifecycle, driven by Injection (injection.h):
//   Prepare  checks the target against the policy and the kernel, captures the state that
//            Revert restores and returns the undo record; it changes nothing.
//   Apply    makes the change (called at the scheduled time; must be quick).
//   Observe  reads the effect back from the kernel (never from bookkeeping).
//   Revert   restores the captured state.
// Not thread-safe; one thread drives a Fault.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace faultline {

class TargetPolicy;

class Fault {
 public:
  virtual ~Fault() = default;

  virtual std::string_view Kind() const = 0;
  // The parameters, for records and reports.
  virtual nlohmann::json Params() const = 0;

  // REQUIRES: called once, before Apply.
  virtual Result<nlohmann::json> Prepare(const TargetPolicy& policy) = 0;
  // `scheduled` is the absolute time the caller aimed at (faults with an internal schedule,
  // such as link_flap, time their later steps from it).
  virtual Status Apply(MonoNs scheduled) = 0;
  // REQUIRES: Apply succeeded (or partially ran). Idempotent.
  virtual Status Revert() = 0;
  // {"in_effect": bool, ...kind-specific readings...}.
  virtual Result<nlohmann::json> Observe() = 0;

  // Steady faults hold an effect between Apply and Revert: after Apply Observe must report
  // in_effect, after Revert it must not. One-shot faults (flap, kill, reset, hook) do not.
  virtual bool Steady() const { return true; }
};

}  // namespace faultline
