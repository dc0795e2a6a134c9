// The features a scenario's `requires:` names (scenario.h kKnownRequirements), checked on this
// machine before a run starts. A missing feature skips the run with the reason instead of
// failing it halfway. Not thread-safe (the netem probe switches the calling thread's network
// namespace for a moment).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace faultline::runner {

class RequirementChecker final {
 public:
  // `worker_path`: the faultline-worker that would run the ranks.
  explicit RequirementChecker(std::string worker_path) : worker_path_(std::move(worker_path)) {}

  // nullopt when every feature is present; else why the first missing one is missing, e.g.
  // "kernel lacks sch_netem (...)". Each feature is probed once per checker.
  //   sch_netem:  a netem qdisc can be created (a probe in a private network namespace).
  //   fault_hook: the worker serves the fault-hook protocol (injector/FAULT_HOOK.md), which it
  //               announces with a --fault-hook option in its --help.
  std::optional<std::string> Missing(const std::vector<std::string>& features);

 private:
  std::optional<std::string> Probe(const std::string& feature);

  std::string worker_path_;
  std::map<std::string, std::optional<std::string>> cache_;
};

}  // namespace faultline::runner
