// CclAdapter: how the worker drives one rank of a collective communication library. One
// implementation per library, one file each (ccl_<name>.cc); CreateCclAdapter picks one by
// name. Which exist depends on the build: ftccl always, gloo where Gloo was found, nccl where
// NCCL and CUDA are (FAULTLINE_HAVE_NCCL).
//
// Contract for every adapter:
//  - Every call returns by its deadline (Init: init_timeout; Run and Finish: the timeout
//    given). An adapter whose library cannot bound a call says so in its file comment; the
//    worker's own watchdog still ends the process.
//  - Errors are Status values (the library's code and message in the message); no exception
//    leaves an adapter.
//  - After Run fails the adapter may be unusable (ftccl's communicator is sticky); the worker
//    stops calling Run and destroys it.
// Not thread-safe: one adapter lives in one worker process and is driven by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/history.h"
#include "workload/collective.h"

namespace faultline::runner {

// Where and how this rank joins its group.
struct CclInit {
  int rank = 0;
  int size = 0;
  std::string bootstrap;           // "ip:port" of rank 0's listener on the management network
  std::vector<std::string> rails;  // this rank's rail endpoints (addresses or interface names)
  std::string store_dir;           // rendezvous directory shared by the group (gloo)
  std::chrono::milliseconds init_timeout{30000};
  std::chrono::milliseconds op_timeout{60000};  // default deadline of a collective
  // Unix socket path at which the rank serves the fault hook (injector/FAULT_HOOK.md); empty:
  // none. Only ftccl serves it (faultline-worker refuses --fault-hook for the others).
  std::string fault_hook;
};

class CclAdapter {
 public:
  virtual ~CclAdapter() = default;

  // "ftccl", "gloo", ...
  virtual std::string Name() const = 0;
  // Joins the group: returns once every rank is connected, or an error by init_timeout.
  virtual Status Init(const CclInit& init) = 0;
  // Called once before the first Run with the arguments every later Run uses (setup that is
  // not part of a collective's time). Default: nothing to do.
  virtual Status Prepare(const workload::OpArgs& args) { return Status::Ok(); }
  // Runs one collective to completion, or fails by `timeout`.
  virtual Status Run(const workload::OpArgs& args, std::chrono::milliseconds timeout) = 0;
  // After the last collective: waits until no peer needs this rank any more (a barrier), so
  // that leaving cannot cut a slower peer's last transfer short.
  virtual Status Finish(std::chrono::milliseconds timeout) = 0;
  // Whether the library reports events (path_down, migrated, ...). When false, the runner
  // reports event metrics as null rather than as "nothing happened".
  virtual bool EmitsEvents() const = 0;
  // Events since the last call, oldest first (rank and time filled in). Default: none.
  virtual std::vector<CclEvent> DrainEvents() { return {}; }
};

// The names CreateCclAdapter accepts in this build.
std::vector<std::string> AvailableCcls();
// A new, not yet initialised adapter for `name`; kInvalidArgument for an unknown name or one
// not built here.
Result<std::unique_ptr<CclAdapter>> CreateCclAdapter(std::string_view name);

// Factories of the adapters (one per file; only those built are defined).
std::unique_ptr<CclAdapter> NewFtcclAdapter();
std::unique_ptr<CclAdapter> NewGlooAdapter();  // FAULTLINE_HAVE_GLOO
std::unique_ptr<CclAdapter> NewNcclAdapter();  // FAULTLINE_HAVE_NCCL

}  // namespace faultline::runner
