// SlurmLauncher: the whole world of ranks as one `srun` job step (launcher.h). Inside an
// allocation (salloc/sbatch: SLURM_JOB_ID set) the step runs in it; otherwise srun asks for one.
//
// srun starts `faultline task-exec --dir <log_dir>/tasks` as every task, with --nodes = the
// hosts, --ntasks-per-node = the ranks per host and --distribution=block over the node list in
// host order, so SLURM_NODEID, SLURM_LOCALID and SLURM_PROCID are the spec's host, local and
// global rank. The task reads its spec (argv, environment, placement, log names) from
// tasks/task<PROCID>.json, refuses to run a rank placed elsewhere, runs it as its child with
// stdout/stderr in <log_dir>/<name>.out/.err, and records its exit (exited N / killed by S) in
// tasks/task<PROCID>.status, which Wait reads; tasks/task<PROCID>.started says where and in
// which job step it runs. So the log directory must be on a file system every node shares, as
// it is on a Slurm cluster's home or scratch; srun's own output goes to <log_dir>/srun.err.
//
// Kill of the whole world (the watchdog, the destructor) is `scancel --signal` of the job step.
// One rank is signalled through its host's agent, so Kill of a single rank, LocalPid and
// ChannelFd are not available here (Unimplemented / nullopt / -1); fork launches are refused.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/exec/launcher.h"

namespace faultline::runner {

struct SlurmLauncherOptions {
  std::string log_dir;                  // shared by every node
  std::string task_exe;                 // the faultline binary (`task-exec`)
  std::string netns;                    // where srun and scancel run; "" = here
  std::vector<std::string> client_env;  // e.g. SLURM_CONF=...
  std::vector<std::string> nodes;       // node names by host index; empty: the allocation's
  std::string partition;                // "" = the default
  std::string job_name = "faultline";
};

// Where a step runs, from its first task's .started file.
struct SlurmStep {
  std::string job_id;
  std::string step_id;
};

class SlurmLauncher final : public Launcher {
 public:
  static Result<std::unique_ptr<SlurmLauncher>> Create(SlurmLauncherOptions options);
  SlurmLauncher(const SlurmLauncher&) = delete;
  SlurmLauncher& operator=(const SlurmLauncher&) = delete;
  ~SlurmLauncher() override;  // scancel of a step still running, srun reaped

  Result<std::vector<int>> StartWorld(const std::vector<LaunchSpec>& specs) override;
  Result<ExitStatus> Wait(int handle, int64_t deadline_ns) override;
  Status Kill(int handle, int sig) override;
  WaitAllReport WaitAll(int64_t deadline_ns) override;
  int size() const override { return static_cast<int>(tasks_.size()); }
  ExitStatus status(int handle) const override;
  std::optional<pid_t> LocalPid(int) const override { return std::nullopt; }
  std::string StdoutPath(int handle) const override;
  std::string StderrPath(int handle) const override;
  int ChannelFd(int) const override { return -1; }

  // The job step, once a task has started (nullopt before).
  std::optional<SlurmStep> step() const;
  // Monotonic time at which the last task of the world had started (its .started file), or
  // nullopt while one has not.
  std::optional<int64_t> AllStartedNs() const;

 private:
  explicit SlurmLauncher(SlurmLauncherOptions o) : o_(std::move(o)) {}
  struct Task {
    std::string name;
    ExitStatus status;
  };
  std::string TaskDir() const { return o_.log_dir + "/tasks"; }
  bool Poll(int handle);          // reads the task's status file; true once it has exited
  bool SrunExited();
  void ReadSrunVerdicts();        // "task N: Exited with exit code C" lines for tasks without status
  Status ScancelStep(int sig);
  SlurmLauncherOptions o_;
  std::unique_ptr<LocalNetnsLauncher> srun_;  // runs srun (and scancel) in o_.netns
  int srun_handle_ = -1;
  std::vector<Task> tasks_;
};

// The task side (`faultline task-exec --dir D`): runs the spec of SLURM_PROCID as described
// above; returns the exit code the task must end with (or raises the rank's signal).
int RunSlurmTask(const std::string& dir);

}  // namespace faultline::runner
