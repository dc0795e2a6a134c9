// CclAdapter: one rank's connection to a collective communication library, the one adapter
// layer that the runner's worker, the benchmarks (ftccl-perf, gloo-perf) and the tests drive.
// One implementation per library, one file each (<name>_adapter.cc); CreateCclAdapter picks one
// by name. Which exist depends on the build: ftccl always, gloo where Gloo was found
// (FAULTLINE_HAVE_GLOO), nccl where NCCL and CUDA are (FAULTLINE_HAVE_NCCL). What each library
// can do, built here or not, is its row of the CCL traits table (ccl_traits.h); where an adapter
// answers the same question (EmitsEvents, CanShrink) it says what its row says.
//
// Contract for every adapter:
//  - Every call returns by its deadline (Init: init_timeout; Run, Barrier and Finish: the
//    timeout given). An adapter whose library cannot bound a call says so in its file comment;
//    callers keep their own watchdog (the worker's ends the process).
//  - Errors are Status values (the library's code and message in the message); no exception
//    leaves an adapter.
//  - After a call fails the adapter may be unusable (ftccl's and nccl's errors are sticky);
//    callers stop calling collectives and destroy it.
// Not thread-safe: one adapter lives in one rank process and is driven by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "workload/collective.h"

namespace faultline::workload::adapters {

// The project's Status (workload::Status is the benchmarks' older, code-less one).
using ::faultline::Result;
using ::faultline::Status;

// Where and how this rank joins its group.
struct CclInit {
  int rank = 0;
  int size = 0;
  std::string bootstrap;  // "ip:port" of rank 0's listener (ftccl)
  // Rank 0 only: an already listening socket for `bootstrap` (ftccl uses a duplicate of it;
  // the caller keeps and closes its own descriptor). -1: ftccl binds `bootstrap` itself.
  int bootstrap_listen_fd = -1;
  std::vector<std::string> rails;  // this rank's rail endpoints (addresses or interface names)
  std::string store_dir;           // rendezvous directory private to the group (gloo, nccl)
  std::chrono::milliseconds init_timeout{30000};
  std::chrono::milliseconds op_timeout{60000};  // default deadline of a collective
  // Unix socket path at which the rank serves the fault hook (injector/FAULT_HOOK.md); empty:
  // none. Only ftccl serves it; the other adapters refuse a non-empty path.
  std::string fault_hook;
  // gloo: the allreduce algorithm (ring, bcube, ring_chunked, halving_doubling); empty: ring.
  // The other adapters refuse a non-empty value.
  std::string allreduce_algorithm;
  // How long the library may go without any working path to a peer before it gives the peer
  // up (the call then fails); 0: the library's default. ftccl maps it to
  // CommOptions::abort_timeout; the other adapters ignore it.
  std::chrono::milliseconds peer_loss_timeout{0};
};

// What the library reported about its data path (ftccl: path_down, migrated, resumed, ...).
struct CclEvent {
  int64_t time_ns = 0;  // CLOCK_MONOTONIC
  std::string kind;     // the library's name of the event ("path_down", ...)
  int path = -1;        // rail index; -1 when the event concerns no single path
  int peer = -1;        // rank at the other end; -1 when none
  std::string reason;
};

// A library's flap damping (ftccl's failback hold-down): a path that went down n times within
// `window` stays out of use for min(holddown x 2^(n-1), holddown_max) after it answers again.
struct FlapDamping {
  std::chrono::milliseconds holddown{0};
  std::chrono::milliseconds holddown_max{0};
  std::chrono::milliseconds window{0};
  // A path (peer in the group's original numbers, rail) that went down at least once: its downs
  // within the window as last counted, the oldest of them, and the end of its hold-down
  // (CLOCK_MONOTONIC ns, as CclEvent::time_ns).
  struct Path {
    int peer = -1;
    int path = -1;
    int downs_in_window = 0;
    int64_t first_down_ns = 0;
    int64_t hold_until_ns = 0;
  };
  std::vector<Path> paths;
};

class CclAdapter {
 public:
  virtual ~CclAdapter() = default;

