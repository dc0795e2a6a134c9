// MpiLauncher: starts the whole world of a library whose ranks are started by the MPI's own
// launcher (LaunchStyle::kMpiLauncher), on the hosts of a namespace topology: Open MPI's
// mpirun, or MPICH's Hydra mpiexec (mpiexec.hydra, named so that it never is Open MPI's through
// Debian's mpiexec alternative). No PMI of the project's: mpirun, its orted daemons and their
// PMIx server, or mpiexec, its hydra_pmi_proxy daemons and their PMI, wire the ranks up.
//
// StartWorld writes, under a private directory `/tmp/fl-mpi-<run id>` (short, because PMIx
// puts Unix sockets under it; Open MPI's session directories go there too through
// orte_tmpdir_base, and every process of an MPICH job gets it as TMPDIR):
//  - hostfile: one line per host, named after its network namespace, with its rank count
//    (`slots=N` for mpirun, `HOST:N` for Hydra, which fills the hosts in file order: MPICH
//    worlds must list each host's ranks together, as the runner's host-major order does);
//  - agent: the launch agent (mpirun's plm_rsh_agent; Hydra's -launcher rsh -launcher-exec).
//    The launcher calls it as `agent HOST COMMAND...` for every host but its own; it starts
//    COMMAND (an orted or a hydra_pmi_proxy) in HOST's network namespace and in a UTS
//    namespace of its own whose hostname is HOST, so that the MPI tells the hosts apart (they
//    share this machine's hostname otherwise, and shared memory would be taken between them),
//    and with HOST's own sysfs, so that /sys/class/net lists HOST's interfaces (UCX finds its
//    TCP devices there): orteds (and mpirun itself) in a mount namespace of their own with
//    sysfs mounted again, Hydra's proxies through `ip netns exec`, which does the same;
//  - rank: the wrapper each rank runs under: it sends the rank's stdout and stderr to
//    <log_dir>/<name>.out/.err and writes the rank's exit status to a file, since the launcher
//    reports one status for the whole job, and the rank's pid while it runs (for rank_pause
//    and rank_kill).
// then starts the launcher itself as one process (through a LocalNetnsLauncher: a child of
// this process in host 0's namespace, in its own process group, killed when this thread dies)
// with one MPMD app context per spec, in spec order (so MPI rank = spec index = global rank),
// each with its environment. The out-of-band and runtime traffic is bound to the management
// network (oob_tcp_if_include, Hydra's -iface), the ranks' data to `data_interfaces` (the
// rails) through btl_tcp_if_include, or UCX_NET_DEVICES for Open MPI's pml ucx and for MPICH
// (Debian's MPICH is ch4:ucx; UCX_TLS=tcp,self: UCX's shared-memory transports would take
// any two ranks of this machine as neighbours, hosts or not, and bypass the rails; two ranks of
// one host then meet over TCP on the host's own addresses, which never leaves it either).
// A rank exiting non-zero does not end the others (orte_abort_on_non_zero_status 0; Hydra's
// -disable-auto-cleanup): each rank meets a fault on its own and reports it. For Open MPI a
// rank that exits without MPI_Finalize, or a fatal MPI error, makes mpirun end the job; for
// MPICH an MPI_Abort (a fatal error under MPI_ERRORS_ARE_FATAL) makes mpiexec end it.
//
// Per-rank handles are views of the one launcher process: a rank is running while the
// launcher is; its final status is what its wrapper recorded, or SIGKILL where none was
// recorded (its wrapper was killed when the job ended). Kill signals the launcher's process
// group (it then ends every daemon and rank). After the launcher is gone, and in the
// destructor, every process still in a host namespace of the world is SIGKILLed and reaped by
// its parent (the sweep), and the private directory is removed: nothing of a run outlives it,
// also after a watchdog kill or a failed start. LocalPid is the rank's pid once its wrapper has
// started it (nullopt before, and after the job);
// fork launches (LaunchSpec::body) are refused.
//
// Not thread-safe: one thread owns the launcher and makes every call; it must live as long as
// the job (PR_SET_PDEATHSIG).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/exec/launcher.h"

