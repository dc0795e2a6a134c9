#include "runner/worker/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "base/ifaddr.h"
#include "injector/netlink.h"
#include "runner/core/worker_log.h"
#include "runner/policy/cost_model.h"
#include "runner/worker/train_model.h"
#include "workload/adapters/ccl_adapter.h"
#include "workload/check_values.h"

namespace faultline::runner {
namespace {

using workload::adapters::CclAdapter;
using workload::adapters::CclInit;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The interfaces of this rank's rails (each an IPv4 address, found on the interface that holds
// it, or an interface name), as the kernel lists them now; a rail found nowhere is left out.
std::vector<std::string> RailInterfaces(const std::vector<std::string>& rails) {
  std::vector<std::string> names;
  for (const std::string& rail : rails) {
    if (auto dev = InterfaceWithIpv4(rail); dev.ok()) {
      names.push_back(*dev);
    } else if (InterfaceIpv4(rail).ok()) {
      names.push_back(rail);
    }
  }
  return names;
}

// The log file: every line is one write(2), so a killed worker leaves whole lines behind.
class LogFile final {
 public:
  LogFile() = default;
  ~LogFile() {
    if (fd_ >= 0) close(fd_);
  }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  Status Open(const std::string& path) {
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) return ErrnoStatus("open " + path, errno);
    return Status::Ok();
  }

  // Writes one line; false when the file refused it.
  bool Write(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    return WriteLocked(line);
  }

  // Writes the last lines and ends the process with `code` (the watchdog's way out). The lock
  // is held until _exit, so no other line follows.
  [[noreturn]] void WriteAndExit(const std::vector<std::string>& lines, int code) {
    mu_.lock();
    for (const std::string& line : lines) WriteLocked(line);
    _exit(code);
  }

 private:
  bool WriteLocked(const std::string& line) {
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      left -= static_cast<size_t>(n);
    }
    return true;
  }

  int fd_ = -1;
  std::mutex mu_;
};

// Ends the process when an armed call outlives its deadline: logs the call as failed (an op
// line for a collective), the end line, and exits with kWorkerExitCclError.
class Watchdog final {
 public:
  explicit Watchdog(LogFile* log) : log_(log), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // `what` names the call; `op` is the collective's line to complete, if it is one.
  void Arm(int64_t deadline_ns, std::string what, std::optional<WorkerOp> op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      armed_ = true;
      deadline_ns_ = deadline_ns;
      what_ = std::move(what);
      op_ = std::move(op);
      teardown_exit_.reset();
    }
    cv_.notify_all();
  }

  // Guards the teardown after the end line was written: on expiry only exits with `code`.
  void ArmTeardown(int64_t deadline_ns, int code) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      armed_ = true;
      deadline_ns_ = deadline_ns;
      what_ = "teardown";
      op_.reset();
      teardown_exit_ = code;
    }
    cv_.notify_all();
  }

  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      const int64_t now = NowNs();
      if (now < deadline_ns_) {
        cv_.wait_for(lock, std::chrono::nanoseconds(deadline_ns_ - now));
        continue;
      }
      if (teardown_exit_) {
        std::fprintf(stderr, "faultline-worker: the library's teardown did not end in time\n");
        _exit(*teardown_exit_);
      }
      const std::string error = "worker deadline: " + what_ +
                                " did not return by its deadline plus grace (the library did "
                                "not honour it)";
      std::vector<std::string> lines;
      if (op_) {
        WorkerOp op = *op_;
        op.end_ns = now;
        op.ok = false;
        op.wrong.reset();
        op.error = error;
        lines.push_back(WorkerOpLine(op));
      }
      WorkerEnd end;
      end.ok = false;
      end.message = error;
      end.t_ns = now;
      end.first_error_ns = now;
      end.watchdog = true;
      lines.push_back(WorkerEndLine(end));
      std::fprintf(stderr, "faultline-worker: %s\n", error.c_str());
      log_->WriteAndExit(lines, kWorkerExitCclError);
    }
  }

  LogFile* log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  int64_t deadline_ns_ = 0;
  std::string what_;
  std::optional<WorkerOp> op_;
  std::optional<int> teardown_exit_;
  std::thread thread_;  // last: starts once the members above exist
};

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes)
      : rounded(std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096)) {
    data = std::aligned_alloc(4096, rounded);
    if (data != nullptr) std::memset(data, 0, rounded);  // touch every page before the loop
  }
  ~AlignedBuffer() {
    if (revoked) mprotect(data, rounded, PROT_READ | PROT_WRITE);
    std::free(data);
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  // Any later access is a SIGSEGV (until the destructor gives the pages back to the heap).
  void Revoke() { revoked = data != nullptr && mprotect(data, rounded, PROT_NONE) == 0; }
  const size_t rounded;
  void* data = nullptr;
  bool revoked = false;
};

int64_t ToNs(std::chrono::milliseconds d) { return static_cast<int64_t>(d.count()) * 1000000; }

// The worker's state for one run.
class Worker final {
 public:
  explicit Worker(const WorkerOptions& o) : o_(o) {}

  int Run() {
    const int code = RunToEnd();
    if (watchdog_ != nullptr) {
      // The library's teardown (sockets, threads) is bounded too; the end line is written.
      watchdog_->ArmTeardown(NowNs() + ToNs(o_.timeout + WatchdogGrace(o_.timeout)), code);
      adapter_.reset();
      watchdog_.reset();
    }
    return code;
  }

 private:
  int RunToEnd() {
    process_start_ns_ = NowNs();
    signal(SIGPIPE, SIG_IGN);  // a dead peer is an error value, never a signal
    Status st = log_.Open(o_.log_path);
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
    if (o_.workload == "train") return RunTrain();
    spec_.coll = o_.op;
    spec_.dtype = o_.dtype;
    spec_.redop = o_.redop;
    spec_.root = o_.root;
    spec_.ranks = o_.size;
    spec_.seed = o_.seed;
    layout_ = workload::LayoutFor(o_.op, o_.dtype, o_.size, o_.bytes);
    if (!log_.Write(WorkerHeaderLine(Header()))) return InternalFailure("cannot write the log");

    const size_t ts = workload::DTypeSize(o_.dtype);
    send_ = std::make_unique<AlignedBuffer>(layout_.send_elems * ts);
    recv_ = std::make_unique<AlignedBuffer>(layout_.recv_elems * ts);
    if (send_->data == nullptr || recv_->data == nullptr) {
      return InternalFailure("out of memory for the buffers");
    }
    workload::FillInput(spec_, layout_, o_.rank, send_->data);
    args_.coll = o_.op;
    args_.send = send_->data;
    args_.recv = recv_->data;
    args_.count = layout_.count;
    args_.dtype = o_.dtype;
    args_.redop = o_.redop;
    args_.root = o_.root;

    const int joined = JoinGroup(CclInitOf());
    if (joined != kWorkerExitOk) return joined;
    WaitForStart();
    const int exit_code = Loop();
    if (exit_code != kWorkerExitOk) return exit_code;
    st = Guarded("final barrier", o_.timeout, std::nullopt,
                 [&] { return adapter_->Finish(o_.timeout); });
    if (!st.ok()) return Fail("final barrier: " + st.ToString(), NowNs());
    DrainEvents();
    WorkerEnd end;
    end.ok = true;
    end.message = "completed " + std::to_string(next_index_) + " collectives";
    end.t_ns = NowNs();
    if (!log_.Write(WorkerEndLine(end))) return InternalFailure("cannot write the log");
    return kWorkerExitOk;
  }

