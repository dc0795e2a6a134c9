// The one table of CCL traits: what each collective communication library the harness knows
// can do, as the scenario parser, the `faultline` command line, the run driver, the
// requirement checks and the worker need to know it before (or without) creating an adapter.
// One row per library, in CclId order. Adding a library = its adapter (<name>_adapter.cc, which
// defines its factory), its CclId value and row here and in ccl_traits.cc, and one
// faultline_ccl_adapter() call in workload/CMakeLists.txt (which also registers the factory).
//
// The table is compiled into faultline_workload, which the runner and the worker both link;
// `built_here` comes from the adapters the build declares (faultline_ccl_adapter() in
// workload/CMakeLists.txt generates the list), whatever the caller was compiled with. Where an adapter also answers a question itself
// (CclAdapter::EmitsEvents, CanShrink), the two agree (tests/cpp/workload/ccl_traits_test.cc).
// The table is immutable; every function here is thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::workload::adapters {

// Which library; the index of its row.
enum class CclId { kFtccl, kGloo, kNccl, kOpenmpi, kMpich };

// How the ranks of a library are started.
enum class LaunchStyle {
  // The runner's launcher starts one faultline-worker per rank (fork and exec in the rank's
  // host namespace, or one srun step in fleet mode); the adapter joins the group itself.
  kForkedRank,
  // The library's own launcher starts the whole world (Open MPI's mpirun, MPICH's Hydra
  // mpiexec, each with a launch agent that starts its daemon inside each host namespace:
  // runner/exec/mpi_launcher.h). Only the namespace site drives it; fleet and inventory runs
  // refuse it.
  kMpiLauncher,
};

// A setting a scenario may give the library (`ccl_options: {NAME: VALUE}`), with the values it
// takes; the first is the default.
struct CclOption {
  std::string_view name;
  std::span<const std::string_view> values;
};

struct CclTraits {
  CclId id;
  // As spelled in scenarios (`ccl:`), on the command line (--ccl) and by CclAdapter::Name().
  std::string_view name;
  // Compiled into this build (an adapter exists: CreateCclAdapter accepts the name).
  bool built_here;
  // What a build needs for it, and how to get one that has it (for the refusal where
  // built_here is false); empty for a library that is always built.
  std::string_view built_from;
  std::string_view how_to_build;
  // The library reports path events (path_down, migrated, ...); without them detection_ms and
  // failover_first_ms are null. CclAdapter::EmitsEvents() says the same.
  bool emits_path_events;
  // It claims to fail over: a path fault that heals costs throughput for a while, not the job
  // (ftccl reroutes, rebalances and fails back). Campaigns check its liveness after a heal
  // (runner/explore/invariants.h).
  bool fails_over;
  // A rank that lost every port of its own NIC (nics: per_rank) sends through a rank of its
  // host that still has one (ftccl's intra-host relay). Campaigns count such a path when they
  // judge a stall (runner/explore/invariants.h).
  bool relays_within_host;
  // Its ranks serve the fault-hook protocol (injector/FAULT_HOOK.md: conn_corrupt, qp_error).
  bool serves_fault_hook;
  // It can shrink its group without a lost rank (policy shrink). CclAdapter::CanShrink().
  bool can_shrink;
  // It can grow its group again with ranks that join from outside (a repaired host's
  // relaunched ranks). CclAdapter::CanGrow().
  bool can_grow;
  // It gives a peer up after CclInit::peer_loss_timeout without a working path (policies wait
  // and adaptive hold ranks on that bound).
  bool honours_peer_loss_timeout;
  // On RDMA rails it carries data over verbs queue pairs (qp_error fails one through the fault
  // hook, so it needs serves_fault_hook too).
  bool has_queue_pairs;
  // Its ranks meet through a rendezvous directory private to the group (CclInit::store_dir).
  bool needs_store_dir;
  // Each rank of a group needs a GPU of its own (NCCL refuses two ranks of one communicator on
  // one device).
  bool needs_own_gpu;
  LaunchStyle launch;
  // The `ccl_options` it takes; none for most.
  std::span<const CclOption> options = {};
  // The program each rank runs, next to the `faultline` executable: faultline-worker, or a
  // worker of its own for a library that cannot share a process with another built one
  // (MPICH and Open MPI define the same C symbols). CreateCclAdapter, linked into that
  // program, creates its adapter.
  std::string_view rank_program = "faultline-worker";
};

// Every row, in CclId order (also the order of names in messages).
std::span<const CclTraits> AllCclTraits();
// The row of `name`; nullptr for a name no row has (built here or not).
const CclTraits* FindCclTraits(std::string_view name);
// The row of `id`.
const CclTraits& CclTraitsOf(CclId id);
// Every row's name in table order: the allowed values of `ccl:` and --ccl.
std::vector<std::string> CclNames();
// The names of the rows for which `has` holds, joined by ", " ("ftccl"); "" when none.
std::string CclNamesWhere(bool (*has)(const CclTraits&));

}  // namespace faultline::workload::adapters
