// Launcher: starts the rank processes of a run on their hosts, waits for them with deadlines
// and kills them, without ever leaving one behind.
//
// The interface is placement-based so that other launchers fit behind it: a rank is given as
// argv + environment + a Placement (host index, local and global rank); where and how the
// process runs is the launcher's business. LocalNetnsLauncher (below) runs every host as a
// network namespace of this machine. A Slurm launcher implements the same calls with one
// `srun --nodelist=<host> --ntasks=1` job step per rank (Start), the step's exit state (Wait,
// WaitAll) and `scancel --signal` (Kill); it returns no LocalPid, and LogPaths names the files
// it passes to `srun --output/--error`. Callers that need a local pid (rank_pause/rank_kill
// faults) must handle its absence.
//
// Deadlines are CLOCK_MONOTONIC nanoseconds (faultline::MonoNow(), base/clock.h). Not
// thread-safe: one thread owns a launcher and makes every call.
#pragma once

#include <sys/types.h>

#include <cstdint>
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

struct LaunchSpec {
  // argv[0] is the program: a path, or a name looked up in $PATH.
  std::vector<std::string> argv;
  // "KEY=VALUE" entries set on top of the launcher's own environment.
  std::vector<std::string> env;
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

  // Starts one rank; returns its handle (0, 1, ... in Start order). Fails (and leaves no
  // process) when the program cannot be found or executed, the placement is unknown or the
  // host cannot be entered.
  virtual Result<int> Start(const LaunchSpec& spec) = 0;
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
  // stdout and stderr log files of the rank.
  virtual std::string StdoutPath(int handle) const = 0;
  virtual std::string StderrPath(int handle) const = 0;
};

// Forks each rank; the child enters its host's network namespace (setns CLONE_NEWNET), starts
// its own process group, arranges SIGKILL on the launcher thread's death
// (PR_SET_PDEATHSIG), sends stdout/stderr to <log_dir>/<name>.out and .err, reads stdin from
// /dev/null and execs. Every wait uses a pidfd, so a pid is never recycled under us.
// REQUIRES: the thread that calls Start lives as long as the ranks (PR_SET_PDEATHSIG fires
// when the forking thread exits).
class LocalNetnsLauncher final : public Launcher {
 public:
  // `host_netns[h]` is the namespace of host h ("" runs that host's ranks in the launcher's
  // own namespace). `log_dir` is created when missing.
  static Result<std::unique_ptr<LocalNetnsLauncher>> Create(std::vector<std::string> host_netns,
                                                            std::string log_dir);
  LocalNetnsLauncher(const LocalNetnsLauncher&) = delete;
  LocalNetnsLauncher& operator=(const LocalNetnsLauncher&) = delete;
  ~LocalNetnsLauncher() override;  // noexcept: SIGKILL + reap of every running rank

  Result<int> Start(const LaunchSpec& spec) override;
  Result<ExitStatus> Wait(int handle, int64_t deadline_ns) override;
  Status Kill(int handle, int sig) override;
  WaitAllReport WaitAll(int64_t deadline_ns) override;

  int size() const override { return static_cast<int>(ranks_.size()); }
  ExitStatus status(int handle) const override;
  std::optional<pid_t> LocalPid(int handle) const override;
  std::string StdoutPath(int handle) const override;
  std::string StderrPath(int handle) const override;

 private:
  struct Rank {
    pid_t pid = 0;
    UniqueFd pidfd;  // closed once reaped
    std::string name;
    ExitStatus status;
  };
  LocalNetnsLauncher(std::vector<std::string> host_netns, std::string log_dir)
      : host_netns_(std::move(host_netns)), log_dir_(std::move(log_dir)) {}
  Status CheckHandle(int handle) const;
  // Reaps the rank if it has exited (non-blocking); true when it is no longer running.
  bool TryReap(Rank& r);
  // SIGKILLs the rank's process group and reaps it (blocking until it is gone).
  void KillAndReap(Rank& r) noexcept;

  std::vector<std::string> host_netns_;
  std::string log_dir_;
  std::vector<Rank> ranks_;
};

}  // namespace faultline::runner
