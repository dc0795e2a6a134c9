// Launcher: starts the rank processes of a run, waits for them with deadlines and kills them,
// without ever leaving one behind. The one process-launching interface of the project: the
// runner execs faultline-worker ranks through it, the benchmarks (ftccl-perf, gloo-perf,
// tcp-capacity) and the multi-process tests (tests/cpp/ccl/rank_launcher.h, the worker tests)
// start their ranks through it.
//
// The interface is placement-based and world-based so that a scheduler fits behind it: a rank
// is argv + environment + a Placement (host index, local and global rank), and StartWorld
// starts every rank of the world at once; where and how the processes run is the launcher's
// business. LocalNetnsLauncher (below) runs every rank as a child of this process, each host
// as a network namespace of this machine. A Slurm launcher implements StartWorld as one `srun`
// job step of the whole world: --ntasks = the number of specs, --multi-prog with one line per
// task (its argv; the environment exported per task), each task placed on its host by
// --distribution=arbitrary over the host list in task order (Placement.host; SLURM_PROCID,
// SLURM_LOCALID and SLURM_NODEID agree with global rank, local rank and host); Wait/WaitAll
// read the tasks' exit states, Kill is `scancel --signal` of the step (or of one task through
// the host's agent). It returns no LocalPid and no ChannelFd, names the files it passes to
// `srun --output/--error` (per task, %t) in StdoutPath/StderrPath, and refuses fork launches
// (LaunchSpec::body). Callers that need a local pid (rank_pause/rank_kill faults) must handle
// its absence.
//
// Deadlines are CLOCK_MONOTONIC nanoseconds (faultline::MonoNow(), base/clock.h). Not
// thread-safe: one thread owns a launcher and makes every call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/status.h"

namespace faultline::runner {

struct Placement {
  int host = 0;         // index into the topology's hosts
  int local_rank = 0;   // rank index on that host
  int global_rank = 0;  // rank index in the world
};

// A fork launch's rank body: runs in the forked child, gets the write end of its channel to
// the parent (Launcher::ChannelFd), returns the rank's exit code.
using RankBody = std::function<int(int channel_fd)>;

struct LaunchSpec {
  // Exec launch: argv[0] is the program, a path or a name looked up in $PATH.
  std::vector<std::string> argv;
  // "KEY=VALUE" entries set on top of the launcher's own environment (exec launch).
  std::vector<std::string> env;
  // Fork launch: when set, the child runs body(channel_fd) in a copy of this process instead of
  // exec'ing argv, then exits with its return value (stdio flushed). The child keeps this
  // process's signal dispositions, mask and descriptors (less the launcher's own); a body
  // that throws ends the rank with SIGABRT. REQUIRES: the calling process has no other
  // threads (a forked child inherits only the calling thread; locks held by others stay held).
  RankBody body;
  Placement placement;
  // Names the rank's log files; empty: "rank<global_rank>".
  std::string name;
};

struct ExitStatus {
  enum class State { kRunning, kExited, kSignaled };
  State state = State::kRunning;
  int code = 0;                     // kExited: the exit code
  int signal = 0;                   // kSignaled: the terminating signal
  bool killed_by_watchdog = false;  // WaitAll sent the SIGKILL
  bool running() const { return state == State::kRunning; }
  bool success() const { return state == State::kExited && code == 0; }
  // "running", "exited 3", "killed by SIGKILL (watchdog)".
  std::string ToString() const;
};

// What WaitAll saw: the final status of every rank (in Start order) and which ranks the
// watchdog killed. hung() means the run's outcome is `hung`.
struct WaitAllReport {
  std::vector<ExitStatus> statuses;
  std::vector<int> killed;  // handles killed at the deadline, ascending
  bool hung() const { return !killed.empty(); }
};

class Launcher {
 public:
  // A launcher's destructor kills (SIGKILL) and reaps every rank still running.
  virtual ~Launcher() = default;