namespace faultline::runner {

struct MpiHost {
  std::string netns;     // the host's network namespace (also its hostname in the job)
  std::string mgmt_dev;  // the management interface in it (oob_tcp_if_include)
};

// Which MPI's launcher starts the world.
enum class MpiFlavour { kOpenMpi, kMpich };

struct MpiLauncherOptions {
  MpiFlavour flavour = MpiFlavour::kOpenMpi;
  std::string run_id;          // names the private directory; [0-9a-z], 1..16 chars
  std::vector<MpiHost> hosts;  // by host index; mpirun runs in hosts[0]'s namespace
  // The ranks' data interfaces, comma separated (btl_tcp_if_include / UCX_NET_DEVICES).
  std::string data_interfaces;
  // Open MPI only: "ob1" (TCP BTL, shared memory within a host, self) or "ucx".
  std::string pml = "ob1";
  // "return" or "fatal": the ranks' MPI error handler (FAULTLINE_MPI_ERRORS).
  std::string errors = "return";
  std::string log_dir;  // <name>.out/.err of every rank, and mpirun.out/.err; created
  // The launcher program: mpirun (Open MPI), mpiexec.hydra (MPICH).
  std::string mpirun = "mpirun";
};

// Whether this machine's Open MPI has the PML `pml` (ompi_info --parsable); the error says
// what is missing and how to get it.
Status CheckOpenMpiPml(const std::string& pml);
// The version of this machine's Open MPI ("4.1.4"), or "" when ompi_info cannot tell.
std::string OpenMpiVersion();
// Whether this machine has MPICH's Hydra (mpiexec.hydra and hydra_pmi_proxy on the PATH); the
// error says how to get it.
Status CheckMpichHydra();
// A field of `mpichversion` ("Version" -> "4.0.2", "Device" -> "ch4:ucx"); "" when it cannot
// tell.
std::string MpichInfo(const std::string& field);

class MpiLauncher final : public Launcher {
 public:
  // InvalidArgument: no host, a bad run id, an unknown pml or errors value (the message
  // names the `ccl_options` key); Unavailable: the launcher (or Open MPI's pml) is not
  // installed.
  static Result<std::unique_ptr<MpiLauncher>> Create(MpiLauncherOptions options);
  MpiLauncher(const MpiLauncher&) = delete;
  MpiLauncher& operator=(const MpiLauncher&) = delete;
  ~MpiLauncher() override;  // noexcept: kills mpirun, sweeps the namespaces, removes the dir

  // One call per launcher (a second world is refused: mpirun starts a world once).
  Result<std::vector<int>> StartWorld(const std::vector<LaunchSpec>& specs) override;
  Result<ExitStatus> Wait(int handle, int64_t deadline_ns) override;
  Status Kill(int handle, int sig) override;
  WaitAllReport WaitAll(int64_t deadline_ns) override;

  int size() const override { return static_cast<int>(ranks_.size()); }
  ExitStatus status(int handle) const override;
  std::optional<pid_t> LocalPid(int handle) const override;
  std::string StdoutPath(int handle) const override;
  std::string StderrPath(int handle) const override;
  int ChannelFd(int) const override { return -1; }

  // The launcher's command line of the last StartWorld (for the report and tests).
  const std::vector<std::string>& command() const { return command_; }
  // Processes the sweeps killed so far (0 when mpirun took everything down itself).
  int swept() const { return swept_; }

 private:
  struct Rank {
    std::string name;
    std::string status_file;  // and <status_file>.pid under Hydra
    ExitStatus status;
  };
  MpiLauncher(MpiLauncherOptions o, std::string dir) : o_(std::move(o)), dir_(std::move(dir)) {}
  Status CheckHandle(int handle) const;
  Status WriteFiles(const std::vector<LaunchSpec>& specs);
  std::vector<std::string> BuildCommand(const std::vector<LaunchSpec>& specs) const;
  std::vector<std::string> BuildHydraCommand(const std::vector<LaunchSpec>& specs) const;
  // Once mpirun has exited: every rank's status from its file, then the sweep.
  void Settle(bool killed_by_watchdog);
  // SIGKILLs every process in the hosts' namespaces but this one, until none is left (at
  // most ~2 s); returns how many were killed.
  int Sweep() noexcept;

  MpiLauncherOptions o_;
  std::string dir_;
  std::unique_ptr<LocalNetnsLauncher> mpirun_;  // one rank: mpirun
  int mpirun_handle_ = -1;
  bool settled_ = false;
  std::vector<Rank> ranks_;
  std::vector<std::string> command_;
  int swept_ = 0;
};

}  // namespace faultline::runner
