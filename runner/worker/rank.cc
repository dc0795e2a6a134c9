#include "runner/worker/rank.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace faultline::runner {

int Rank::Open() {
  process_start_ns_ = NowNs();
  signal(SIGPIPE, SIG_IGN);  // a dead peer is an error value, never a signal
  const Status st = log_.Open(o_.log_path);
  if (!st.ok()) {
    std::fprintf(stderr, "faultline-worker: %s\n", st.ToString().c_str());
    return kWorkerExitInternal;
  }
  auto adapter = workload::adapters::CreateCclAdapter(o_.ccl);
  if (!adapter.ok()) {
    std::fprintf(stderr, "faultline-worker: %s\n", adapter.status().ToString().c_str());
    return kWorkerExitUsage;
  }
  adapter_ = std::move(adapter).value();
  return kWorkerExitOk;
}

int Rank::Finish(int code) {
  if (watchdog_ != nullptr) {
    // The library's teardown (sockets, threads) is bounded too; the end line is written.
    watchdog_->ArmTeardown(NowNs() + ToNs(o_.timeout + WatchdogGrace(o_.timeout)), code);
    adapter_.reset();
    watchdog_.reset();
  }
  return code;
}

workload::adapters::CclInit Rank::InitOf() const {
  workload::adapters::CclInit init;
  init.rank = o_.rank;
  init.size = o_.size;
  init.bootstrap = o_.bootstrap;
  init.rails = o_.rails;
  init.store_dir = o_.store_dir;
  init.init_timeout = o_.init_timeout;
  init.op_timeout = o_.timeout;
  init.fault_hook = o_.fault_hook;
  return init;
}

int Rank::Join(const workload::adapters::CclInit& init, const workload::OpArgs& args) {
  watchdog_ = std::make_unique<Watchdog>(&log_);
  Status st = Guarded("init", o_.init_timeout, std::nullopt, [&] { return adapter_->Init(init); });
  if (!st.ok()) return Fail("init: " + st.ToString(), NowNs());
  st = Prepare(args);
  if (!st.ok()) return Fail("prepare: " + st.ToString(), NowNs());
  // Joined and prepared: the launch is over for this rank (the runner's launch figure).
  ready_ns_ = NowNs();
  if (!log_.Write(WorkerReadyLine(ready_ns_))) return InternalFailure("cannot write the log");
  return kWorkerExitOk;
}

void Rank::WaitForStart() const {
  if (o_.start_at_ns) SleepUntilNs(*o_.start_at_ns);
}

WorkerHeader Rank::HeaderBase() const {
  WorkerHeader h;
  h.rank = o_.rank;
  h.size = o_.size;
  h.ccl = o_.ccl;
  h.rails = o_.rails;
  h.pid = getpid();
  h.events = adapter_->EmitsEvents();
  h.timeout_ms = o_.timeout.count();
  h.seed = o_.seed;
  const std::vector<int> used = adapter_->RailsUsed(static_cast<int>(o_.rails.size()));
  if (!used.empty()) h.rails_used = used;
  h.ccl_version = adapter_->Version();
  for (const auto& [k, v] : adapter_->Knobs()) h.ccl_knobs[k] = v;
  return h;
}

Status Rank::Guarded(const std::string& what, std::chrono::milliseconds limit,
                     std::optional<WorkerOp> op, const std::function<Status()>& call) {
  const int64_t start = op ? op->start_ns : NowNs();
  watchdog_->Arm(start + ToNs(limit) + ToNs(WatchdogGrace(limit)), what, std::move(op));
  Status st = call();
  watchdog_->Disarm();
  return st;
}

Status Rank::RunCall(const std::string& what, const workload::OpArgs& args,
                     std::optional<WorkerOp> op) {
  return Guarded(what, o_.timeout, std::move(op), [&] { return adapter_->Run(args, o_.timeout); });
}

Status Rank::Prepare(const workload::OpArgs& args) {
  return Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args); });
}

void Rank::Abort(const std::string& why) {
  Guarded("abort", o_.timeout, std::nullopt, [&] {
    adapter_->Abort(why);
    return Status::Ok();
  }).IgnoreError();
}

void Rank::DrainEvents() {
  for (workload::adapters::CclEvent& e : adapter_->DrainEvents()) {
    const std::optional<EventKind> kind = ParseEventKind(e.kind);
    if (!kind) continue;
    CclEvent c;
    c.time_ns = e.time_ns;
    c.rank = o_.rank;
    c.kind = *kind;
    c.path = e.path;
    c.peer = e.peer;
    c.reason = std::move(e.reason);
    log_.Write(WorkerEventLine(c));
    if (sink_) sink_(c);
  }
}

std::vector<int> Rank::Members() const {
  if (!members_.empty()) return members_;
  std::vector<int> members;
  for (int r = 0; r < o_.size; ++r) {
    if (std::find(excluded_.begin(), excluded_.end(), r) == excluded_.end()) members.push_back(r);
  }
  return members;
}

