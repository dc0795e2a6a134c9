// The features a scenario's `requires:` names (scenario.h kKnownRequirements), checked on this
// machine before a run starts. A missing feature skips the run with the reason instead of
// failing it halfway. Not thread-safe (the netem probe switches the calling thread's network
// namespace for a moment).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/scenario.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {

// What `sc` needs: its `requires:` and what its faults imply (conn_corrupt and qp_error need
// fault_hook, qp_error also verbs), and torch for a torch_ddp workload, each once, `requires:`
// first.
std::vector<std::string> RequiredFeatures(const Scenario& sc);

// Where the RDMA facts of this machine live (RDMA devices, loaded modules, the running
// kernel's module lists); tests point them at a fake tree.
struct RdmaSysPaths {
  std::string ib_class = "/sys/class/infiniband";  // one entry per RDMA device
  std::string sys_module = "/sys/module";          // one entry per loaded module
  std::string kernel_modules;                      // /lib/modules/<release>; empty: uname's
};

// Why a run cannot have a verbs QP for qp_error, from what the machine has: no RDMA device at
// all (and whether the kernel could have rxe: rdma_rxe loaded, available or absent), or, where
// devices exist, that `faultline run` puts none on the rails of its namespace topology: it
// builds veth pairs in per-host network namespaces and runs ftccl over TCP there (and the
// rdma_rxe of Linux 6.1, the RDMA lab's guest kernel, serves only the initial network
// namespace); an inventory of RDMA ports (--inventory) has verbs (InventoryVerbsMissing).
std::string VerbsMissingReason(const RdmaSysPaths& paths = {});

// For an inventory topology: nullopt when a run of `ccl` on it has verbs QPs (ftccl, every
// rail an RDMA port, and on an inventory of this machine every named device present under
// paths.ib_class), else why not, naming the rail or device. REQUIRES: t.is_inventory().
std::optional<std::string> InventoryVerbsMissing(const Topology& t, std::string_view ccl,
                                                 const RdmaSysPaths& paths = {});

// The GPUs this machine shows a process: the /dev/nvidia<N> nodes under `dev_dir`, fewer where
// CUDA_VISIBLE_DEVICES lists fewer.
int VisibleGpus(const std::string& dev_dir = "/dev");

// Why `faultline run` cannot start the `world` ranks of `ccl` with this build (and, where
// `local`, every rank on this machine), from the CCL traits table: a library not built here
// (the message says how to build it), one whose ranks start through their own launcher (mpirun)
// where they are not all on this machine, one that needs a GPU per rank where fewer are visible. nullopt when it
// can.
std::optional<std::string> CclRunRefusal(const workload::adapters::CclTraits& ccl, int world,
                                         bool local, const std::string& dev_dir = "/dev");

class RequirementChecker final {
 public:
  // `worker_path`: the faultline-worker that would run the ranks.
  explicit RequirementChecker(std::string worker_path) : worker_path_(std::move(worker_path)) {}

  // nullopt when every feature is present for a run of `ccl` ("ftccl", "gloo", ...); else why
  // the first missing one is missing, e.g. "kernel lacks sch_netem (...)". Each feature is
  // probed once per checker.
  //   sch_netem:  a netem qdisc can be created (a probe in a private network namespace).
  //   fault_hook: the ranks serve the fault-hook protocol (injector/FAULT_HOOK.md): the ccl's
  //               traits say it serves it (workload/adapters/ccl_traits.h) and the worker
  //               announces a --fault-hook option in its --help.
  //   verbs:      ranks whose rails are RDMA ports, so that qp_error has a verbs QP to fail:
  //               an inventory `topology` every rail of which names an RDMA port, run with a
  //               ccl that has queue pairs and serves the fault hook (InventoryVerbsMissing);
  //               never a netns topology (VerbsMissingReason says why).
  //   torch:      a torch_ddp workload's ranks can run over `ccl` (torch_workload.h ProbeTorch).
  std::optional<std::string> Missing(const std::vector<std::string>& features, std::string_view ccl,
                                     const Topology* topology = nullptr);

 private:
  std::optional<std::string> Probe(const std::string& feature);

  std::string worker_path_;
  std::map<std::string, std::optional<std::string>> cache_;
};

}  // namespace faultline::runner
