// What a campaign did (CampaignRecord) and its three files: campaign.json (every run: index,
// seed, file, outcome, invariant results; the shrink steps), campaign.html (self-contained:
// no script, no external request, every text escaped) and junit.xml (one testcase per run
// and invariant; a violation is a failure, an invariant that does not apply is skipped, a
// run that could not be run is an error). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/explore/generator.h"
#include "runner/explore/invariants.h"
#include "runner/explore/shrink.h"
#include "runner/explore/sweep.h"

namespace faultline::runner::explore {

inline constexpr const char* kCampaignSchema = "faultline.campaign/v1";

struct RunRecord {
  int64_t index = 0;
  std::string file;  // the generated scenario
  std::string dir;   // its run directory
  std::string outcome;
  int exit_code = 0;  // of the run (faultline run's codes)
  double seconds = 0;
  double started_s = 0;  // when it started, in seconds from the campaign's start
  std::vector<GenFault> faults;
  std::vector<InvariantResult> invariants;
  std::string error;                  // the run could not be run or judged (a harness error)
  std::optional<double> stall_ms;     // report.json metrics.stall_ms
  std::optional<double> sweep_value;  // a sweep's run: the swept parameter's value
  // The first invariant that failed; empty when none did.
  std::string Violation() const;
};

struct ShrinkRecord {
  int64_t from_index = 0;
  std::string invariant;        // what the shrinking keeps failing
  bool confirmed = false;       // the original failed k of n times
  int confirm_runs = 0;         // runs spent confirming the original
  ShrinkResult result;
  std::optional<TopologyShrinkResult> topology;  // after the faults: fewer hosts, ...
  int runs = 0;                 // every run the shrinking made, confirmation included
  std::string minimal_file;     // minimal.yaml
  int64_t minimal_failed = 0;   // the minimal file's k-of-n tally ...
  int64_t minimal_runs = 0;     // ... over this many runs
};

struct CampaignRecord {
  std::string space_file;
  std::string space_sha256;
  std::string space_name;
  std::string ccl;
  std::string version;  // faultline's and the ccl's, as the first run reported them
  // The rank program every run used: the campaign's own copy (OUT/bin) of `worker_source`,
  // made at its start, and that copy's sha256 (empty: none was pinned).
  std::string worker_source;
  std::string worker_sha256;
  uint64_t seed = 0;
  int confirm_k = 2;
  int confirm_n = 3;
  int jobs = 1;  // runs at once (--jobs); shrinking's runs are one at a time
  std::vector<std::string> invariants_on;
  std::vector<RunRecord> runs;
  std::optional<ShrinkRecord> shrink;  // the confirmed violation, shrunk
  // Violations that failed fewer than k of n runs (flaky: not a violation of the campaign;
  // their run's failed invariants are skipped testcases in junit.xml).
  std::vector<ShrinkRecord> unconfirmed;
  std::optional<SweepSpec> sweep;  // a sweep (sweep.h), not a search
  std::string stop_reason;         // "runs", "budget", "violation", "interrupted", "harness error"
  int exit_code = 0;
  double seconds = 0;
};

nlohmann::json CampaignJson(const CampaignRecord& c);
std::string CampaignHtml(const CampaignRecord& c);
std::string CampaignJunit(const CampaignRecord& c);

}  // namespace faultline::runner::explore
