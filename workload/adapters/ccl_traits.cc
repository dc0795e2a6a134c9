#include "workload/adapters/ccl_traits.h"

#include <iterator>

namespace faultline::workload::adapters {
namespace {

// kBuiltCcls: the libraries this build has an adapter for (faultline_ccl_adapter calls in
// workload/CMakeLists.txt).
#include "ccl_built.inc"

constexpr bool Built(CclId id) {
  for (CclId b : kBuiltCcls) {
    if (b == id) return true;
  }
  return false;
}

// Open MPI: the PML (ob1: the TCP BTL striping over the rails; ucx: UCX over them) and the
// communicator's error handler (MPI_ERRORS_RETURN or MPI_ERRORS_ARE_FATAL).
constexpr std::string_view kMpiPmls[] = {"ob1", "ucx"};
constexpr std::string_view kMpiErrors[] = {"return", "fatal"};
constexpr CclOption kOpenmpiOptions[] = {{"pml", kMpiPmls}, {"errors", kMpiErrors}};
// MPICH: the error handler only. Debian's MPICH 4.0.2 is built with one device, ch4:ucx (no
// ofi netmod, no ch3:nemesis; `mpichversion`), and UCX's TCP transport is the only one that
// crosses the rails here, so there is no transport to choose.
constexpr CclOption kMpichOptions[] = {{"errors", kMpiErrors}};

constexpr CclTraits kTraits[] = {
    {
        .id = CclId::kFtccl,
        .name = "ftccl",
        .built_here = Built(CclId::kFtccl),
        .built_from = "",
        .how_to_build = "",
        .emits_path_events = true,
        .fails_over = true,
        .relays_within_host = true,
        .serves_fault_hook = true,
        .can_shrink = true,
        .can_grow = true,
        .honours_peer_loss_timeout = true,
        .has_queue_pairs = true,   // its verbs transport, on RDMA rails
        .needs_store_dir = false,  // rank 0's bootstrap listener
        .needs_own_gpu = false,
        .launch = LaunchStyle::kForkedRank,
    },
    {
        .id = CclId::kGloo,
        .name = "gloo",
        .built_here = Built(CclId::kGloo),
        .built_from = "Gloo",
        .how_to_build = "apt install libgloo-dev, then configure with -DFAULTLINE_WITH_GLOO=ON",
        .emits_path_events = false,
        .fails_over = false,
        .relays_within_host = false,
        .serves_fault_hook = false,
        .can_shrink = false,
        .can_grow = false,
        .honours_peer_loss_timeout = false,
        .has_queue_pairs = false,  // the adapter uses Gloo's TCP transport
        .needs_store_dir = true,   // a FileStore
        .needs_own_gpu = false,
        .launch = LaunchStyle::kForkedRank,
    },
    {
        .id = CclId::kNccl,
        .name = "nccl",
        .built_here = Built(CclId::kNccl),
        .built_from = "NCCL and CUDA",
        .how_to_build = "install the CUDA toolkit and NCCL (nccl.h, libnccl), then configure with "
                        "-DFAULTLINE_WITH_CUDA=ON",
        .emits_path_events = false,
        .fails_over = false,
        .relays_within_host = false,
        .serves_fault_hook = false,
        .can_shrink = false,
        .can_grow = false,
        .honours_peer_loss_timeout = false,
        .has_queue_pairs = true,  // its IB transport, where every rail has an RDMA port
        .needs_store_dir = true,  // the unique id goes through it
        .needs_own_gpu = true,
        .launch = LaunchStyle::kForkedRank,
    },
    {
        .id = CclId::kOpenmpi,
        .name = "openmpi",
        .built_here = Built(CclId::kOpenmpi),
        .built_from = "Open MPI (mpi.h, libmpi, mpirun)",
        .how_to_build = "apt install openmpi-bin libopenmpi-dev (scripts/install-deps), then "
                        "configure again (-DFAULTLINE_WITH_MPI=AUTO, the default, finds it)",
        .emits_path_events = false,
        // Its TCP transport stripes over the rails but does not move a failed rail's share
        // (scenarios/README.md, peer findings): no failover claimed.
        .fails_over = false,
        .relays_within_host = false,
        .serves_fault_hook = false,
        .can_shrink = false,
        .can_grow = false,
        .honours_peer_loss_timeout = false,
        .has_queue_pairs = false,  // ob1 over the TCP BTL on the rails
        .needs_store_dir = false,  // mpirun's runtime wires the ranks up
        .needs_own_gpu = false,
        .launch = LaunchStyle::kMpiLauncher,
        .options = kOpenmpiOptions,
    },
    {
        .id = CclId::kMpich,
        .name = "mpich",
        .built_here = Built(CclId::kMpich),
        .built_from = "MPICH (mpich.pc, libmpich, Hydra's mpiexec.hydra)",
        .how_to_build = "apt install mpich libmpich-dev (scripts/install-deps), then configure "
                        "again (-DFAULTLINE_WITH_MPICH=AUTO, the default, finds it)",
        .emits_path_events = false,
        // UCX's TCP transport stripes over the rails; whether it moves a failed rail's share is
        // what scenarios/peers/mpich_*.yaml measure: no failover claimed.
        .fails_over = false,
        .relays_within_host = false,
        .serves_fault_hook = false,
        .can_shrink = false,
        .can_grow = false,
        .honours_peer_loss_timeout = false,
        .has_queue_pairs = false,  // UCX over TCP on the rails
        .needs_store_dir = false,  // Hydra's PMI wires the ranks up
        .needs_own_gpu = false,
        .launch = LaunchStyle::kMpiLauncher,
        .options = kMpichOptions,
        .rank_program = "faultline-worker-mpich",
    },
};

constexpr bool RowsInIdOrderWithUniqueNames() {
  const int n = static_cast<int>(std::size(kTraits));
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(kTraits[i].id) != i || kTraits[i].name.empty()) return false;
    for (int j = 0; j < i; ++j) {
      if (kTraits[j].name == kTraits[i].name) return false;
    }
  }
  return true;
}
static_assert(RowsInIdOrderWithUniqueNames(), "one row per CclId, in order, each its own name");
static_assert(kTraits[0].built_here, "ftccl is always built");

}  // namespace

std::span<const CclTraits> AllCclTraits() { return kTraits; }

const CclTraits* FindCclTraits(std::string_view name) {
  for (const CclTraits& t : kTraits) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const CclTraits& CclTraitsOf(CclId id) { return kTraits[static_cast<int>(id)]; }

std::vector<std::string> CclNames() {
  std::vector<std::string> names;
  for (const CclTraits& t : kTraits) names.emplace_back(t.name);
  return names;
}

std::string CclNamesWhere(bool (*has)(const CclTraits&)) {
  std::string out;
  for (const CclTraits& t : kTraits) {
    if (has(t)) out += (out.empty() ? "" : ", ") + std::string(t.name);
  }
  return out;
}

}  // namespace faultline::workload::adapters