  CclInit CclInitOf() const {
    CclInit init;
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

  // Starts the watchdog, joins the group and prepares args_; then the ready line.
  int JoinGroup(const CclInit& init) {
    watchdog_ = std::make_unique<Watchdog>(&log_);
    Status st =
        Guarded("init", o_.init_timeout, std::nullopt, [&] { return adapter_->Init(init); });
    if (!st.ok()) return Fail("init: " + st.ToString(), NowNs());
    st = Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args_); });
    if (!st.ok()) return Fail("prepare: " + st.ToString(), NowNs());
    // Joined and prepared: the launch is over for this rank (the runner's launch figure).
    ready_ns_ = NowNs();
    if (!log_.Write(WorkerReadyLine(ready_ns_))) return InternalFailure("cannot write the log");
    return kWorkerExitOk;
  }

  // Waits for the common time zero; a rank that joined too late starts at once.
  void WaitForStart() {
    if (!o_.start_at_ns) return;
    timespec ts{static_cast<time_t>(*o_.start_at_ns / 1000000000),
                static_cast<long>(*o_.start_at_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }

  WorkerHeader Header() const {
    WorkerHeader h;
    h.rank = o_.rank;
    h.size = o_.size;
    h.ccl = o_.ccl;
    h.op = workload::CollName(o_.op);
    h.dtype = workload::DTypeName(o_.dtype);
    h.redop = workload::IsReduction(o_.op) ? workload::RedOpName(o_.redop) : "none";
    h.root = o_.root;
    h.bytes = layout_.bytes;
    h.count = layout_.count;
    h.busbw_factor = workload::BusBwFactor(o_.op, o_.size);
    h.rails = o_.rails;
    h.pid = getpid();
    h.check = o_.check;
    h.events = adapter_->EmitsEvents();
    h.warmup = o_.warmup;
    h.iters = o_.iters;
    if (o_.duration) h.duration_ns = o_.duration->count();
    h.timeout_ms = o_.timeout.count();
    h.seed = o_.seed;
    const std::vector<int> used = adapter_->RailsUsed(static_cast<int>(o_.rails.size()));
    if (!used.empty()) h.rails_used = used;
    h.ccl_version = adapter_->Version();
    for (const auto& [k, v] : adapter_->Knobs()) h.ccl_knobs[k] = v;
    return h;
  }

  // Runs one CCL call under the watchdog (deadline `limit` plus grace from now).
  template <typename F>
  Status Guarded(const std::string& what, std::chrono::milliseconds limit,
                 std::optional<WorkerOp> op, F&& call) {
    const int64_t start = op ? op->start_ns : NowNs();
    watchdog_->Arm(start + ToNs(limit) + ToNs(WatchdogGrace(limit)), what, std::move(op));
    Status st = call();
    watchdog_->Disarm();
    return st;
  }

  // The loop of collectives. Returns kWorkerExitOk when it ran to its end.
  int Loop() {
    const int64_t total = o_.iters ? o_.warmup + *o_.iters : -1;
    int64_t stop_at = 0;
    for (;;) {
      if (total >= 0 && next_index_ >= total) return kWorkerExitOk;
      if (total < 0 && next_index_ >= o_.warmup && next_index_ > 0) {
        bool stop = false;
        const int code = AgreeToStop(NowNs() >= stop_at, &stop);
        if (code != kWorkerExitOk) return code;
        if (stop) return kWorkerExitOk;
      }
      if (o_.check) workload::PoisonOutput(spec_, layout_, args_.recv);
      WorkerOp op;
      op.index = next_index_;
      op.bytes = layout_.bytes;
      op.warmup = next_index_ < o_.warmup;
      if (group_size_ != o_.size) op.group = group_size_;
      op.start_ns = NowNs();
      if (next_index_ == 0 && o_.duration) {
        stop_at = (o_.start_at_ns ? std::max(*o_.start_at_ns, op.start_ns) : op.start_ns) +
                  o_.duration->count();
      }
      const Status st = Guarded("collective " + std::to_string(op.index), o_.timeout, op,
                                [&] { return adapter_->Run(args_, o_.timeout); });
      op.end_ns = NowNs();
      DrainEvents();
      if (!st.ok()) {
        LogFailedOp(&op, st);
        if (o_.policy == "shrink" && adapter_->CanShrink()) {
          const int code = ShrinkAfter("collective " + std::to_string(op.index), op.end_ns, st);
          if (code != kWorkerExitOk) return code;
          ++next_index_;
          continue;
        }
        return Fail("collective " + std::to_string(op.index) + ": " + st.ToString(), op.end_ns);
      }
      if (o_.check) {
        op.wrong = workload::CountWrong(spec_, layout_, group_rank_, args_.recv);
      }
      if (!log_.Write(WorkerOpLine(op))) return InternalFailure("cannot write the log");
      ++next_index_;
    }
  }

  // Policy shrink, after collective `failed` returned `why`: the group shrinks without the rank
  // the library lost, and this rank's buffers, inputs and checks become those of its place in
  // the new group. kWorkerExitOk to go on; the error exit when no rank was lost (the failure
  // was something else) or the shrink failed.
  int ShrinkAfter(const std::string& what, int64_t failed_ns, const Status& why) {
    const int lost = adapter_->LostRank();
    if (lost == o_.rank || lost < 0) return FailUnshrinkable(what, failed_ns, why, lost);
    const int shrunk = ShrinkWithout(lost, what, failed_ns, why);
    if (shrunk != kWorkerExitOk) return shrunk;
    std::vector<int> members = Members();
    // A rooted collective keeps its root, at that rank's place in the new group.
    auto root = std::find(members.begin(), members.end(), o_.root);
    if (root == members.end()) {
      return Fail(what + ": the root rank " + std::to_string(o_.root) +
                      " was lost; a rooted collective cannot go on",
                  failed_ns);
    }
    spec_.root = static_cast<int>(root - members.begin());
    args_.root = spec_.root;
    // Fresh buffers for the new group: the failed collective's stay revoked (and allocated)
    // until the end, as the library promised never to touch them again.
    spec_.ranks = group_size_;
    layout_ = workload::LayoutFor(o_.op, o_.dtype, group_size_, o_.bytes);
    const size_t ts = workload::DTypeSize(o_.dtype);
    retired_.push_back(std::move(send_));
    retired_.push_back(std::move(recv_));
    send_ = std::make_unique<AlignedBuffer>(layout_.send_elems * ts);
    recv_ = std::make_unique<AlignedBuffer>(layout_.recv_elems * ts);
    if (send_->data == nullptr || recv_->data == nullptr) {
      return InternalFailure("out of memory for the buffers");
    }
    workload::FillInput(spec_, layout_, group_rank_, send_->data);
    args_.send = send_->data;
    args_.recv = recv_->data;
    args_.count = layout_.count;
    const Status st =
        Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args_); });
    if (!st.ok()) return Fail("prepare after the shrink: " + st.ToString(), NowNs());
    return kWorkerExitOk;
  }

  // A collective (or training step) that returned `st`: its op line, failed. The library's
  // promise, checked: from here on, until the communicator is gone, any touch of the failed
  // call's buffers crashes this rank.
  void LogFailedOp(WorkerOp* op, const Status& st) {
    op->ok = false;
    op->error = st.ToString();
    if (adapter_->ReleasesBuffersOnReturn()) {
      send_->Revoke();
      recv_->Revoke();
    }
    log_.Write(WorkerOpLine(*op));
  }

  // A failed call after which this rank cannot shrink: the others left it out (`lost` is this
  // rank), or the library names no lost rank (`lost` < 0).
  int FailUnshrinkable(const std::string& what, int64_t failed_ns, const Status& why, int lost) {
    return Fail(
        what + ": " + why.ToString() +
            (lost == o_.rank ? " (this rank was left out: the others lost it and shrink without it)"
                             : " (no shrink: the library names no lost rank)"),
        failed_ns);
  }

  // The world ranks of the group now, in order.
  std::vector<int> Members() const {
    std::vector<int> members;
    for (int r = 0; r < o_.size; ++r) {
      if (std::find(excluded_.begin(), excluded_.end(), r) == excluded_.end()) members.push_back(r);
    }
    return members;
  }

  // Shrinks the group without world rank `lost` (after `what` failed at failed_ns with `why`,
  // or by a decision): the shrink line, then group_size_ / group_rank_ of the new group.
  // kWorkerExitOk, or the error exit when the shrink failed.
  int ShrinkWithout(int lost, const std::string& what, int64_t failed_ns, const Status& why) {
    return ShrinkWithout(std::vector<int>{lost}, what, failed_ns, why);
  }
  int ShrinkWithout(const std::vector<int>& lost_ranks, const std::string& what, int64_t failed_ns,
                    const Status& why) {
    excluded_.insert(excluded_.end(), lost_ranks.begin(), lost_ranks.end());
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
    last_shrink_ns_ = rec.end_ns - rec.start_ns;
    boundary_from_step_ = step_;  // the new group agrees at its first boundary
    // The fault that led here is dealt with: the left-out rank's paths and the news about it
    // are forgotten (the train workload's fault state).
    for (auto it = paths_.begin(); it != paths_.end();) {
      const bool gone =
          std::find(lost_ranks.begin(), lost_ranks.end(), it->first.first) != lost_ranks.end();
      it = gone ? paths_.erase(it) : std::next(it);
    }
    fault_news_ = false;
    news_since_ns_.reset();
    // The new group's own pace is the reference from here on: the old group's means and
    // rates say nothing of it.
    clean_steps_ = 0;
    clean_step_ns_ = 0;
    clean_ar_ns_ = 0;
    ref_rates_.clear();
    return kWorkerExitOk;
  }

  // One-element allreduce (max) of `done`: every rank learns whether any rank's time is up.
  int AgreeToStop(bool done, bool* stop) {
    // Members, not locals: a library may touch them until it is destroyed.
    stop_send_ = done ? 1 : 0;
    stop_recv_ = -1;
    workload::OpArgs a;
    a.coll = workload::Coll::kAllReduce;
    a.send = &stop_send_;
    a.recv = &stop_recv_;
    a.count = 1;
    a.dtype = workload::DType::kI32;
    a.redop = workload::RedOp::kMax;
    SyncRecord sync;
    sync.rank = o_.rank;
    sync.after_index = next_index_ - 1;
    sync.start_ns = NowNs();
    const Status st = Guarded("stop agreement", o_.timeout, std::nullopt,
                              [&] { return adapter_->Run(a, o_.timeout); });
    sync.end_ns = NowNs();
    sync.ok = st.ok();
    log_.Write(WorkerSyncLine(sync));
    DrainEvents();
    if (!st.ok() && o_.policy == "shrink" && adapter_->CanShrink()) {
      // A rank lost during the agreement: shrink, then agree again in the smaller group.
      const int code = ShrinkAfter("stop agreement", sync.end_ns, st);
      if (code != kWorkerExitOk) return code;
      return AgreeToStop(done, stop);
    }
    if (!st.ok()) return Fail("stop agreement: " + st.ToString(), NowNs());
    if (stop_recv_ != 0 && stop_recv_ != 1) {
      return Fail("stop agreement: wrong result " + std::to_string(stop_recv_), NowNs());
    }
    *stop = stop_recv_ == 1;
    return kWorkerExitOk;
  }

  // Logs the library's events; kinds the runner does not know are left out.
  void DrainEvents() {
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
      NoteEvent(c);
    }
  }

  // ---- The train workload (worker.h; the model in train_model.h) ----

  uint64_t Params() const { return o_.grad_bytes / 4; }
  // wait and adaptive carry one more f32 after the gradients in each step's allreduce: each
  // rank's "I have something for the step boundary" (0 or 1), summed. The boundary's own
  // agreement then runs only when some rank needs it, instead of at every step.
  bool Flagged() const {
    return o_.policy == "wait" || o_.policy == "adaptive" || o_.policy == "shrink";
  }
  uint64_t Elements() const { return Params() + (Flagged() ? 1 : 0); }

  WorkerHeader TrainHeaderOf() const {
    WorkerHeader h;
    h.rank = o_.rank;
    h.size = o_.size;
    h.ccl = o_.ccl;
    h.op = workload::CollName(workload::Coll::kAllReduce);
    h.dtype = workload::DTypeName(workload::DType::kF32);
    h.redop = workload::RedOpName(workload::RedOp::kSum);
    h.bytes = o_.grad_bytes;
    h.count = Params();
    h.busbw_factor = workload::BusBwFactor(workload::Coll::kAllReduce, o_.size);
    h.rails = o_.rails;
    h.pid = getpid();
    h.check = true;
    h.events = adapter_->EmitsEvents();
    h.warmup = 0;
    h.iters = o_.steps;
    h.timeout_ms = o_.timeout.count();
    h.seed = o_.seed;
    const std::vector<int> used = adapter_->RailsUsed(static_cast<int>(o_.rails.size()));
    if (!used.empty()) h.rails_used = used;
    h.ccl_version = adapter_->Version();
    for (const auto& [k, v] : adapter_->Knobs()) h.ccl_knobs[k] = v;
    h.workload = "train";
    TrainHeader t;
    t.steps = o_.steps;
    t.batch = o_.batch;
    t.compute_ms = o_.compute_ms;
    t.grad_bytes = o_.grad_bytes;
    t.checkpoint_every = o_.checkpoint_every;
    t.policy = o_.policy;
    t.incarnation = o_.incarnation;
    t.wait_bound_ms = o_.wait_bound.count();
    // Written before the group is joined: the newest step this rank's own checkpoints offer.
    // The step every rank agreed on is the resume line's (the same unless a rank lacked it).
    for (const train::Checkpoint& c : candidates_) t.start_step = std::max(t.start_step, c.steps);
    h.train = t;
    return h;
  }

  int RunTrain() {
    if (o_.resume) LoadLocalCheckpoints();
    if (!log_.Write(WorkerHeaderLine(TrainHeaderOf()))) {
      return InternalFailure("cannot write the log");
    }
    params_.assign(Params(), 0.0f);
    const int fresh = FreshTrainBuffers();
    if (fresh != kWorkerExitOk) return fresh;
    CclInit init = CclInitOf();
    if (o_.policy == "wait" || o_.policy == "adaptive") init.peer_loss_timeout = o_.wait_bound;
    const int joined = JoinGroup(init);
    if (joined != kWorkerExitOk) return joined;
    // Paths the library could not set up at init (a rail down at start: ftccl starts on the
    // others) are the state this incarnation starts in, logged and followed like any path
    // event. fail_stop restarts for a fault of the run, not for them: a restart would meet the
    // same rail.
    DrainEvents();
    if (o_.policy == "fail_stop") {
      fault_news_ = false;
      first_fault_ns_.reset();
      news_since_ns_.reset();
    }
    if (o_.resume) {
      const int code = AgreeOnResume();
      if (code != kWorkerExitOk) return code;
    }
    last_ckpt_step_ = step_;
    WaitForStart();
    const int code = TrainLoop();
    if (code != kWorkerExitOk) return code;
    const Status st = Guarded("final barrier", o_.timeout, std::nullopt,
                              [&] { return adapter_->Finish(o_.timeout); });
    if (!st.ok()) return Fail("final barrier: " + st.ToString(), NowNs());
    DrainEvents();
    TrainResult result;
    result.rank = o_.rank;
    result.param_sha256 = train::ParamSha256(params_);
    result.loss = train::Loss(params_);
    result.steps = step_;
    result.samples = base_;
    if (!log_.Write(WorkerResultLine(result))) return InternalFailure("cannot write the log");
    WorkerEnd end;
    end.ok = true;
    end.message = "completed " + std::to_string(step_) + " training steps";
    end.t_ns = NowNs();
    if (!log_.Write(WorkerEndLine(end))) return InternalFailure("cannot write the log");
    return kWorkerExitOk;
  }

  // New step buffers (the old ones, revoked after a failure, stay allocated until the end).
  int FreshTrainBuffers() {
    if (send_ != nullptr) retired_.push_back(std::move(send_));
    if (recv_ != nullptr) retired_.push_back(std::move(recv_));
    send_ = std::make_unique<AlignedBuffer>(Elements() * 4);
    recv_ = std::make_unique<AlignedBuffer>(Elements() * 4);
    if (send_->data == nullptr || recv_->data == nullptr) {
      return InternalFailure("out of memory for the buffers");
    }
    args_ = workload::OpArgs();
    args_.coll = workload::Coll::kAllReduce;
    args_.send = send_->data;
    args_.recv = recv_->data;
    args_.count = Elements();
    args_.dtype = workload::DType::kF32;
    args_.redop = workload::RedOp::kSum;
    return kWorkerExitOk;
  }

  // This rank's newest and previous checkpoints that can be read and fit this job; the
  // others are named on stderr and left out.
  void LoadLocalCheckpoints() {
    resume_start_ns_ = NowNs();
    for (const std::string& path : {train::CheckpointPath(o_.checkpoint_dir, o_.rank),
                                    train::PrevCheckpointPath(o_.checkpoint_dir, o_.rank)}) {
      auto c = train::ReadCheckpoint(path, Params(), o_.seed);
      if (!c.ok()) {
        if (c.status().code() != Code::kNotFound) {
          std::fprintf(stderr, "faultline-worker: rank %d: not resuming from it: %s\n", o_.rank,
                       c.status().ToString().c_str());
        }
        continue;
      }
      if (c->steps > o_.steps) {
        std::fprintf(stderr,
                     "faultline-worker: rank %d: not resuming from %s: it holds %lld steps, "
                     "more than --steps\n",
                     o_.rank, path.c_str(), static_cast<long long>(c->steps));
        continue;
      }
      candidates_.push_back(std::move(c).value());
    }
  }

  // Every rank resumes from the newest step count that every rank has a checkpoint of (each
  // rank's newest or previous one), or all start from step 0. The full world runs again.
  int AgreeOnResume() {
    int64_t newest = -1;
    for (const train::Checkpoint& c : candidates_) newest = std::max(newest, c.steps);
    std::vector<int64_t> v = {-newest};  // min as the max of negated values; none: 1
    Status st = Control(&v, "resume agreement");
    if (!st.ok()) return Fail("resume agreement: " + st.ToString(), NowNs());
    const int64_t common = -v[0];
    const train::Checkpoint* have = nullptr;
    for (const train::Checkpoint& c : candidates_) {
      if (c.steps == common) have = &c;
    }
    const int64_t samples = have != nullptr ? static_cast<int64_t>(have->samples) : 0;
    v = {have == nullptr ? 1 : 0, samples, -samples};
    st = Control(&v, "resume agreement");
    if (!st.ok()) return Fail("resume agreement: " + st.ToString(), NowNs());
    if (common < 0 || v[0] != 0) {
      if (!candidates_.empty()) {
        std::fprintf(stderr,
                     "faultline-worker: rank %d: no checkpoint every rank has; starting from "
                     "step 0\n",
                     o_.rank);
      }
      return kWorkerExitOk;
    }
    if (v[1] != -v[2]) {
      std::fprintf(stderr,
                   "faultline-worker: rank %d: the ranks' checkpoints of step %lld disagree on "
                   "the samples done; starting from step 0\n",
                   o_.rank, static_cast<long long>(common));
      return kWorkerExitOk;
    }
    params_ = have->params;
    base_ = have->samples;
    step_ = common;
    ResumeRecord r;
    r.rank = o_.rank;
    r.step = step_;
    r.samples = base_;
    r.start_ns = resume_start_ns_;
    r.end_ns = NowNs();
    if (!log_.Write(WorkerResumeLine(r))) return InternalFailure("cannot write the log");
    return kWorkerExitOk;
  }

  // An allreduce (max) of small i64 values between the ranks of the group, in place; not a
  // training step and not logged as one.
  Status Control(std::vector<int64_t>* values, const std::string& what) {
    // Members, not locals: a library may touch them until it is destroyed.
    ctl_send_ = *values;
    ctl_recv_.assign(values->size(), 0);
    workload::OpArgs a;
    a.coll = workload::Coll::kAllReduce;
    a.send = ctl_send_.data();
    a.recv = ctl_recv_.data();
    a.count = ctl_send_.size();
    a.dtype = workload::DType::kI64;
    a.redop = workload::RedOp::kMax;
    const Status st =
        Guarded(what, o_.timeout, std::nullopt, [&] { return adapter_->Run(a, o_.timeout); });
    DrainEvents();
    if (st.ok()) *values = ctl_recv_;
    return st;
  }

  int TrainLoop() {
    const uint64_t batch = static_cast<uint64_t>(o_.batch);
    while (step_ < o_.steps) {
      if (o_.policy == "fail_stop" && fault_news_) {
        return FailStop("the library reported a fault", *first_fault_ns_);
      }
      const int boundary = StepBoundary();
      if (boundary != kWorkerExitOk) return boundary;
      const int64_t faults_before = faults_seen_;
      const bool down_before = AnyPathDown();
      WorkerOp op;
      op.index = step_;
      op.bytes = o_.grad_bytes;
      if (group_size_ != o_.size) op.group = group_size_;
      op.start_ns = NowNs();
      const uint64_t g = static_cast<uint64_t>(group_size_);
      train::FillGradient(base_ + static_cast<uint64_t>(group_rank_) * batch, batch, o_.seed,
                          static_cast<float*>(send_->data), Params());
      const int64_t compute_end = op.start_ns + o_.compute_ms * 1000000;
      timespec ts{static_cast<time_t>(compute_end / 1000000000),
                  static_cast<long>(compute_end % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
      const int64_t ar_start = NowNs();
      op.compute_ns = ar_start - op.start_ns;
      if (Flagged()) {
        const bool mine = o_.policy == "wait" ? AnyPathToWaitFor() : fault_news_ || AnyPathDown();
        static_cast<float*>(send_->data)[Params()] = mine ? 1.0f : 0.0f;
      }
      std::memset(recv_->data, 0xff, Elements() * 4);  // NaN: a result never written is wrong
      const std::string what = "step " + std::to_string(step_);
      const Status st =
          Guarded(what, o_.timeout, op, [&] { return adapter_->Run(args_, o_.timeout); });
      op.end_ns = NowNs();
      DrainEvents();
      if (!st.ok()) {
        LogFailedOp(&op, st);
        const int code = AfterFailedCall(what, op.end_ns, st);
        if (code != kWorkerExitOk) return code;
        continue;  // the step again, in the smaller group, from the same base
      }
      const float* total = static_cast<const float*>(recv_->data);
      op.wrong = train::CountWrongGradient(base_, g * batch, o_.seed, total, Params());
      // Exact: every value is an integer below 2^24 in magnitude (train_model.h).
      for (uint64_t i = 0; i < Params(); ++i) params_[i] -= total[i];
      // Not a number (a result never written, a lying peer) asks for the boundary too.
      if (Flagged()) attention_ = !(total[Params()] == 0.0f);
      prev_base_ = base_;
      base_ += g * batch;
      if (!log_.Write(WorkerOpLine(op))) return InternalFailure("cannot write the log");
      ++step_;
      last_ar_ns_ = op.end_ns - ar_start;
      if (faults_seen_ == faults_before && !down_before && !AnyPathDown()) {
        ++clean_steps_;
        clean_step_ns_ += op.end_ns - op.start_ns;
        clean_ar_ns_ += last_ar_ns_;
        if (o_.policy == "adaptive") {
          std::vector<double> rates = adapter_->PeerRates();
          // A peer not measured this time keeps its earlier reference.
          if (ref_rates_.size() != rates.size()) ref_rates_.assign(rates.size(), 0.0);
          for (size_t r = 0; r < rates.size(); ++r) {
            if (rates[r] > 0) ref_rates_[r] = rates[r];
          }
        }
      }
      if (o_.policy == "fail_stop" && fault_news_) {
        return FailStop("the library reported a fault", *first_fault_ns_);
      }
      if (o_.checkpoint_every > 0 && step_ % o_.checkpoint_every == 0) {
        const int code = WriteTrainCheckpoint();
        if (code != kWorkerExitOk) return code;
      }
    }
    return kWorkerExitOk;
  }

  int WriteTrainCheckpoint() {
    CheckpointRecord rec;
    rec.rank = o_.rank;
    rec.step = step_;
    rec.samples = base_;
    rec.start_ns = NowNs();
    train::Checkpoint c;
    c.steps = step_;
    c.samples = base_;
    c.seed = o_.seed;
    c.excluded = excluded_;
    c.params = params_;
    auto written = train::WriteCheckpoint(o_.checkpoint_dir, o_.rank, c);
    rec.end_ns = NowNs();
    if (!written.ok()) {
      return EndWith(kWorkerExitInternal, "checkpoint of step " + std::to_string(step_) + ": " +
                                              written.status().ToString());
    }
    rec.bytes = *written;
    last_ckpt_step_ = step_;
    last_ckpt_write_ns_ = rec.end_ns - rec.start_ns;
    if (!log_.Write(WorkerCheckpointLine(rec))) return InternalFailure("cannot write the log");
    return kWorkerExitOk;
  }

  // A training step or control collective failed: what the policy does about it.
  // kWorkerExitOk to go on in a (smaller) group; otherwise the exit code.
  int AfterFailedCall(const std::string& what, int64_t failed_ns, const Status& why) {
    if (!first_fault_ns_) first_fault_ns_ = failed_ns;
    if (o_.policy == "fail_stop") return FailStop(what + ": " + why.ToString(), failed_ns);
    if ((o_.policy != "shrink" && o_.policy != "adaptive") || !adapter_->CanShrink()) {
      return Fail(what + ": " + why.ToString(), failed_ns);
    }
    const int lost = adapter_->LostRank();
    if (lost == o_.rank || lost < 0) return FailUnshrinkable(what, failed_ns, why, lost);
    const int group_before = group_size_;
    // Measured before the shrink, which restarts the measurements for the new group.
    const policy::PolicyState before = BaseState(group_before);
    int code = ShrinkWithout(lost, what, failed_ns, why);
    if (code != kWorkerExitOk) return code;
    code = FreshTrainBuffers();
    if (code != kWorkerExitOk) return code;
    const Status st =
        Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args_); });
    if (!st.ok()) return Fail("prepare after the shrink: " + st.ToString(), NowNs());
    code = AgreeOnStep();
    if (code != kWorkerExitOk) return code;
    if (o_.policy == "shrink") return kWorkerExitOk;
    // adaptive, a rank fault: the survivors have shrunk (the only working path among them);
    // the new group's rank 0 decides whether to go on so or to restart every rank.
    std::optional<policy::RecoveryPolicy> chosen;
    if (group_rank_ == 0) {
      policy::PolicyState s = before;
      s.fault_class = policy::FaultClassKind::kRank;
      s.surviving_bandwidth_fraction = 0;  // no path to the lost rank
      s.outage_so_far_s = std::max<int64_t>(0, NowNs() - failed_ns) / 1e9;
      s.expected_outage_s.reset();
      // The survivors' ring keeps the same kind of links (the lost rank took none away from
      // the others): only its length changes.
      s.shrunk_step_time_s = policy::RingStepTimeEstimate(s.step_time_s, s.comm_fraction,
                                                          group_before, group_size_, 1.0);
      chosen = DecideAndLog(s, "rank_lost", {lost});
    }
    code = ShareDecision(&chosen);
    if (code != kWorkerExitOk) return code;
    if (chosen == policy::RecoveryPolicy::kFailStop) {
      return FailStop(
          "the adaptive policy chose fail_stop after losing rank " + std::to_string(lost),
          failed_ns);
    }
    return kWorkerExitOk;  // shrink (or no decision): go on in the smaller group
  }

  // After a shrink for a lost rank. A ring allreduce can complete on some members before the
  // rank died and fail on the others, so the survivors may be one step apart (a member that
  // completed step k goes on with k + 1, one that did not redoes k): they agree on the earliest
  // step, and a member ahead undoes its last step exactly (the update was the step's block sum,
  // recomputed from its samples) to redo it with the others. More than one step apart is not
  // possible (every step is a collective of all of them) and fails the rank.
  int AgreeOnStep() {
    std::vector<int64_t> v = {-step_, step_};
    const Status st = Control(&v, "step agreement");
    if (!st.ok()) return AfterFailedCall("step agreement", NowNs(), st);
    const int64_t earliest = -v[0], latest = v[1];
    // The first boundary of the new group runs on every member (StepBoundary): at the step
    // they agree on, not at the one each shrank at.
    boundary_from_step_ = earliest;
    if (latest - earliest > 1 || step_ - earliest > 1) {
      return EndWith(kWorkerExitInternal, "after the shrink the group is at steps " +
                                              std::to_string(earliest) + ".." +
                                              std::to_string(latest) + ", more than one apart");
    }
    if (step_ == earliest) return kWorkerExitOk;
    std::vector<float> block(Params());
    train::FillGradient(prev_base_, base_ - prev_base_, o_.seed, block.data(), Params());
    for (uint64_t i = 0; i < Params(); ++i) params_[i] += block[i];  // exact (train_model.h)
    std::fprintf(stderr,
                 "faultline-worker: rank %d: step %lld completed here but not on every survivor: "
                 "undone, redone in the smaller group\n",
                 o_.rank, static_cast<long long>(earliest));
    base_ = prev_base_;
    step_ = earliest;
    return kWorkerExitOk;
  }

  // The policy's work between two steps (wait, adaptive). kWorkerExitOk to run the next step.
  int StepBoundary() {
    // Nothing for the boundary on any rank at the last step (its allreduce's flag), and no
    // decision pending: the step runs at once. The first step, and the first after a shrink or
    // resume, always agree.
    if (Flagged() && !attention_ && !news_deferred_ && step_ > boundary_from_step_) {
      return kWorkerExitOk;
    }
    if (o_.policy == "wait") {
      std::vector<int64_t> v = {AnyPathToWaitFor() ? 1 : 0};
      const Status st = Control(&v, "step boundary");
      if (!st.ok()) return AfterFailedCall("step boundary", NowNs(), st);
      if (v[0] != 0) return Hold();
      return kWorkerExitOk;
    }
    if (o_.policy == "adaptive") return AdaptiveBoundary();
    if (o_.policy == "shrink") return ShrinkBoundary();
    return kWorkerExitOk;
  }

  // Policy shrink at a step boundary: while any member sees a path down, the group goes on
  // without the ranks behind the down paths (AffectedCover), whatever the fault: shrink is the
  // alternative to rerouting, not an addition to it (a lost rank shrinks in AfterFailedCall).
  // A fault already over by the boundary leaves nobody to drop.
  int ShrinkBoundary() {
    std::vector<int64_t> v;
    const Status st = GatherFaultState(&v);
    if (!st.ok()) return AfterFailedCall("step boundary", NowNs(), st);
    if (v[kDown] == 0 || group_size_ < 2) return kWorkerExitOk;
    return ShrinkAffected(v, "the shrink policy");
  }

  // Every rank of the group holds until no rank sees a path down or the wait bound has passed
  // (on any rank's clock: the ranks agree so that they stop after the same round); the hold
  // line either way.
  int Hold() {
    HoldRecord h;
    h.rank = o_.rank;
    h.start_ns = NowNs();
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      DrainEvents();
      std::vector<int64_t> v = {AnyPathToWaitFor() ? 1 : 0,
                                NowNs() - h.start_ns >= ToNs(o_.wait_bound) ? 1 : 0};
      const Status st = Control(&v, "hold");
      if (!st.ok()) {
        h.end_ns = NowNs();
        log_.Write(WorkerHoldLine(h));
        return AfterFailedCall("hold", h.end_ns, st);
      }
      if (v[0] == 0) {
        h.returned = true;
        break;
      }
      if (v[1] != 0) {
        // Waited the whole bound: these outages are the library's to fail over from now on;
        // a path that returns and goes down again is a new outage, held for again.
        for (auto& [key, p] : paths_) {
          if (p.down_since) p.waited_out = true;
        }
        break;
      }
    }
    h.end_ns = NowNs();
    if (!log_.Write(WorkerHoldLine(h))) return InternalFailure("cannot write the log");
    return kWorkerExitOk;
  }

  // The fault state every rank gathers at a step boundary (policy adaptive): one allreduce
  // (max) of these slots, minima as negated values, then one score slot per world rank.
  enum Slot : size_t {
    kNews = 0,      // a fault seen since the last boundary
    kClass,         // 0 none, 1 link, 2 nic
    kNegStart,      // -(earliest outage start, ns)
    kExpected,      // expected outage, ns (max; INT64_MAX: permanent; 0: already over)
    kNegBandwidth,  // -(surviving bandwidth fraction, ppm)
    kDown,          // a path down now
    kSlots,
  };
  static constexpr int64_t kPermanent = std::numeric_limits<int64_t>::max();
  // Added to a rank's score slot when its own rail port went down during the fault.
  static constexpr int64_t kOwnPortDown = 4;

  // After the score slots, groups of up to kMaxMatrixRanks ranks gather which paths each rank
  // sees down (one slot per ordered pair), from which every rank computes the same smallest
  // set of ranks a shrink must drop (AffectedCover).
  static constexpr int kMaxMatrixRanks = 16;
  size_t MatrixSlot(int from, int to, int block = 0) const {
    const size_t n = static_cast<size_t>(o_.size);
    return kSlots + n + static_cast<size_t>(block) * n * n +
           static_cast<size_t>(from * o_.size + to);
  }
  // The blocks of the matrix: paths down, then the library's measured throughput from each
  // rank to each (kB/s) at the clean steps (PeerRates; each rank fills its own row).
  static constexpr int kDownBlock = 0, kRefRateBlock = 1, kBlocks = 2;
  // The pair's throughput in `block`, the better of its two directions (the ring uses one);
  // 0: not measured.
  int64_t PairRate(const std::vector<int64_t>& v, int a, int b, int block) const {
    return std::max(v[MatrixSlot(a, b, block)], v[MatrixSlot(b, a, block)]);
  }
  bool HasMatrix() const { return o_.size <= kMaxMatrixRanks; }

  // The ranks a shrink must drop so that no member of the group has a path down to another:
  // a greedy vertex cover of the down paths among the members (the rank with the most down
  // paths first; on a tie a rank whose own port went down during the fault, then the lowest
  // world rank; the coordinator too: the lowest survivor leads the new group), at most
  // group - 1 ranks. Without the matrix (large groups): the one rank of the highest score
  // (own port down first) other than the coordinator. The same on every rank: a pure
  // function of the gathered slots.
  std::vector<int> AffectedCover(const std::vector<int64_t>& v) const {
    const std::vector<int> members = Members();
    std::vector<int> cover;
    if (!HasMatrix()) {
      int victim = -1;
      for (int r : members) {
        if (r == members.front()) continue;
        const int64_t score = v[kSlots + static_cast<size_t>(r)];
        if (score > 0 && (victim < 0 || score > v[kSlots + static_cast<size_t>(victim)]))
          victim = r;
      }
      if (victim >= 0) cover.push_back(victim);
      return cover;
    }
    std::set<std::pair<int, int>> edges;
    for (int a : members) {
      for (int b : members) {
        if (a < b && (v[MatrixSlot(a, b)] != 0 || v[MatrixSlot(b, a)] != 0)) edges.insert({a, b});
      }
    }
    while (!edges.empty() && static_cast<int>(cover.size()) < group_size_ - 1) {
      std::map<int, int> degree;
      for (const auto& [a, b] : edges) {
        ++degree[a];
        ++degree[b];
      }
      auto own_port_down = [&](int r) {
        return (v[kSlots + static_cast<size_t>(r)] & kOwnPortDown) != 0;
      };
      int pick = -1;
      for (const auto& [r, d] : degree) {
        if (pick < 0 || d > degree[pick] ||
            (d == degree[pick] && own_port_down(r) && !own_port_down(pick))) {
          pick = r;
        }
      }
      cover.push_back(pick);
      for (auto it = edges.begin(); it != edges.end();) {
        it = (it->first == pick || it->second == pick) ? edges.erase(it) : std::next(it);
      }
    }
    std::sort(cover.begin(), cover.end());
    return cover;
  }

  // The group's fault state at a step boundary: every member's slots (LocalFaultState),
  // gathered in one small allreduce; this rank's news is handed over with it.
  Status GatherFaultState(std::vector<int64_t>* v) {
    v->assign(kSlots + static_cast<size_t>(o_.size) +
                  (HasMatrix() ? static_cast<size_t>(kBlocks * o_.size * o_.size) : 0),
              0);
    LocalFaultState(v);
    fault_news_ = false;
    return Control(v, "step boundary");
  }

  int AdaptiveBoundary() {
    std::vector<int64_t> v;
    const Status st = GatherFaultState(&v);
    if (!st.ok()) return AfterFailedCall("step boundary", NowNs(), st);
    // News of a path fault is decided on one step later: the library has failed over by then,
    // and that step's allreduce measures the bandwidth that survived (the step that held the
    // detection would read its stall as lost bandwidth). A rank cut off from the group (nic)
    // has no step to measure: decided at once. The same on every rank: v is the group's.
    const bool fresh = v[kNews] != 0;
    if (fresh && !news_deferred_ && v[kClass] != 2 && v[kDown] != 0) {
      news_deferred_ = true;
      return kWorkerExitOk;
    }
    const bool news = fresh || news_deferred_;
    news_deferred_ = false;
    if (!news && v[kDown] == 0) return kWorkerExitOk;
    // Someone has news or a path is still down: rank 0 of the group decides whether to act,
    // and every rank learns the outcome from its broadcast.
    std::optional<policy::RecoveryPolicy> chosen;
    if (group_rank_ == 0) {
      const int64_t now = NowNs();
      const double so_far =
          v[kNegStart] == -kPermanent ? 0 : std::max<int64_t>(0, now + v[kNegStart]) / 1e9;
      const bool over = v[kDown] == 0;  // the paths came back before this boundary
      // Re-decided when the outage outlasts what the last decision expected of it.
      const bool outlasted = !over && now > decided_until_ns_;
      if (over) decided_until_ns_ = kPermanent;
      if (news || outlasted) {
        policy::PolicyState s = BaseState(group_size_);
        s.fault_class =
            v[kClass] == 2 ? policy::FaultClassKind::kNic : policy::FaultClassKind::kLink;
        s.surviving_bandwidth_fraction = std::clamp(-v[kNegBandwidth] / 1e6, 0.0, 1.0);
        if (over) {
          // A fault already over is an outage of length 0 that has ended.
          s.outage_so_far_s = 0;
          s.expected_outage_s = 0;
        } else {
          s.outage_so_far_s = so_far;
          // The path's own history (the mean of its past outages) where it has one. Without
          // any (or past it), an outage is expected to last as long again as it has so far (at
          // least a step): the estimate doubles at every re-decision, so a permanent one is soon
          // treated as such while a first transient one is not priced as if it never ended.
          // An outage that has outlasted its history is estimated the same way.
          if (v[kExpected] != kPermanent && v[kExpected] / 1e9 > so_far) {
            s.expected_outage_s = v[kExpected] / 1e9;
          } else {
            s.expected_outage_s = std::max(2 * so_far, BaseState(group_size_).step_time_s);
          }
        }
        const std::vector<int> cover = AffectedCover(v);
        s.shrink_ranks =
            std::clamp(static_cast<int>(cover.size()), 1, std::max(1, group_size_ - 1));
        s.shrunk_step_time_s = ShrunkStepTime(v, cover, s);
        if (group_size_ >= 2) {
          const char* trigger = v[kDown] != 0 ? "path_down" : "path_fault_over";
          chosen = DecideAndLog(s, trigger, cover);
          if (chosen && s.expected_outage_s && !over) {
            decided_until_ns_ =
                now + static_cast<int64_t>((*s.expected_outage_s - s.outage_so_far_s) * 1e9);
          }
        }
      }
    }
    int code = ShareDecision(&chosen);
    if (code != kWorkerExitOk) return code;
    if (!chosen) return kWorkerExitOk;
    switch (*chosen) {
      case policy::RecoveryPolicy::kWait:
        return Hold();
      case policy::RecoveryPolicy::kShrink:
        return ShrinkAffected(v, "the adaptive policy");
      case policy::RecoveryPolicy::kFailStop:
        return FailStop("the adaptive policy chose fail_stop", first_fault_ns_.value_or(NowNs()));
      default:
        return kWorkerExitOk;  // failover: the library's own recovery goes on
    }
  }

  // shrunk_step_time_s for dropping `cover` from the group: RingStepTimeEstimate, with the slowest
  // link of each ring (the group's now, the survivors' after; consecutive members in rank
  // order, the last to the first) from the reference throughput of the gathered matrix (the
  // survivors' pairs are not the affected ones). A survivors' pair never measured counts as
  // the group's slowest. nullopt without a matrix or any measured pair of the group's ring.
  std::optional<double> ShrunkStepTime(const std::vector<int64_t>& v, const std::vector<int>& cover,
                                       const policy::PolicyState& s) const {
    if (!HasMatrix() || cover.empty()) return std::nullopt;
    const std::vector<int> members = Members();
    std::vector<int> survivors;
    for (int r : members) {
      if (std::find(cover.begin(), cover.end(), r) == cover.end()) survivors.push_back(r);
    }
    auto slowest = [&](const std::vector<int>& ring, int64_t unknown) -> int64_t {
      int64_t least = 0;
      for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i) {
        int64_t rate = PairRate(v, ring[i], ring[(i + 1) % ring.size()], kRefRateBlock);
        if (rate <= 0) rate = unknown;
        if (rate > 0 && (least == 0 || rate < least)) least = rate;
      }
      return least;
    };
    const int64_t before = slowest(members, 0);
    if (before <= 0) return std::nullopt;
    const int64_t after = slowest(survivors, before);
    const double speedup = after > 0 ? static_cast<double>(after) / before : 1.0;
    return policy::RingStepTimeEstimate(s.step_time_s, s.comm_fraction,
                                        static_cast<int>(members.size()),
                                        static_cast<int>(survivors.size()), speedup);
  }

  // This rank's slots of the boundary gather.
  void LocalFaultState(std::vector<int64_t>* v) {
    (*v)[kNews] = fault_news_ ? 1 : 0;
    (*v)[kNegStart] = -kPermanent;
    int64_t expected = 0;
    std::map<int, int> rails_down;  // peer -> paths down to it
    std::optional<workload::adapters::FlapDamping> damping;
    const int64_t now = NowNs();
    if (AnyPathDown()) damping = adapter_->Damping();
    for (const auto& [key, p] : paths_) {
      if (!p.down_since) continue;
      (*v)[kNegStart] = std::max((*v)[kNegStart], -*p.down_since);
      // The path's expected outage: the mean of its past outages; none: permanent.
      int64_t e = p.outages > 0 ? p.outage_ns / p.outages : kPermanent;
      // Where the library damps flapping paths, its damping state says more: a path flapping
      // now is out of use until the flapping stops and the hold-down it earned runs out
      // (policy::FlappingOutageRemaining), and none is back before its hold-down ends.
      if (damping) {
        for (const auto& d : damping->paths) {
          if (d.peer != key.first || d.path != key.second) continue;
          const int64_t down_for = std::max<int64_t>(0, now - *p.down_since);
          const double held_s = std::max<int64_t>(0, d.hold_until_ns - now) / 1e9;
          const bool flapping = d.downs_in_window >= 2 && d.first_down_ns > 0 &&
                                now - d.first_down_ns <= damping->window.count() * 1000000LL;
          if (flapping) {
            const double remaining = policy::FlappingOutageRemaining(
                d.downs_in_window, std::max<int64_t>(0, now - d.first_down_ns) / 1e9, held_s,
                damping->holddown.count() / 1e3, damping->holddown_max.count() / 1e3);
            e = down_for + static_cast<int64_t>(remaining * 1e9);
          } else if (e != kPermanent) {
            e = std::max(e, down_for + static_cast<int64_t>(held_s * 1e9));
          }
        }
      }
      expected = std::max(expected, e);
      ++rails_down[key.first];
      if (key.first >= 0 && key.first < o_.size) {
        (*v)[kSlots + key.first] = 1;
        if (HasMatrix()) (*v)[MatrixSlot(o_.rank, key.first)] = 1;
      }
    }
    if (!rails_down.empty()) {
      (*v)[kDown] = 1;
      (*v)[kExpected] = expected;
    } else if (fault_news_ && news_since_ns_) {
      (*v)[kNegStart] = -*news_since_ns_;
    }
    if (HasMatrix()) {
      for (int r = 0; r < o_.size && static_cast<size_t>(r) < ref_rates_.size(); ++r) {
        (*v)[MatrixSlot(o_.rank, r, kRefRateBlock)] =
            static_cast<int64_t>(ref_rates_[static_cast<size_t>(r)] / 1e3);
      }
    }
    // Cut off: every path to every other member of the group down.
    const int rails = static_cast<int>(o_.rails.size());
    bool cut_off = group_size_ > 1;
    for (int r : Members()) {
      if (r == o_.rank) continue;
      auto it = rails_down.find(r);
      if (it == rails_down.end() || it->second < rails) cut_off = false;
    }
    if (cut_off || relay_on_) {
      (*v)[kClass] = 2;
    } else if ((*v)[kDown] != 0 || fault_news_) {
      (*v)[kClass] = 1;
    }
    // Whether this rank's own NIC port went down during the fault: it is the one a shrink
    // should drop when the down paths alone do not say which end is at fault (a single pair).
    WatchOwnPorts(AnyPathDown() || fault_news_);
    if ((*v)[kClass] != 0) {
      (*v)[kSlots + o_.rank] = (cut_off ? 2 : 1) + (own_port_down_ ? kOwnPortDown : 0);
    }
    // The surviving bandwidth, measured: the fault-free steps' mean allreduce time over the
    // last step's (the rate every rank got, whatever the library did about the fault).
    double b = 1;
    if (clean_steps_ > 0 && last_ar_ns_ > 0) {
      b = std::clamp(static_cast<double>(clean_ar_ns_) / clean_steps_ / last_ar_ns_, 0.0, 1.0);
    }
    (*v)[kNegBandwidth] = -static_cast<int64_t>(b * 1e6);
  }

  // The kernel's view of this rank's rail ports (rtnetlink, in the rank's namespace), at every
  // boundary of the adaptive and shrink policies. With no fault on, it notes each port's
  // carrier transitions so far; during a fault, a port that is not running, is gone, or whose
  // carrier changed since (it went down, even if it is back by this boundary) sets
  // own_port_down_ until the fault is over. Where the rails' ports cannot be read, nothing is
  // set (the cover falls back to the lowest rank).
  void WatchOwnPorts(bool fault_on) {
    if (port_watch_off_) return;
    if (!nl_) {
      auto sock = NlSock::Connect();
      if (!sock.ok()) {
        std::fprintf(stderr, "faultline-worker: rank %d: not watching its ports: %s\n", o_.rank,
                     sock.status().ToString().c_str());
        port_watch_off_ = true;
        return;
      }
      nl_ = std::move(sock).value();
      rail_interfaces_ = RailInterfaces(o_.rails);
    }
    bool down = false;
    std::vector<uint32_t> changes;
    for (const std::string& name : rail_interfaces_) {
      auto link = GetLink(*nl_, name);
      if (!link.ok()) {
        down = true;  // gone: a port removed
        changes.push_back(0);
        continue;
      }
      if (!link->running) down = true;
      changes.push_back(link->carrier_changes);
    }
    if (!fault_on) {
      port_changes_ = std::move(changes);
      own_port_down_ = false;
      return;
    }
    if (port_changes_.size() == changes.size() && port_changes_ != changes) down = true;
    if (down) own_port_down_ = true;
  }

  // The decision's inputs that do not depend on the fault. `ranks`: the group before it.
  policy::PolicyState BaseState(int ranks) const {
    policy::PolicyState s;
    s.world_size = ranks;
    s.steps_remaining = o_.steps - step_;
    const double compute_s = o_.compute_ms / 1e3;
    double step_s = std::max(compute_s, 1e-3);
    double comm = 0;
    if (clean_steps_ > 0) {
      step_s = std::max(static_cast<double>(clean_step_ns_) / clean_steps_ / 1e9, 1e-6);
      comm = std::clamp(static_cast<double>(clean_ar_ns_) / clean_step_ns_, 0.0, 1.0);
    }
    s.step_time_s = step_s;
    s.comm_fraction = comm;
    s.checkpoint_age_s = static_cast<double>(step_ - last_ckpt_step_) * step_s;
    // Unless the runner measured it: this process's start to ready (launch and rendezvous)
    // plus its last checkpoint write (a restart loads about as much).
    s.restart_cost_s = o_.restart_cost ? o_.restart_cost->count() / 1e3
                                       : std::max<int64_t>(0, ready_ns_ - process_start_ns_) / 1e9 +
                                             last_ckpt_write_ns_ / 1e9;
    s.shrink_cost_s = last_shrink_ns_ > 0 ? last_shrink_ns_ / 1e9 : 0.05;
    s.failover_switch_cost_s = 0;
    s.wait_bound_s = o_.wait_bound.count() / 1e3;
    return s;
  }

  // The coordinator's decision: Decide, timed, and the decision line. nullopt when the state
  // is not one the model accepts (named on stderr; the ranks go on).
  // `trigger` (what led to it) and `shrink_set` (the world ranks a shrink would drop) go on the
  // decision line beside the model's own keys.
  std::optional<policy::RecoveryPolicy> DecideAndLog(const policy::PolicyState& s,
                                                     const char* trigger,
                                                     const std::vector<int>& shrink_set) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status valid = policy::ValidatePolicyState(s);
    if (!valid.ok()) {
      std::fprintf(stderr, "faultline-worker: rank %d: no decision: %s\n", o_.rank,
                   valid.ToString().c_str());
      return std::nullopt;
    }
    const policy::PolicyDecision d = policy::Decide(s);
    const auto t1 = std::chrono::steady_clock::now();
    DecisionRecord rec;
    rec.rank = o_.rank;
    rec.t_ns = NowNs();
    rec.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    rec.chosen = policy::RecoveryPolicyName(d.chosen);
    rec.decision = policy::DecisionToJson(s, d);
    rec.decision["trigger"] = trigger;
    rec.decision["shrink_set"] = shrink_set;
    log_.Write(WorkerDecisionLine(rec));
    return d.chosen;
  }

  // Group rank 0's decision (or none) to every rank of the group: a 1-element broadcast.
  int ShareDecision(std::optional<policy::RecoveryPolicy>* chosen) {
    bcast_send_ = *chosen ? static_cast<int64_t>(**chosen) : -1;
    bcast_recv_ = -2;
    workload::OpArgs a;
    a.coll = workload::Coll::kBroadcast;
    a.send = &bcast_send_;
    a.recv = &bcast_recv_;
    a.count = 1;
    a.dtype = workload::DType::kI64;
    a.root = 0;
    const Status st = Guarded("decision broadcast", o_.timeout, std::nullopt,
                              [&] { return adapter_->Run(a, o_.timeout); });
    DrainEvents();
    if (!st.ok()) return AfterFailedCall("decision broadcast", NowNs(), st);
    if (bcast_recv_ < -1 || bcast_recv_ > static_cast<int64_t>(policy::RecoveryPolicy::kShrink)) {
      return Fail("decision broadcast: wrong value " + std::to_string(bcast_recv_), NowNs());
    }
    if (bcast_recv_ < 0) {
      chosen->reset();
    } else {
      *chosen = static_cast<policy::RecoveryPolicy>(bcast_recv_);
    }
    return kWorkerExitOk;
  }

  // A shrink for a link / nic fault (adaptive's choice, or policy shrink): the group goes on
  // without the ranks whose paths are affected (AffectedCover). `by` names who shrank.
  int ShrinkAffected(const std::vector<int64_t>& v, const std::string& by) {
    const std::vector<int> cover = AffectedCover(v);
    if (cover.empty()) return kWorkerExitOk;  // only the coordinator is affected: go on
    if (std::find(cover.begin(), cover.end(), o_.rank) != cover.end()) {
      const std::string why = "left out by " + by + "'s shrink (a path of this rank is affected)";
      Guarded("abort", o_.timeout, std::nullopt, [&] {
        adapter_->Abort(why);
        return Status::Ok();
      }).IgnoreError();
      return Fail(why, first_fault_ns_.value_or(NowNs()));
    }
    const int code = ShrinkWithout(cover, by + " (a path fault)", NowNs(), Status::Ok());
    if (code != kWorkerExitOk) return code;
    const Status st =
        Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args_); });
    if (!st.ok()) return Fail("prepare after the shrink: " + st.ToString(), NowNs());
    return kWorkerExitOk;
  }

  // Policy fail_stop (or adaptive's choice): abort the communicator so that the peers fail
  // their next call too, then the end line asking for a restart of every rank.
  int FailStop(const std::string& why, int64_t first_fault_ns) {
    Guarded("abort", o_.timeout, std::nullopt, [&] {
      adapter_->Abort("fail_stop: " + why);
      return Status::Ok();
    }).IgnoreError();
    WorkerEnd end;
    end.ok = false;
    end.message = "fail_stop at step " + std::to_string(step_) + ": " + why +
                  " (every rank restarts from the last checkpoint)";
    end.t_ns = NowNs();
    end.first_error_ns = first_fault_ns;
    end.restart = true;
    log_.Write(WorkerEndLine(end));
    std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, end.message.c_str());
    return kWorkerExitRestart;
  }

  // The worker's own failure after the header: the end line, then `code`.
  int EndWith(int code, const std::string& message) {
    WorkerEnd end;
    end.ok = false;
    end.message = message;
    end.t_ns = NowNs();
    log_.Write(WorkerEndLine(end));
    std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, message.c_str());
    return code;
  }

  // Follows the paths' state from the library's events (for wait, adaptive and fail_stop).
  void NoteEvent(const CclEvent& e) {
    auto fault = [&] {
      fault_news_ = true;
      ++faults_seen_;
      if (!first_fault_ns_) first_fault_ns_ = e.time_ns;
      if (!news_since_ns_ || e.time_ns < *news_since_ns_) news_since_ns_ = e.time_ns;
    };
    // Events about a rank already left out (its connections' last words) are no fault here.
    if (e.peer >= 0 && std::find(excluded_.begin(), excluded_.end(), e.peer) != excluded_.end()) {
      return;
    }
    switch (e.kind) {
      case EventKind::kPathDown: {
        PathState& p = paths_[{e.peer, e.path}];
        if (!p.down_since) {
          p.down_since = e.time_ns;
          p.waited_out = false;
        }
        fault();
        break;
      }
      case EventKind::kPathUp: {
        auto it = paths_.find({e.peer, e.path});
        if (it != paths_.end() && it->second.down_since) {
          it->second.outage_ns += std::max<int64_t>(0, e.time_ns - *it->second.down_since);
          ++it->second.outages;
          it->second.down_since.reset();
        }
        break;
      }
      case EventKind::kRelayOn:
        relay_on_ = true;
        fault();
        break;
      case EventKind::kRelayOff:
        relay_on_ = false;
        break;
      case EventKind::kAbort:
        fault();
        break;
      default:
        break;
    }
    if (!fault_news_) news_since_ns_.reset();
  }

  bool AnyPathDown() const {
    for (const auto& [key, p] : paths_) {
      if (p.down_since) return true;
    }
    return false;
  }

  // A path down whose outage no hold has yet waited out: what the wait policy holds for.
  bool AnyPathToWaitFor() const {
    for (const auto& [key, p] : paths_) {
      if (p.down_since && !p.waited_out) return true;
    }
    return false;
  }

  // A CCL call failed: the end line, then the error exit code.
  int Fail(const std::string& message, int64_t first_error_ns) {
    WorkerEnd end;
    end.ok = false;
    end.message = message;
    end.t_ns = NowNs();
    end.first_error_ns = first_error_ns;
    log_.Write(WorkerEndLine(end));
    std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, message.c_str());
    return kWorkerExitCclError;
  }

  int InternalFailure(const std::string& message) {
    std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, message.c_str());
    return kWorkerExitInternal;
  }

  const WorkerOptions& o_;
  LogFile log_;
  // The buffers outlive the adapter: a library may touch them until it is destroyed.
  std::unique_ptr<AlignedBuffer> send_;
  std::unique_ptr<AlignedBuffer> recv_;
  std::vector<std::unique_ptr<AlignedBuffer>> retired_;  // buffers of failed collectives
  // Policy shrink: the world ranks left out so far, and this rank's place in the group.
  std::vector<int> excluded_;
  int group_size_ = o_.size;
  int group_rank_ = o_.rank;
  int32_t stop_send_ = 0;
  int32_t stop_recv_ = 0;
  std::unique_ptr<CclAdapter> adapter_;
  std::unique_ptr<Watchdog> watchdog_;  // after log_: it writes to it until destroyed
  workload::CheckSpec spec_;
  workload::SizeLayout layout_;
  workload::OpArgs args_;
  int64_t next_index_ = 0;
  // The train workload's state.
  struct PathState {
    std::optional<int64_t> down_since;  // down now, since then
    int64_t outage_ns = 0;              // past outages' total length and count
    int64_t outages = 0;
    // A hold already waited the whole bound for this outage: the wait policy does not hold for
    // it again (it falls back to the library's failover until the path returns).
    bool waited_out = false;
  };
  int64_t process_start_ns_ = 0;
  int64_t ready_ns_ = 0;
  std::vector<train::Checkpoint> candidates_;  // --resume: this rank's readable checkpoints
  int64_t resume_start_ns_ = 0;
  std::vector<float> params_;
  int64_t step_ = 0;   // steps done (the next step's global number)
  uint64_t base_ = 0;  // samples done
  int64_t last_ckpt_step_ = 0;
  int64_t last_ckpt_write_ns_ = 0;
  int64_t last_shrink_ns_ = 0;
  int64_t clean_steps_ = 0;  // fault-free steps, their total and allreduce time
  int64_t clean_step_ns_ = 0;
  int64_t clean_ar_ns_ = 0;
  int64_t last_ar_ns_ = 0;
  // adaptive: the library's measured throughput to each world rank (PeerRates), taken at the
  // clean steps: the fault-free reference for the survivors' ring (ShrunkStepTime). Empty:
  // the library measures none.
  std::vector<double> ref_rates_;
  std::map<std::pair<int, int>, PathState> paths_;  // (peer, path)
  bool relay_on_ = false;
  // WatchOwnPorts: this rank's rails' interfaces (RailInterfaces), their carrier transitions
  // when no fault was on, and whether one went down during the fault now going on.
  std::optional<NlSock> nl_;
  bool port_watch_off_ = false;
  std::vector<std::string> rail_interfaces_;
  std::vector<uint32_t> port_changes_;
  bool own_port_down_ = false;
  bool fault_news_ = false;     // a fault event since the last step boundary
  bool news_deferred_ = false;  // adaptive: news gathered, decided after one measured step
  uint64_t prev_base_ = 0;      // base_ before the last step (AgreeOnStep undoes that step)
  bool attention_ = true;       // wait, adaptive: some rank flagged the boundary in the last step
  int64_t boundary_from_step_ = -1;  // the boundary agrees at least at the step after this
  std::optional<int64_t> news_since_ns_;
  int64_t faults_seen_ = 0;
  std::optional<int64_t> first_fault_ns_;
  // adaptive's coordinator: when the outage its last decision priced should have ended.
  int64_t decided_until_ns_ = kPermanent;
  std::vector<int64_t> ctl_send_;
  std::vector<int64_t> ctl_recv_;
  int64_t bcast_send_ = 0;
  int64_t bcast_recv_ = 0;
};

}  // namespace

int RunWorker(const WorkerOptions& options) {
  Worker worker(options);
  return worker.Run();
}

}  // namespace faultline::runner
