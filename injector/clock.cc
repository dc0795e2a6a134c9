#include "injector/clock.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

RealtimeScope::RealtimeScope() {
  tid_ = static_cast<pid_t>(syscall(SYS_gettid));
  old_policy_ = sched_getscheduler(tid_);
  if (old_policy_ < 0 || sched_getparam(tid_, &old_param_) != 0) {
    old_policy_ = SCHED_OTHER;
    old_param_ = sched_param{};
  }
  old_policy_ &= ~SCHED_RESET_ON_FORK;
  sched_param p{};
  p.sched_priority = kPriority;
  if (sched_setscheduler(tid_, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) == 0) {
    raised_ = true;
    description_ = "SCHED_FIFO " + std::to_string(kPriority);
  } else {
    description_ = std::string("SCHED_OTHER (SCHED_FIFO refused: ") + std::strerror(errno) + ")";
  }
}

RealtimeScope::~RealtimeScope() {
  if (raised_) sched_setscheduler(tid_, old_policy_, &old_param_);
}

}  // namespace faultline
