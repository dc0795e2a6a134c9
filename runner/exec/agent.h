// faultline-agent: one per host of a fleet run (`faultline agent`), started as its own Slurm
// step (srun --overlap, one task per node) or by hand. It owns its host's injector and journal:
// the runner sends it fault actions over the management network, it applies them locally,
// reads their effect back from its kernel and returns the times it observed on its own clock
// (CLOCK_MONOTONIC), which the runner maps to its clock with the offset it measured.
//
// Protocol: one TCP connection from the runner; newline-delimited JSON requests, one JSON
// response line each ({"ok": true, ...} or {"ok": false, "error": "..."}). Every request
// carries the run's token. Ops:
//   hello  -> {node, node_id, job_id, pid, healed}   (job_id: its Slurm job, "" by hand;
//                                             healed: journal entries of an earlier agent undone)
//   clock  -> {t2, t3}                        (receive and send times: a 4-timestamp exchange)
//   apply  {id, kind, params, at_ns}          -> {timing, error}   (the injector's StepTiming)
//   revert {id, at_ns}                        -> {timing, error}
//   renew                                     -> {}                (the lease)
//   rails_start {ports, period_ns, start_at_ns, reserve} -> {capacity: [{bps, source}]}
//                                             (samples these rail ports; each one's capacity
//                                              as this host's sysfs reports it, null unknown)
//   rails_stop                                -> {series, errors, late_samples}
//     (the ports' byte counters from start_at_ns on, on this host's clock: rail_sampler.h,
//      in the form of RailSeriesToJson, runner/core/rails.h)
//   bye                                       -> {healed}          (heals everything, exits)
// A rank fault names the rank by {"procid": N}; the agent finds that task's process on its
// host (the Slurm task whose SLURM_PROCID, SLURM_JOB_ID and SLURM_STEP_ID match) itself.
//
// A target's namespace "." (kOwnNetns, also in the allowlist: "./DEV") is the agent's own: a
// real host's interfaces. The agent names it by its /run/netns name where it has one (the
// one-box cluster's host namespaces), so that its journal says where to undo. A socket fault
// may name its rail by {"src_dev": DEV} (allowlisted) for the agent to use DEV's IPv4 address.
//
// Security: it listens only on the address it is given; a request without the token (from
// FAULTLINE_AGENT_TOKEN, handed over through the Slurm step's environment, never argv) is
// refused and the connection closed; it acts only on the interfaces of its allowlist
// (NETNS/DEV entries; also the only ports it samples) and on fault-hook sockets under its
// allowed directory; a request line over 1 MiB closes the connection. Lease: when no
// request arrives for `lease_ms`, the runner is gone: the agent heals everything and exits,
// as it does on SIGTERM/SIGINT. On start it undoes whatever its journal still holds (a killed
// predecessor's faults), so a fresh agent step is also the repair.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::runner {

struct AgentOptions {
  // Addresses to listen on, by SLURM_NODEID (one entry: used whatever the node).
  std::vector<std::string> listen;
  int port = 0;
  std::vector<std::string> allow;  // NETNS/DEV entries
  std::string hook_dir;            // fault-hook sockets allowed under this directory
  std::string journal_dir;         // empty: <default journal>/agent-<node>
  int64_t lease_ms = 3000;
};

// Runs the agent until the lease lapses, `bye`, or a signal; returns the exit code.
int RunAgent(const AgentOptions& options);

// The rank process of Slurm task `procid` of step `job`.`step` (empty: any) on this host: of
// the processes whose environment names that task and that run in the network namespace
// `netns_inode` (the host's), the one whose parent is among them (the rank under `faultline
// task-exec`), else the only one. The namespace matters because job ids are unique per Slurm
// controller, not per machine: two one-box clusters on one machine both have a job 1.
// Fails with NotFound when no such process (or no single one) exists.
Result<int> FindSlurmTaskPid(int procid, const std::string& job, const std::string& step,
                             uint64_t netns_inode);

}  // namespace faultline::runner