  // Starts the whole world of ranks at once, one process per spec; returns their handles in
  // spec order (handles count 0, 1, ... over every start of this launcher). All or nothing:
  // when one rank cannot start (program not found or not executable, unknown placement, host
  // not enterable, a body given to a launcher that cannot fork it), the ranks of this call
  // already started are killed and reaped, no handle is added, and the error names the rank.
  virtual Result<std::vector<int>> StartWorld(const std::vector<LaunchSpec>& specs) = 0;
  // Starts one more rank: StartWorld of one spec.
  Result<int> Start(const LaunchSpec& spec);
  // Waits until the rank has exited or `deadline_ns` passes; a status with state kRunning
  // means the deadline passed first. A deadline in the past polls. InvalidArgument for an
  // unknown handle.
  virtual Result<ExitStatus> Wait(int handle, int64_t deadline_ns) = 0;
  // Sends `sig` to the rank and to every process of its process group. Ok when the rank has
  // already exited (nothing to signal).
  virtual Status Kill(int handle, int sig) = 0;
  // The watchdog: waits for every rank until `deadline_ns`, then SIGKILLs each one still
  // running, waits for it to go and reports it in `killed`.
  virtual WaitAllReport WaitAll(int64_t deadline_ns) = 0;

  virtual int size() const = 0;
  // The last status seen by Wait/WaitAll (kRunning before the exit was observed).
  virtual ExitStatus status(int handle) const = 0;
  // The rank's pid on this machine, when the launcher runs it here.
  virtual std::optional<pid_t> LocalPid(int handle) const = 0;
  // stdout and stderr log files of the rank; "" when the rank writes to the launcher's own.
  virtual std::string StdoutPath(int handle) const = 0;
  virtual std::string StderrPath(int handle) const = 0;
  // The parent's (read) end of a fork-launched rank's channel, owned by the launcher and open
  // until it is destroyed; end of file once the rank has exited. -1 for exec-launched ranks
  // and launchers that do not fork.
  virtual int ChannelFd(int handle) const = 0;
};

// Forks each rank; the child starts its own process group, arranges SIGKILL on the launcher
// thread's death (PR_SET_PDEATHSIG), enters its host's network namespace (setns CLONE_NEWNET),
// reads stdin from /dev/null, sends stdout/stderr to <log_dir>/<name>.out and .err (or keeps
// this process's when log_dir is empty), then execs argv with a clean signal state or runs
// the body. Every wait uses a pidfd, so a pid is never recycled under us. One core serves
// both kinds of launch: what differs is only the child's last step, so the runner's worker
// ranks and the tests' function ranks share the same start report, watchdog, reaping and
// no-leftover guarantee.
// REQUIRES: the thread that calls Start/StartWorld lives as long as the ranks
// (PR_SET_PDEATHSIG fires when the forking thread exits).
class LocalNetnsLauncher final : public Launcher {
 public:
  // `host_netns[h]` is the namespace of host h ("" runs that host's ranks in the launcher's
  // own namespace). `log_dir` is created when missing; empty: the ranks keep this process's
  // stdout and stderr.
  static Result<std::unique_ptr<LocalNetnsLauncher>> Create(std::vector<std::string> host_netns,
                                                            std::string log_dir);
  LocalNetnsLauncher(const LocalNetnsLauncher&) = delete;
  LocalNetnsLauncher& operator=(const LocalNetnsLauncher&) = delete;
  ~LocalNetnsLauncher() override;  // noexcept: SIGKILL + reap of every running rank

  Result<std::vector<int>> StartWorld(const std::vector<LaunchSpec>& specs) override;
  Result<ExitStatus> Wait(int handle, int64_t deadline_ns) override;
  Status Kill(int handle, int sig) override;
  WaitAllReport WaitAll(int64_t deadline_ns) override;

  int size() const override { return static_cast<int>(ranks_.size()); }
  ExitStatus status(int handle) const override;
  std::optional<pid_t> LocalPid(int handle) const override;
  std::string StdoutPath(int handle) const override;
  std::string StderrPath(int handle) const override;
  int ChannelFd(int handle) const override;

 private:
  struct Rank {
    pid_t pid = 0;
    UniqueFd pidfd;    // closed once reaped
    UniqueFd channel;  // fork launch: the read end of the rank's channel
    std::string name;
    ExitStatus status;
  };
  LocalNetnsLauncher(std::vector<std::string> host_netns, std::string log_dir)
      : host_netns_(std::move(host_netns)), log_dir_(std::move(log_dir)) {}
  Status CheckHandle(int handle) const;
  // Forks one rank and waits for its start report; on success appends it to ranks_.
  Status StartOne(const LaunchSpec& spec);
  // Reaps the rank if it has exited (non-blocking); true when it is no longer running.
  bool TryReap(Rank& r);
  // SIGKILLs the rank's process group and reaps it (blocking until it is gone).
  void KillAndReap(Rank& r) noexcept;

  std::vector<std::string> host_netns_;
  std::string log_dir_;
  std::vector<Rank> ranks_;
};

}  // namespace faultline::runner
