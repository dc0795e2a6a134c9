// Processes (ranks) as fault targets: state from /proc, race-free signals through pidfds.
//
// A process is identified by (pid, start time) so that a recycled pid is never signalled,
// also by `faultline cleanup` long after the journal entry was written.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace faultline {

class TargetPolicy;

struct ProcessRef {
  int pid = 0;
  uint64_t start_time = 0;  // field 22 of /proc/PID/stat (clock ticks since boot)
};

// The state letter of /proc/PID/stat (R, S, D, T, t, Z, ...). NotFound when gone.
Result<char> ProcessState(int pid);
Result<ProcessRef> LookupProcess(int pid);
// Sends `sig` through a pidfd after checking that the start time still matches.
// NotFound when the process is gone or the pid was reused.
Status SignalProcess(const ProcessRef& ref, int sig);
// Polls /proc until the state satisfies `want` ('T' = stopped, 'R' = not stopped,
// 'X' = gone or zombie) or `timeout_ns` passes; returns the last state seen ('X' when gone).
char WaitProcessState(int pid, char want, int64_t timeout_ns);
// A process may be targeted when it is not this process or init, and it lives in `netns`
// (its /proc/PID/ns/net is that namespace), which passes the policy.
Status CheckProcessTarget(int pid, const std::string& netns, const TargetPolicy& policy);

}  // namespace faultline
