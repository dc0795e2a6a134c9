#include "base/clock.h"

#include <cerrno>
#include <ctime>

namespace faultline {
namespace {
constexpr MonoNs kStopPollNs = 10'000'000;  // 10 ms

timespec ToTimespec(MonoNs ns) {
  timespec ts;
  ts.tv_sec = ns / 1'000'000'000;
  ts.tv_nsec = ns % 1'000'000'000;
  return ts;
}
}  // namespace

MonoNs MonoNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<MonoNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t WallNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool SleepUntil(MonoNs deadline, const std::atomic<bool>* stop, bool return_on_signal) {
  for (;;) {
    if (stop != nullptr && stop->load()) return false;
    MonoNs target = deadline;
    if (stop != nullptr) {
      MonoNs poll = MonoNow() + kStopPollNs;
      if (poll < target) target = poll;
    }
    timespec ts = ToTimespec(target);
    int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    if (rc == EINTR && return_on_signal) return false;
    if (rc == 0 && target == deadline) return true;
    if (MonoNow() >= deadline) return true;
  }
}

}  // namespace faultline
