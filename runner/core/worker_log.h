// The worker's per-rank log: JSON lines, one object per line, each written with one write(2)
// so that a rank killed at any moment leaves a valid prefix (at worst a cut-off last line).
//
//   {"type":"header","schema":"faultline.worker/v1","rank","size","ccl","op","dtype","redop",
//    "root","bytes","count","busbw_factor","rails":[...],"pid","check","events","warmup",
//    "iters"|null,"duration_ns"|null,"timeout_ms","seed"}
//   {"type":"op","index","start_ns","end_ns","bytes","ok","wrong"(elements; null unchecked),
//    "warmup","error"(only when !ok)}
//   {"type":"event","t_ns","kind","path","reason"}
//   {"type":"result","param_sha256","loss"[,"steps","samples"]}  (training workloads, before
//    the end line; steps and samples: faultline-worker's train workload)
//   {"type":"stats","t_ns","counters":{name:number}}  (a CCL that keeps counters,
//    CclAdapter::Stats; written once, after the final barrier, before a successful end)
//   {"type":"end","status":"ok"|"error","message","t_ns","first_error_ns"|null[,"watchdog":true]
//    [,"restart":true]}
//
// faultline-worker's train workload ("workload":"train") adds to the header
// "train":{"steps","batch","compute_ms","grad_bytes","checkpoint_every","policy","incarnation",
// "wait_bound_ms","start_step"}, to each op line (one per training step, index = the global
// step) "compute_ns", and the lines
//   {"type":"checkpoint","step"(steps done),"samples","start_ns","end_ns","bytes"}
//   {"type":"resume","step","samples","start_ns","end_ns"}
//   {"type":"hold","start_ns","end_ns","returned":bool}
//   {"type":"decision","t_ns","latency_ns","decision":{policy::DecisionToJson}}  (coordinator)
//
// A training workload (torch_ddp, written by integrations/torch/python/faultline_torch) logs
// one "op" per training step, with the bytes of the gradients it allreduces, and says
// "workload":"torch_ddp" in its header.
//
// Times are absolute CLOCK_MONOTONIC nanoseconds. `bytes` is the nccl-tests size of the
// collective (the larger buffer of one rank, workload::SizeLayout::bytes) and `count` its
// element count argument. Op indices start at 0 with the warm-up and are the same on every
// rank for the same collective.
//
// The line builders and the reader are pure (LoadWorkerLog only reads its file); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/core/history.h"

