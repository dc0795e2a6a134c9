// Time on CLOCK_MONOTONIC (shared by every namespace on a host), in nanoseconds.
//
// Fault times are absolute: a fault scheduled at T is applied by sleeping until T with
// clock_nanosleep(TIMER_ABSTIME), so errors do not accumulate over a timeline.
// Thread-safe.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace faultline {

using MonoNs = int64_t;

// Now on CLOCK_MONOTONIC.
MonoNs MonoNow();

// Sleeps until `deadline` (absolute CLOCK_MONOTONIC). Returns early only if `*stop` becomes
// true (checked at least every 10 ms when stop is given) or on a signal when
// `return_on_signal`. Returns true when the deadline was reached.
bool SleepUntil(MonoNs deadline, const std::atomic<bool>* stop = nullptr,
                bool return_on_signal = false);

// For the scope of one object, the calling thread is scheduled SCHED_FIFO (when the process
// may: root or CAP_SYS_NICE), so that it wakes on time on a host whose cores are all busy.
// Meant for a thread that sleeps to fault times and makes short kernel calls, so it starves
// nothing. Children forked meanwhile start as SCHED_OTHER (SCHED_RESET_ON_FORK); the old policy
// is back when the object goes. Not thread-safe: one per thread, destroyed on that thread.
class RealtimeScope final {
 public:
  static constexpr int kPriority = 10;
  RealtimeScope();
  ~RealtimeScope();
  RealtimeScope(const RealtimeScope&) = delete;
  RealtimeScope& operator=(const RealtimeScope&) = delete;
  bool raised() const { return raised_; }
  // "SCHED_FIFO 10", or "SCHED_OTHER (SCHED_FIFO refused: <why>)": for reports.
  const std::string& description() const { return description_; }

 private:
  pid_t tid_ = 0;
  int old_policy_ = SCHED_OTHER;
  sched_param old_param_{};
  bool raised_ = false;
  std::string description_;
};

// Nanoseconds since the Unix epoch (for human-readable records only, never for scheduling).
int64_t WallNowNs();

}  // namespace faultline
