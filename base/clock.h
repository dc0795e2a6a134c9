// Time on CLOCK_MONOTONIC (shared by every namespace on a host), in nanoseconds, and absolute
// sleeps on it.
//
// Fault times are absolute: a fault scheduled at T is applied by sleeping until T with
// clock_nanosleep(TIMER_ABSTIME), so errors do not accumulate over a timeline. How the sleeping
// thread is scheduled (SCHED_FIFO) is the injector's concern: injector/realtime_scope.h.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace faultline {

using MonoNs = int64_t;

// Now on CLOCK_MONOTONIC.
MonoNs MonoNow();

// Sleeps until `deadline` (absolute CLOCK_MONOTONIC). Returns early only if `*stop` becomes
// true (checked at least every 10 ms when stop is given) or on a signal when
// `return_on_signal`. Returns true when the deadline was reached.
bool SleepUntil(MonoNs deadline, const std::atomic<bool>* stop = nullptr,
                bool return_on_signal = false);

// Nanoseconds since the Unix epoch (for human-readable records only, never for scheduling).
int64_t WallNowNs();

}  // namespace faultline