int Rank::ShrinkWithout(const std::vector<int>& lost_ranks, const std::string& what,
                        int64_t failed_ns, const Status& why, int64_t* took_ns) {
  excluded_.insert(excluded_.end(), lost_ranks.begin(), lost_ranks.end());
  for (int r : lost_ranks) members_.erase(std::remove(members_.begin(), members_.end(), r), members_.end());
  std::string lost;
  for (int r : lost_ranks) lost += (lost.empty() ? "" : ", ") + std::to_string(r);
  ShrinkRecord rec;
  rec.rank = o_.rank;
  rec.excluded = excluded_;
  rec.start_ns = NowNs();
  Status st = Guarded("shrink", o_.init_timeout, std::nullopt,
                      [&] { return adapter_->Shrink(lost_ranks, o_.init_timeout); });
  rec.end_ns = NowNs();
  DrainEvents();
  const std::vector<int> members = Members();
  rec.group = static_cast<int>(members.size());
  rec.ok = st.ok();
  if (!st.ok()) rec.error = st.ToString();
  log_.Write(WorkerShrinkLine(rec));
  if (!st.ok()) {
    return Fail(
        what + ": " + why.ToString() + "; shrink without rank " + lost + ": " + st.ToString(),
        failed_ns);
  }
  group_size_ = rec.group;
  group_rank_ =
      static_cast<int>(std::find(members.begin(), members.end(), o_.rank) - members.begin());
  *took_ns = rec.end_ns - rec.start_ns;
  return kWorkerExitOk;
}

Status Rank::GrowWith(const std::string& grow_id, const std::vector<int>& joiners) {
  std::vector<int> members = Members();
  const Status st = Guarded("grow", o_.init_timeout, std::nullopt,
                            [&] { return adapter_->Grow(grow_id, joiners, o_.init_timeout); });
  DrainEvents();
  if (!st.ok()) return st;
  members.insert(members.end(), joiners.begin(), joiners.end());
  SetMembers(members);
  return Status::Ok();
}

Status Rank::JoinGrown(const workload::adapters::CclInit& init, const std::string& grow_id,
                       const std::vector<int>& members) {
  const Status st = Guarded("join", o_.init_timeout, std::nullopt,
                            [&] { return adapter_->JoinGrown(init, grow_id, members); });
  DrainEvents();
  if (!st.ok()) return st;
  SetMembers(members);
  return Status::Ok();
}

void Rank::SetMembers(const std::vector<int>& members) {
  members_ = members;
  excluded_.clear();
  for (int r = 0; r < o_.size; ++r) {
    if (std::find(members.begin(), members.end(), r) == members.end()) excluded_.push_back(r);
  }
  group_size_ = static_cast<int>(members.size());
  group_rank_ =
      static_cast<int>(std::find(members.begin(), members.end(), o_.rank) - members.begin());
}

int Rank::NewBuffers(size_t send_bytes, size_t recv_bytes) {
  if (send_ != nullptr) retired_.push_back(std::move(send_));
  if (recv_ != nullptr) retired_.push_back(std::move(recv_));
  send_ = std::make_unique<AlignedBuffer>(send_bytes);
  recv_ = std::make_unique<AlignedBuffer>(recv_bytes);
  if (send_->data == nullptr || recv_->data == nullptr) {
    return InternalFailure("out of memory for the buffers");
  }
  return kWorkerExitOk;
}

void Rank::LogFailedOp(WorkerOp* op, const Status& st) {
  op->ok = false;
  op->error = st.ToString();
  if (adapter_->ReleasesBuffersOnReturn()) {
    send_->Revoke();
    recv_->Revoke();
  }
  log_.Write(WorkerOpLine(*op));
}

int Rank::Fail(const std::string& message, int64_t first_error_ns) {
  WorkerEnd end;
  end.ok = false;
  end.message = message;
  end.t_ns = NowNs();
  end.first_error_ns = first_error_ns;
  log_.Write(WorkerEndLine(end));
  std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, message.c_str());
  return kWorkerExitCclError;
}

int Rank::FailUnshrinkable(const std::string& what, int64_t failed_ns, const Status& why,
                           int lost) {
  return Fail(
      what + ": " + why.ToString() +
          (lost == o_.rank ? " (this rank was left out: the others lost it and shrink without it)"
                           : " (no shrink: the library names no lost rank)"),
      failed_ns);
}

int Rank::EndWith(int code, const std::string& message) {
  WorkerEnd end;
  end.ok = false;
  end.message = message;
  end.t_ns = NowNs();
  log_.Write(WorkerEndLine(end));
  std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, message.c_str());
  return code;
}

int Rank::InternalFailure(const std::string& message) {
  std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, message.c_str());
  return kWorkerExitInternal;
}

}  // namespace faultline::runner
