// Injection: drives one Fault through journal -> apply -> observe -> revert -> observe and
// records scheduled, applied and observed times (CLOCK_MONOTONIC ns) for each step.
//
// Arm() prepares the fault and durably journals its undo before anything changes; the entry
// is removed only after a successful Revert. Destroying an applied, unreverted Injection
// reverts it (noexcept; a failed revert leaves the journal entry for `faultline cleanup`).
// Not thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "injector/fault.h"

namespace faultline {

class Journal;
class TargetPolicy;

struct StepTiming {
  MonoNs scheduled = 0;  // when the step was meant to happen
  MonoNs applied = 0;    // when the kernel call started
  MonoNs returned = 0;   // when the kernel call returned (call latency = returned - applied)
  MonoNs observed = 0;   // when the effect was read back from the kernel
  nlohmann::json observation;
  nlohmann::json ToJson() const;
};

class Injection final {
 public:
  // Prepares `fault`, checks the policy and journals the undo (fsynced). Nothing applied yet.
  static Result<std::unique_ptr<Injection>> Arm(std::unique_ptr<Fault> fault, Journal* journal,
                                                const TargetPolicy& policy);
  ~Injection();
  Injection(const Injection&) = delete;
  Injection& operator=(const Injection&) = delete;

  // Sleeps until `scheduled` (absolute; 0 = now), applies and observes. For steady faults an
  // observation that does not show the effect is an error (kInternal, "not observed").
  Status ApplyAt(MonoNs scheduled = 0);
  // Sleeps until `scheduled`, reverts, observes and removes the journal entry.
  Status RevertAt(MonoNs scheduled = 0);

  bool applied() const { return applied_; }
  bool reverted() const { return reverted_; }
  const std::string& journal_id() const { return journal_id_; }
  Fault& fault() { return *fault_; }
  const StepTiming& apply_timing() const { return apply_; }
  const StepTiming& revert_timing() const { return revert_; }
  // {"kind", "params", "journal_id", "apply": {...}, "revert": {...}}.
  nlohmann::json ToJson() const;

 private:
  Injection(std::unique_ptr<Fault> fault, Journal* journal, std::string id)
      : fault_(std::move(fault)), journal_(journal), journal_id_(std::move(id)) {}
  std::unique_ptr<Fault> fault_;
  Journal* journal_;
  std::string journal_id_;
  bool applied_ = false;
  bool apply_attempted_ = false;
  bool reverted_ = false;
  StepTiming apply_;
  StepTiming revert_;
};

}  // namespace faultline
