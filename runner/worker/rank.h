// Rank: the mechanics one rank process shares between its workloads (collective_loop.h,
// train_loop.h): the log, the CCL adapter and its calls under the watchdog, joining the group,
// the common time zero, the library's events, the group after shrinks, the step buffers, and
// how the rank ends (the end line and the exit code, worker.h).
//
// Ownership: the buffers outlive the adapter (a library may touch them until it is destroyed);
// a workload's own small control buffers must outlive Finish(). Not thread-safe (the
// watchdog's thread only reads what Arm hands it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/worker_log.h"
#include "runner/worker/rank_io.h"
#include "runner/worker/worker.h"
#include "workload/adapters/ccl_adapter.h"

namespace faultline::runner {

class Rank final {
 public:
  explicit Rank(const WorkerOptions& options) : o_(options) {}
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  // Opens the log and creates the adapter. kWorkerExitOk, or the exit code to end with.
  int Open();
  // After the workload returned `code`: the library's teardown, bounded by the watchdog.
  // Returns `code`.
  int Finish(int code);

  const WorkerOptions& options() const { return o_; }
  LogFile& log() { return log_; }
  workload::adapters::CclAdapter& ccl() { return *adapter_; }
  const workload::adapters::CclAdapter& ccl() const { return *adapter_; }
  int64_t process_start_ns() const { return process_start_ns_; }
  int64_t ready_ns() const { return ready_ns_; }

  // The init parameters of the options.
  workload::adapters::CclInit InitOf() const;
  // Starts the watchdog, joins the group, prepares `args`; then the ready line.
  int Join(const workload::adapters::CclInit& init, const workload::OpArgs& args);
  // Waits for the common time zero; a rank that joined too late starts at once.
  void WaitForStart() const;
  // The header fields both workloads fill alike.
  WorkerHeader HeaderBase() const;

  // Runs one CCL call under the watchdog (deadline `limit` plus grace from the op's start or
  // now).
  Status Guarded(const std::string& what, std::chrono::milliseconds limit,
                 std::optional<WorkerOp> op, const std::function<Status()>& call);
  // adapter Run / Prepare / Abort, guarded with the per-call timeout.
  Status RunCall(const std::string& what, const workload::OpArgs& args,
                 std::optional<WorkerOp> op = std::nullopt);
  Status Prepare(const workload::OpArgs& args);
  void Abort(const std::string& why);

  // Logs the library's events (kinds the runner does not know are left out) and hands each
  // to the sink, if one is set.
  void DrainEvents();
  void SetEventSink(std::function<void(const CclEvent&)> sink) { sink_ = std::move(sink); }

  // The group: world ranks left out so far, its size, this rank's place, its members in order.
  const std::vector<int>& excluded() const { return excluded_; }
  int group_size() const { return group_size_; }
  int group_rank() const { return group_rank_; }
  std::vector<int> Members() const;
  // Shrinks the group without `lost_ranks` (after `what` failed at failed_ns with `why`, or by
  // a decision): the shrink line, then the new group. kWorkerExitOk (with the shrink's
  // duration in *took_ns), or the error exit when the shrink failed.
  int ShrinkWithout(const std::vector<int>& lost_ranks, const std::string& what, int64_t failed_ns,
                    const Status& why, int64_t* took_ns);

  // Grows the group by `joiners` (world ranks left out before, appended in this order: a
  // member's side of a rejoin) with the library's Grow of `grow_id`. On failure the group is
  // unchanged and still usable.
  Status GrowWith(const std::string& grow_id, const std::vector<int>& joiners);
  // A left-out rank's side of a rejoin (its communicator aborted): joins the grown group whose
  // world ranks are `members`, in the group's order. On success this rank is a member again.
  Status JoinGrown(const workload::adapters::CclInit& init, const std::string& grow_id,
                   const std::vector<int>& members);

  // New send / recv buffers; the old ones (revoked after a failure) stay allocated until the
  // end. kWorkerExitOk or the internal failure.
  int NewBuffers(size_t send_bytes, size_t recv_bytes);
  void* send() const { return send_->data; }
  void* recv() const { return recv_->data; }
  // A call that returned `st`: its op line, failed. The library's promise, checked: from here
  // on, until the communicator is gone, any touch of the failed call's buffers crashes the rank.
  void LogFailedOp(WorkerOp* op, const Status& st);

  // Ends: a CCL call failed (kWorkerExitCclError), after which the rank cannot shrink, the
  // worker's own failure after the header (`code`), or before it (kWorkerExitInternal).
  int Fail(const std::string& message, int64_t first_error_ns);
  int FailUnshrinkable(const std::string& what, int64_t failed_ns, const Status& why, int lost);
  int EndWith(int code, const std::string& message);
  int InternalFailure(const std::string& message);

 private:
  void SetMembers(const std::vector<int>& members);

  const WorkerOptions& o_;
  LogFile log_;
  // The buffers outlive the adapter: a library may touch them until it is destroyed.
  std::unique_ptr<AlignedBuffer> send_;
  std::unique_ptr<AlignedBuffer> recv_;
  std::vector<std::unique_ptr<AlignedBuffer>> retired_;  // buffers of failed calls
  std::vector<int> excluded_;
  // The group's world ranks in the library's order (a grow appends its joiners); empty: the
  // world in order.
  std::vector<int> members_;
  int group_size_ = o_.size;
  int group_rank_ = o_.rank;
  std::unique_ptr<workload::adapters::CclAdapter> adapter_;
  std::unique_ptr<Watchdog> watchdog_;  // after log_: it writes to it until destroyed
  std::function<void(const CclEvent&)> sink_;
  int64_t process_start_ns_ = 0;
  int64_t ready_ns_ = 0;
};

}  // namespace faultline::runner
