// How the worker tests wait for a worker rank started through the launcher (runner/exec/launcher.h):
// up to a limit, then SIGKILL, reporting how it ended and when.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>

#include "base/clock.h"
#include "runner/exec/launcher.h"

namespace faultline::runner {

struct Exit {
  bool exited = false;  // false: still running at the limit (then killed) or signalled
  int code = -1;
  int signal = 0;
  std::chrono::milliseconds after{0};  // since the wait began
};

// Waits for `handle` until `limit` from now; kills it when it is still running then (and
// reports it as not exited, with no signal).
inline Exit WaitOrKill(Launcher& launcher, int handle, std::chrono::milliseconds limit) {
  Exit e;
  const MonoNs start = MonoNow();
  auto since = [&] { return std::chrono::milliseconds((MonoNow() - start) / 1'000'000); };
  auto s = launcher.Wait(handle, start + static_cast<int64_t>(limit.count()) * 1'000'000);
  if (!s.ok() || s->running()) {
    launcher.Kill(handle, SIGKILL).IgnoreError();
    launcher.Wait(handle, INT64_MAX).status().IgnoreError();
    e.after = since();
    return e;
  }
  e.after = since();
  e.exited = s->state == ExitStatus::State::kExited;
  e.code = e.exited ? s->code : -1;
  e.signal = s->state == ExitStatus::State::kSignaled ? s->signal : 0;
  return e;
}

}  // namespace faultline::runner
