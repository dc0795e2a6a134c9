#include "runner/worker/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "runner/core/worker_log.h"
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

    watchdog_ = std::make_unique<Watchdog>(&log_);
    CclInit init;
    init.rank = o_.rank;
    init.size = o_.size;
    init.bootstrap = o_.bootstrap;
    init.rails = o_.rails;
    init.store_dir = o_.store_dir;
    init.init_timeout = o_.init_timeout;
    init.op_timeout = o_.timeout;
    init.fault_hook = o_.fault_hook;
    st = Guarded("init", o_.init_timeout, std::nullopt, [&] { return adapter_->Init(init); });
    if (!st.ok()) return Fail("init: " + st.ToString(), NowNs());
    st = Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args_); });
    if (!st.ok()) return Fail("prepare: " + st.ToString(), NowNs());
    // Joined and prepared: the launch is over for this rank (the runner's launch figure).
    if (!log_.Write(WorkerReadyLine(NowNs()))) return InternalFailure("cannot write the log");

    if (o_.start_at_ns) {
      // Wait for the common time zero; a rank that joined too late starts at once.
      timespec ts{static_cast<time_t>(*o_.start_at_ns / 1000000000),
                  static_cast<long>(*o_.start_at_ns % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
    }
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
        op.ok = false;
        op.error = st.ToString();
        // The library's promise, checked: from here on, until the communicator is gone, any
        // touch of the failed collective's buffers crashes this rank.
        if (adapter_->ReleasesBuffersOnReturn()) {
          send_->Revoke();
          recv_->Revoke();
        }
        log_.Write(WorkerOpLine(op));
        if (o_.policy == "shrink" && adapter_->CanShrink()) {
          const int code =
              ShrinkAfter("collective " + std::to_string(op.index), op.end_ns, st);
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
    if (lost == o_.rank) {
      return Fail(what + ": " + why.ToString() +
                      " (this rank was left out: the others lost it and shrink without it)",
                  failed_ns);
    }
    if (lost < 0) {
      return Fail(what + ": " + why.ToString() +
                      " (no shrink: the library names no lost rank)",
                  failed_ns);
    }
    excluded_.push_back(lost);
    ShrinkRecord rec;
    rec.rank = o_.rank;
    rec.excluded = excluded_;
    rec.start_ns = NowNs();
    Status st = Guarded("shrink", o_.init_timeout, std::nullopt,
                        [&] { return adapter_->Shrink({lost}, o_.init_timeout); });
    rec.end_ns = NowNs();
    DrainEvents();
    std::vector<int> members;
    for (int r = 0; r < o_.size; ++r) {
      if (std::find(excluded_.begin(), excluded_.end(), r) == excluded_.end()) members.push_back(r);
    }
    rec.group = static_cast<int>(members.size());
    rec.ok = st.ok();
    if (!st.ok()) rec.error = st.ToString();
    log_.Write(WorkerShrinkLine(rec));
    if (!st.ok()) {
      return Fail(what + ": " + why.ToString() +
                      "; shrink without rank " + std::to_string(lost) + ": " + st.ToString(),
                  failed_ns);
    }
    group_size_ = rec.group;
    group_rank_ = static_cast<int>(std::find(members.begin(), members.end(), o_.rank) -
                                   members.begin());
    // A rooted collective keeps its root, at that rank's place in the new group.
    auto root = std::find(members.begin(), members.end(), o_.root);
    if (root == members.end()) {
      return Fail(what + ": the root rank " +
                      std::to_string(o_.root) + " was lost; a rooted collective cannot go on",
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
    st = Guarded("prepare", o_.timeout, std::nullopt, [&] { return adapter_->Prepare(args_); });
    if (!st.ok()) return Fail("prepare after the shrink: " + st.ToString(), NowNs());
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
    }
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
};

}  // namespace

int RunWorker(const WorkerOptions& options) {
  Worker worker(options);
  return worker.Run();
}

}  // namespace faultline::runner