  // "ftccl", "gloo", "nccl".
  virtual std::string Name() const = 0;
  // Joins the group: returns once every rank is connected, or an error by init_timeout.
  virtual Status Init(const CclInit& init) = 0;
  // Called before the first Run with the arguments later Runs use, and again when they change
  // (setup that is not part of a collective's time). Default: nothing to do.
  virtual Status Prepare(const OpArgs& args) { return Status::Ok(); }
  // Runs one collective to completion, or fails by `timeout`.
  virtual Status Run(const OpArgs& args, std::chrono::milliseconds timeout) = 0;
  // Returns once every rank has entered the barrier, or fails by `timeout`.
  virtual Status Barrier(std::chrono::milliseconds timeout) = 0;
  // After the last collective: waits until no peer needs this rank any more, so that leaving
  // cannot cut a slower peer's last transfer short; the adapter may release the communicator
  // (nccl does). Default: Barrier.
  virtual Status Finish(std::chrono::milliseconds timeout) { return Barrier(timeout); }
  // Ends the communicator at once without waiting for peers; every later call fails. Never
  // blocks beyond the library's own teardown.
  virtual void Abort(const std::string& reason) = 0;
  // Whether the library reports events. When false, the runner reports event metrics as null
  // rather than as "nothing happened".
  virtual bool EmitsEvents() const = 0;
  // Events since the last call, oldest first. Default: none.
  virtual std::vector<CclEvent> DrainEvents() { return {}; }
  // Whether the library promises that a collective's buffers are never touched again once Run
  // returned, failed or not (ftccl does). The worker then revokes access to them after a
  // failure, so that a library breaking the promise crashes the rank instead of corrupting
  // memory silently. Default: no promise.
  virtual bool ReleasesBuffersOnReturn() const { return false; }
  // The library's cumulative counters (name, value), where it keeps any. Default: none.
  virtual std::vector<std::pair<std::string, uint64_t>> Stats() const { return {}; }
  // By original rank (CclInit::size entries): the library's measured throughput to that peer
  // in bytes per second, 0 where it has none (this rank, a peer left out, one not measured
  // yet). Empty: the library measures no per-peer rates. Default: empty.
  virtual std::vector<double> PeerRates() const { return {}; }
  // The library's flap damping and the state of it on each path; nullopt where the library has
  // none (a path that works is used at once). Default: nullopt.
  virtual std::optional<FlapDamping> Damping() const { return std::nullopt; }
  // The rails (indices into CclInit::rails) the library carries data on, given `rails` of
  // them; the capacity model counts only these. Empty: the library chooses its interfaces
  // itself and the set is not known. Default: every rail.
  virtual std::vector<int> RailsUsed(int rails) const {
    std::vector<int> all;
    for (int r = 0; r < rails; ++r) all.push_back(r);
    return all;
  }
  // The library's settings in force that decide how it meets a fault (name, value; "" for a
  // variable not set), recorded with the run. Default: none.
  virtual std::vector<std::pair<std::string, std::string>> Knobs() const { return {}; }
  // The library's version as it reports it (e.g. "2.21.5"), or "" where it reports none.
  // Default: "".
  virtual std::string Version() const { return ""; }

  // Shrink (the `shrink` recovery policy). Ranks here are always the group's original numbers
  // (CclInit::rank), also after a shrink; events' peers are given in them too.
  // Whether the library can shrink its group. Default: no.
  virtual bool CanShrink() const { return false; }
  // After a failed call: the rank whose loss failed it, as the library learnt it (its own
  // detection or a peer's word), or -1 when none is known. Default: -1.
  virtual int LostRank() const { return -1; }
  // Replaces the group with the ranks not in `excluded` and not excluded before, renumbered in
  // order; this rank's place is then ShrunkRank() of ShrunkSize(). Every survivor calls it with
  // the same list; bounded by `timeout`. Default: kUnavailable.
  virtual Status Shrink(const std::vector<int>& excluded, std::chrono::milliseconds timeout) {
    return Unavailable(Name() + ": this library cannot shrink its group");
  }

  // Grow (a rejoin after repair): ranks left out by a shrink come back. Ranks are the group's
  // original numbers here too. Whether the library can grow its group. Default: no.
  virtual bool CanGrow() const { return false; }
  // A member's: the id that the members and the ranks `joiners` (in this order, appended to
  // the group) pass to Grow and JoinGrown; the caller hands it to the joiners. Default:
  // kUnavailable.
  virtual Result<std::string> GrowId(const std::vector<int>& joiners) {
    return Unavailable(Name() + ": this library cannot grow its group");
  }
  // A member's: replaces the group with the members followed by `joiners`; every member calls
  // it with the same id and list; bounded by `timeout`. On failure the group is unchanged and
  // still usable. Default: kUnavailable.
  virtual Status Grow(const std::string& grow_id, const std::vector<int>& joiners,
                      std::chrono::milliseconds timeout) {
    return Unavailable(Name() + ": this library cannot grow its group");
  }
  // A joiner's, instead of Init: joins the group being grown. `init` as for Init (rank: this
  // rank's original number; bootstrap and size are taken from the id); `members`: the grown
  // group's original numbers in order (the members', then the joiners'). Default: kUnavailable.
  virtual Status JoinGrown(const CclInit& init, const std::string& grow_id,
                           const std::vector<int>& members) {
    return Unavailable(Name() + ": this library cannot grow its group");
  }
};

// The names CreateCclAdapter accepts in this build.
std::vector<std::string> AvailableCcls();
// A new, not yet initialised adapter for `name`; kInvalidArgument for an unknown name or one
// not built here.
Result<std::unique_ptr<CclAdapter>> CreateCclAdapter(std::string_view name);

}  // namespace faultline::workload::adapters
