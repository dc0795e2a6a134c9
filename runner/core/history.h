// History: everything a run recorded, as plain values. The worker and the executor fill it;
// metrics, checks and the report read it and nothing else. All times are CLOCK_MONOTONIC
// nanoseconds (absolute; shared by every namespace on a host).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/scenario.h"

namespace faultline::runner {

// One collective as seen by one rank.
struct OpRecord {
  int rank = 0;
  int64_t index = 0;  // 0-based, the same on every rank for the same collective
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;  // per-rank message size
  bool ok = true;      // the call returned success
  bool wrong = false;  // checked and the output differs from the known answer
  // Ranks of the group the collective ran in: the world, or fewer after a shrink (policy
  // shrink). Its busbw factor is that group's.
  int group = 0;  // 0: the whole world
  // The training workload restarted by the runner (policy fail_stop): which run of the job
  // (0: the first launch) logged it. A step re-run after a restart is another collective: its
  // index is the step number + incarnation x kIncarnationIndexStride.
  int incarnation = 0;
};

inline constexpr int64_t kIncarnationIndexStride = int64_t{1} << 32;

// A restart of every rank of a training job by the runner (policy fail_stop; adaptive when
// its selector chose fail_stop): the ranks of `incarnation - 1` stopped (a rank exited for a
// restart, or died), the runner killed those still running and started all of them again in
// place from the last checkpoint.
struct RestartRecord {
  int incarnation = 0;        // the incarnation started (1, 2, ...)
  int64_t detected_ns = 0;    // the runner saw the first rank of the old incarnation stop
  int64_t relaunched_ns = 0;  // the new ranks were started (the old ones all gone)
  std::string why;            // every rank seen stopped, and how ("rank 2 killed by SIGKILL; ...")
  // From detected_ns to the first step of the new incarnation starting (process restart,
  // rendezvous, checkpoint load, all executed); absent when it never started a step.
  std::optional<int64_t> cost_ns;
  std::optional<int64_t> resumed_step;  // the step the new incarnation started from
};

// A shrink (policy shrink) as one surviving rank saw it: from the failed collective's return
// to the new group being ready (or the shrink failing).
struct ShrinkRecord {
  int rank = 0;                // the rank's number in the world (never renumbered here)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<int> excluded;   // world ranks left out, this shrink's and earlier ones'
  int group = 0;               // ranks in the new group
  bool ok = true;
  std::string error;           // when !ok
};

// A grow (a rejoin after repair: ftccl Grow) as one rank saw it. A member: from the step at
// which the group agreed to take the ready ranks back to the grown group holding the current
// parameters and step (its stall). A joiner (a rank a shrink had left out): from the moment it
// saw its rail ports all up again (the repair) to the same point (the repair's cost).
struct GrowRecord {
  int rank = 0;                // the rank's number in the world
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<int> joined;     // world ranks that joined
  int group = 0;               // ranks in the grown group
  bool joiner = false;         // this rank is one of `joined`
  bool ok = true;
  std::string error;           // when !ok
};

enum class EventKind {
  kPathDown,
  kMigrated,
  kResumed,  // the first chunk was acknowledged on a surviving path
  kRebalanced,
  kRelayOn,
  kRelayOff,
  kPathUp,
  kFailback,
  kAbort,
};
const char* EventKindName(EventKind k);  // "path_down", "migrated", ...
std::optional<EventKind> ParseEventKind(const std::string& name);

// A CCL event logged by one rank.
struct CclEvent {
  int64_t time_ns = 0;
  int rank = 0;
  EventKind kind = EventKind::kPathDown;
  int path = -1;  // rail index; -1 when the event concerns no single path
  std::string reason;
  int peer = -1;  // global rank at the other end of the path; -1 when none or unknown
};

// What happened to one scenario fault. A link_flap is one record: applied is its first down,
// reverted its last up.
struct FaultRecord {
  std::string id;
  std::string kind = "link_down";  // the scenario fault's kind (runner/faults/registry.h)
  FaultTarget target;
  int64_t scheduled_ns = 0;
  std::optional<int64_t> applied_ns;   // absent: the injector failed to apply it
  std::optional<int64_t> reverted_ns;  // absent: held until the end of the run (or one-shot)
  std::optional<int64_t> observed_ns;  // when the effect was read back from the kernel
  nlohmann::json observed;             // the readings (Fault::Observe), null when none
  std::string error;                   // the injector's error, if any
  // A fault played along its own schedule (link_flap): each cycle's down and up on the
  // runner's clock as applied, beside the times the timeline gave them, so that a report shows
  // the flap that was played (a loaded host may run transitions late, or back to back). Empty
  // for every other fault.
  struct Cycle {
    std::optional<int64_t> down_scheduled_ns;  // absent: the run ended before its time came
    std::optional<int64_t> down_ns;            // absent: this cycle's down was not applied
    std::optional<int64_t> up_scheduled_ns;    // absent: the run ended before its time came
    std::optional<int64_t> up_ns;  // absent: not brought up by its own action (the heal did)
  };
  std::vector<Cycle> cycles;
};

// How one rank's process ended.
enum class RankExit {
  kCompleted,  // every collective returned and the process exited 0
  kError,      // a collective returned an error; the process exited cleanly
  kKilled,     // killed by a rank_kill fault of the scenario
  kCrashed,    // died otherwise (signal, non-zero exit without an error report)
};

struct RankEnd {
  int rank = 0;
  RankExit exit = RankExit::kCompleted;
  std::optional<int64_t> first_error_ns;  // kError: when the first collective failed
  int64_t end_ns = 0;
  // kError: the rank's own watchdog ended it because a library call never returned (a hang
  // of the library, not an error it reported).
  bool watchdog = false;
  // kError: the rank stopped so that every rank is restarted from the last checkpoint
  // (faultline-worker's train workload, exit code 11).
  bool restart = false;
  // The library's own words for the first failure (the failed collective's error), "" when
  // none: what events.jsonl records as the rank's error.
  std::string error = {};
};

// One stop agreement of one rank: the 1-element allreduce (through the library under test)
// with which the ranks of a duration-bound loop agree to stop, between two collectives; timed,
// so that the report shows what it cost.
struct SyncRecord {
  int rank = 0;
  int64_t after_index = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool ok = true;
};

// What a training workload (workload kind torch_ddp) reported at its end: the SHA-256 of its
// final parameters and its last step's loss.
struct TrainResult {
  int rank = 0;
  std::string param_sha256;  // 64 lowercase hex digits
  double loss = 0;
  // faultline-worker's train workload: the steps done, and the samples in the final
  // parameters' lineage (absent in torch logs).
  std::optional<int64_t> steps;
  std::optional<uint64_t> samples;
};

// faultline-worker's train workload (workload kind train): what one rank logged about
// checkpoints, resuming from one, holds (policy wait) and the selector's decisions.
// One checkpoint write, timed; step = steps done when it was taken.
struct CheckpointRecord {
  int rank = 0;
  int64_t step = 0;
  uint64_t samples = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;  // the file's size
  int incarnation = 0;  // filled in by the runner
};
// Resuming from the checkpoint every rank agreed on (load and agreement, timed).
struct ResumeRecord {
  int rank = 0;
  int64_t step = 0;
  uint64_t samples = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int incarnation = 0;  // filled in by the runner
};
// A hold at a step boundary while a path was down (policy wait, or adaptive chose wait).
struct HoldRecord {
  int rank = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool returned = false;  // no rank saw a path down any more within the wait bound
};
// One decision of the recovery-policy selector (policy adaptive), logged by the coordinator.
struct DecisionRecord {
  int rank = 0;
  int64_t t_ns = 0;
  int64_t latency_ns = 0;  // from the gathered state to the decision (steady clock)
  std::string chosen;      // policy::RecoveryPolicyName
  nlohmann::json decision;  // policy::DecisionToJson
};

struct History {
  int world_size = 0;
  CollOp op = CollOp::kAllReduce;
  int64_t run_start_ns = 0;       // the workload's time zero (scenario offsets count from here)
  // When the runner saw the last rank exit (or its watchdog fired): includes the library's
  // teardown, so no metric window ends here (WindowEndNs).
  int64_t run_end_ns = 0;
  bool events_supported = false;  // the CCL emits events (ftccl); false: event metrics are null
  // The rails the library carries data on (worker header); absent when not known.
  std::optional<std::vector<int>> rails_used;
  std::vector<OpRecord> ops;
  std::vector<CclEvent> events;
  std::vector<SyncRecord> syncs;
  std::vector<ShrinkRecord> shrinks;
  std::vector<GrowRecord> grows;  // the train workload's rejoins after repair
  std::vector<TrainResult> results;  // training workloads: one per rank that finished
  std::vector<FaultRecord> faults;
  std::vector<RankEnd> ranks;
  bool watchdog_fired = false;
  std::vector<RestartRecord> restarts;  // the training workload under policy fail_stop
  // Why the runner stopped restarting before its budget was spent ("" when it did not).
  std::string restarts_given_up;
  // faultline-worker's train workload, from every rank and incarnation (rank and incarnation
  // filled in by the runner).
  std::vector<CheckpointRecord> checkpoints;
  std::vector<ResumeRecord> resumes;
  std::vector<HoldRecord> holds;
  std::vector<DecisionRecord> decisions;
};

}  // namespace faultline::runner