namespace faultline::runner {

inline constexpr char kWorkerLogSchema[] = "faultline.worker/v1";

// The train workload's parameters (faultline-worker --workload train).
struct TrainHeader {
  int64_t steps = 0;  // training steps of the whole job
  int64_t batch = 0;  // samples per rank per step
  int64_t compute_ms = 0;
  uint64_t grad_bytes = 0;
  int64_t checkpoint_every = 0;  // 0: never
  std::string policy;
  int64_t incarnation = 0;
  int64_t wait_bound_ms = 0;
  int64_t start_step = 0;  // the step this incarnation started from (after resuming)
};

struct WorkerHeader {
  int rank = 0;
  int size = 0;
  std::string ccl;    // "ftccl", "gloo"
  std::string op;     // workload::CollName
  std::string dtype;  // workload::DTypeName
  std::string redop;  // workload::RedOpName ("none" for collectives without a reduction)
  int root = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  double busbw_factor = 0;
  std::vector<std::string> rails;
  int64_t pid = 0;
  bool check = false;
  bool events = false;  // the CCL emits events; false: event metrics are null
  int64_t warmup = 0;
  std::optional<int64_t> iters;  // exactly one of iters / duration_ns
  std::optional<int64_t> duration_ns;
  int64_t timeout_ms = 0;
  uint64_t seed = 0;
  // The rails (indices into `rails`) the library carries data on; absent when the library
  // chooses its interfaces itself (CclAdapter::RailsUsed).
  std::optional<std::vector<int>> rails_used;
  std::string ccl_version;  // as the library reports it; "" when it reports none
  // The library's settings in force (CclAdapter::Knobs): name -> value, "" for unset. Not
  // written when empty.
  std::map<std::string, std::string> ccl_knobs;
  std::string workload = "collectives";  // "collectives", "train" (faultline-worker), "torch_ddp"
  std::optional<TrainHeader> train;      // workload "train" only
};

struct WorkerOp {
  int64_t index = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  bool ok = true;
  std::optional<uint64_t> wrong;  // wrong elements; absent when not checked (or failed)
  bool warmup = false;
  std::string error;  // when !ok
  int group = 0;      // ranks of the group after a shrink; 0: the world (not written)
  std::optional<int64_t> compute_ns;  // train workload: the step's compute phase
};

struct WorkerEnd {
  bool ok = true;
  std::string message;
  int64_t t_ns = 0;
  std::optional<int64_t> first_error_ns;  // when the first CCL call failed
  bool watchdog = false;  // the worker's watchdog ended the process: a call never returned
  bool restart = false;   // the rank stopped so that the runner restarts every rank (exit 11)
};

// One line each, with the trailing newline.
std::string WorkerHeaderLine(const WorkerHeader& h);
// {"type":"ready","t_ns":...}: the rank joined its group and is ready for its workload.
std::string WorkerReadyLine(int64_t t_ns);
std::string WorkerOpLine(const WorkerOp& op);
std::string WorkerEventLine(const CclEvent& e);
// {"type":"shrink","start_ns","end_ns","excluded":[...],"group":N,"ok":bool[,"error"]}
std::string WorkerShrinkLine(const ShrinkRecord& s);
// {"type":"grow","start_ns","end_ns","joined":[...],"group":N,"joiner":bool,"ok":bool[,"error"]}
std::string WorkerGrowLine(const GrowRecord& g);
std::string WorkerEndLine(const WorkerEnd& end);
std::string WorkerStatsLine(int64_t t_ns, const std::map<std::string, uint64_t>& counters);
std::string WorkerSyncLine(const SyncRecord& sync);       // rank is the header's
std::string WorkerResultLine(const TrainResult& result);  // rank is the header's
// The train workload's lines (rank is the header's).
std::string WorkerCheckpointLine(const CheckpointRecord& c);
std::string WorkerResumeLine(const ResumeRecord& r);
std::string WorkerHoldLine(const HoldRecord& h);
std::string WorkerDecisionLine(const DecisionRecord& d);

// One rank's log as the runner's history types.
struct WorkerLog {
  WorkerHeader header;
  std::vector<OpRecord> ops;          // in log order; rank filled from the header
  std::vector<CclEvent> events;       // rank filled from the header
  std::vector<SyncRecord> syncs;      // rank filled from the header
  std::vector<ShrinkRecord> shrinks;  // rank filled from the header
  std::vector<GrowRecord> grows;      // rank filled from the header
  std::optional<TrainResult> result;  // rank filled from the header
  // The train workload's lines, rank filled from the header.
  std::vector<CheckpointRecord> checkpoints;
  std::vector<ResumeRecord> resumes;
  std::vector<HoldRecord> holds;
  std::vector<DecisionRecord> decisions;
  // When the rank had joined its group and was ready for its workload ("ready" line, the
  // worker's own clock); absent from workers that do not write it (the torch workload).
  std::optional<int64_t> ready_ns;
  // The CCL's counters after the final barrier ("stats" line); absent when not written.
  std::optional<std::map<std::string, uint64_t>> stats;
  // Absent when the worker never wrote its end line (killed or crashed); the runner decides
  // which from the process status.
  std::optional<RankEnd> end;
  std::string end_message;
  bool restart = false;         // the end line asked for a restart of every rank (end->restart)
  std::string first_error;      // the error of the first failed op, if any
  uint64_t wrong_elements = 0;  // summed over checked ops
  bool truncated = false;       // the last line was cut off and ignored
};

// Parses a log's text; `name` names it in errors. A last line without its newline that is not
// a complete JSON object is ignored (truncated = true); any other malformed line, a missing or
// misplaced header, or an unknown line type is kInvalidArgument naming the line.
Result<WorkerLog> ParseWorkerLog(std::string_view text, const std::string& name);
// Reads and parses the file at `path` (kNotFound when it cannot be read).
Result<WorkerLog> LoadWorkerLog(const std::string& path);

// Moves every point in time of `log` (not its durations) from the rank's host clock to the
// runner's, where host clock = runner clock + offset_ns (a fleet run: the offset its host's
// agent measured, runner/exec/agent_client.h). The header's own fields are left as written.
void MapWorkerLogToRunnerClock(WorkerLog* log, int64_t offset_ns);

}  // namespace faultline::runner
