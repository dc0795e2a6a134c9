// Shrinking a failing run to a small one that still fails. First delta debugging (Zeller's
// ddmin) over the run's faults, then, for each fault left, one simplification at a time:
// halve its length (a flap: its count, then its down and up times), move it earlier (halfway
// to the earliest start), pick a simpler target (host 0, rail 0, the host side). A candidate
// replaces the current run only when it keeps the space's rules (`fits`) and still fails; a
// way of simplifying that once gave a passing candidate is not tried on that fault again.
//
// Whether a candidate fails is the caller's predicate (a campaign re-runs it and confirms the
// failure k of n times, ConfirmKOfN); the shrinker never runs anything itself, so it is
// unit-tested with a fake predicate. A candidate already answered is not asked again. Not
// thread-safe.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/explore/generator.h"

namespace faultline::runner::explore {

enum class CandidateVerdict { kFails, kPasses, kOutOfBudget };

// The answer for one candidate (its faults, by start time).
using ShrinkPredicate = std::function<CandidateVerdict(const std::vector<GenFault>&)>;
// Whether a candidate may be run at all (the space's rules: FitsSpace).
using ShrinkFits = std::function<bool(const std::vector<GenFault>&)>;

struct ShrinkLimits {
  int64_t earliest_ns = 0;            // a fault moves no earlier than this
  int64_t min_length_ns = 50'000'000;  // a fault is not shortened below this
  int max_candidates = 200;           // the predicate is asked at most this often
};

// One candidate the shrinker tried.
struct ShrinkStep {
  std::string action;  // "ddmin: keep f0 f2", "f0: halve length", ...
  std::vector<GenFault> faults;
  bool failed = false;    // the predicate said it fails
  bool accepted = false;  // it became the current run
  nlohmann::json ToJson() const;
};

struct ShrinkResult {
  std::vector<GenFault> minimal;
  std::vector<ShrinkStep> steps;  // in the order tried
  int asked = 0;                  // how often the predicate was asked
  bool out_of_budget = false;     // stopped early: the predicate ran out of budget
};

// REQUIRES: `failing` fails (the caller has confirmed it).
ShrinkResult Shrink(const std::vector<GenFault>& failing, const ShrinkPredicate& fails,
                    const ShrinkFits& fits, const ShrinkLimits& limits);

// The topology and message size a shrunk run uses (the space's scenario gives the start).
struct TopologyShape {
  int hosts = 0;
  int ranks_per_host = 0;
  int rails = 0;
  uint64_t bytes = 0;
  bool operator==(const TopologyShape&) const = default;
  std::string Describe() const;  // "2 hosts x 1 rank, 2 rails, 1048576 B"
};

// One candidate of topology shrinking.
struct TopologyStep {
  std::string action;  // "halve the message to 524288 B", "1 rank per host", ...
  TopologyShape shape;
  bool failed = false;  // the predicate said it fails (and it became the current shape)
  nlohmann::json ToJson() const;
};

struct TopologyShrinkResult {
  TopologyShape minimal;
  std::vector<TopologyStep> steps;
  bool out_of_budget = false;
};

using TopologyPredicate = std::function<CandidateVerdict(const TopologyShape&)>;

// After the faults are shrunk: fewer ranks per host (to 1), fewer hosts (down to 2, never
// below a host a fault targets + 1), fewer rails (down to 1, never below a targeted rail + 1),
// then the message halved down to `min_bytes`, one candidate at a time; a candidate that still
// fails becomes the current shape, one that passes ends that way of shrinking. At most
// `max_candidates` are asked. Not thread-safe; pure apart from the predicate.
TopologyShrinkResult ShrinkTopology(const TopologyShape& start, const std::vector<GenFault>& faults,
                                    const TopologyPredicate& fails, int max_candidates,
                                    uint64_t min_bytes = 4096);

// k of n: runs `run_fails` until k of its answers were "fails" (true) or that can no longer
// happen; `runs` gets how many it ran. REQUIRES: 1 <= k <= n.
bool ConfirmKOfN(const std::function<bool()>& run_fails, int k, int n, int* runs);

}  // namespace faultline::runner::explore
