// Invariants every run of a campaign must keep, each a named checker over the run's directory
// (report.json, events.jsonl, timeseries.csv, ranks/rank<N>.jsonl, scenario.yaml) and, for
// "nothing left behind", a snapshot of the machine after the run. A fault space switches each
// one on or off (FaultSpace::invariants).
//
//   exact_results        results were checked and none was wrong (report.json correctness).
//   no_silent_hang       the outcome is neither hung nor crashed (an error that did not
//                        reach every rank), every rank not killed by the scenario wrote
//                        its end, and every collective ended (success or error) within the
//                        abort bound; a rank ended by its own watchdog is a hang.
//   liveness_after_heal  for a CCL whose traits claim failover, and a run whose faults all
//                        heal: within `within` of the last heal, busbw over a window of at
//                        least kLivenessWindowNs of collectives is back to `pct` % of the
//                        baseline (timeseries.csv; report.json baseline_busbw_gbps).
//                        With liveness stall_x set, also a stall bound: from the first fault's
//                        application to the last heal, at times when every pair of ranks keeps
//                        a path (a rail without a link-level fault on either end; with
//                        nics: per_rank and a CCL that relays within a host, also a rank
//                        without ports through a neighbour's), no interval between
//                        completed collectives is longer than stall_plus + stall_x x the
//                        baseline median collective time (collectives before the first fault).
//   lossless             for a CCL that exports per-peer chunk counters (ftccl: the "stats"
//                        line of each rank's log) and a run in which every rank completed:
//                        for every ordered pair of ranks, the chunks the sender numbered for
//                        the receiver equal the chunks the receiver accepted from it (more:
//                        a chunk taken twice; fewer: one lost).
//   ccl_sequence         ftccl's own sequence invariants where exported, same condition: each
//                        receiver's cumulative acknowledgement covers every chunk it accepted
//                        (nothing accepted above a hole at the end), and no sender believes
//                        more acknowledged than it numbered or than the receiver acknowledged.
//                        (ftccl has no flow-control credits to check.)
//   nothing_left_behind  no namespace (fl-<run id>-*), journal entry naming the run id,
//                        faultline-worker process naming the run's directory, root-namespace
//                        link naming the run id, or nft table of this process in the root
//                        namespace (faultline_<kind>_<pid>_*) remains.
//
// The checkers are pure functions of a RunView and a HostState, unit-tested on hand-made
// directories; LoadRunView and ReadHostState do the reading. Thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/history.h"
#include "runner/core/scenario.h"
#include "reports/run_data.h"
#include "runner/explore/fault_space.h"

namespace faultline::runner::explore {

inline constexpr int64_t kLivenessWindowNs = 200'000'000;

enum class Verdict { kPass, kFail, kNotApplicable };
const char* VerdictString(Verdict v);  // "pass", "fail", "n/a"

struct InvariantResult {
  std::string name;
  Verdict verdict = Verdict::kPass;
  std::string detail;  // why it failed, or why it does not apply; may be empty on a pass
  nlohmann::json ToJson() const;
};

// One rank's log, as far as the checkers need it.
struct RankView {
  int rank = 0;
  std::string file;
  std::string error;  // the log could not be read or parsed
  std::optional<RankEnd> end;
  std::vector<OpRecord> ops;
  std::optional<std::map<std::string, uint64_t>> stats;  // the CCL's counters, if written
};

// What a run left in its directory. A missing or unreadable part leaves its error.
struct RunView {
  std::string dir;
  std::optional<nlohmann::json> report;
  std::string report_error;
  std::optional<Scenario> scenario;  // scenario.yaml as the run copied it
  std::vector<reports::SeriesPoint> series;  // timeseries.csv (reports' parser)
  std::string series_error;
  std::vector<RankView> ranks;
};
RunView LoadRunView(const std::string& dir);

// The machine after a run, as far as "nothing left behind" looks.
struct HostState {
  std::vector<std::string> netns;             // /run/netns
  std::vector<std::string> journal_entries;   // the text of every journal file
  std::vector<std::string> process_cmdlines;  // faultline-worker processes, argv joined by ' '
  std::vector<std::string> root_links;        // /sys/class/net
  std::vector<std::string> nft_tables;        // `nft list tables` of the root namespace
  int pid = 0;                                // this process (the nft tables' owner)
};
// Reads it (journal: FAULTLINE_JOURNAL_DIR or the default).
HostState ReadHostState();

InvariantResult CheckExactResults(const RunView& run);
InvariantResult CheckNoSilentHang(const RunView& run, const InvariantSettings& s);
InvariantResult CheckLivenessAfterHeal(const RunView& run, const InvariantSettings& s);
InvariantResult CheckLossless(const RunView& run);
InvariantResult CheckCclSequence(const RunView& run);
InvariantResult CheckNothingLeftBehind(const RunView& run, const HostState& host);

// The names of the invariants, in the order they are checked.
const std::vector<std::string>& InvariantNames();

// Every invariant the settings switch on, in InvariantNames order. `host` is read only when
// nothing_left_behind is on (call ReadHostState after the run has ended).
std::vector<InvariantResult> CheckInvariants(const RunView& run, const InvariantSettings& s,
                                             const HostState* host);

}  // namespace faultline::runner::explore
