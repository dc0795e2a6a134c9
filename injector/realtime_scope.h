// RealtimeScope: kernel scheduling for the thread that applies faults at their times.
//
// Kept in the injector, not in base/clock.h: it changes the calling thread's scheduling policy
// (sched_setscheduler, root or CAP_SYS_NICE), a side effect on the kernel that only the thread
// driving a fault timeline wants; reports and workload read clocks but never need it.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <string>

namespace faultline {

// For the scope of one object, the calling thread is scheduled SCHED_FIFO (when the process
// may: root or CAP_SYS_NICE), so that it wakes on time on a host whose cores are all busy.
// Meant for a thread that sleeps to fault times and makes short kernel calls, so it starves
// nothing. Children forked meanwhile start as SCHED_OTHER (SCHED_RESET_ON_FORK); the old policy
// is back when the object goes. Not thread-safe: one per thread, destroyed on that thread.
class RealtimeScope final {
 public:
  static constexpr int kPriority = 10;
  // A sampler that must keep its own clock on a busy host (the rail sampler): realtime too,
  // so compilers and training processes do not push its ticks off the grid, but below the
  // fault timing, which preempts it.
  static constexpr int kSamplerPriority = 5;
  explicit RealtimeScope(int priority = kPriority);
  ~RealtimeScope();
  RealtimeScope(const RealtimeScope&) = delete;
  RealtimeScope& operator=(const RealtimeScope&) = delete;
  bool raised() const { return raised_; }
  // "SCHED_FIFO <priority>", or "SCHED_OTHER (SCHED_FIFO refused: <why>)": for reports.
  const std::string& description() const { return description_; }

 private:
  pid_t tid_ = 0;
  int old_policy_ = SCHED_OTHER;
  sched_param old_param_{};
  bool raised_ = false;
  std::string description_;
};

}  // namespace faultline
