// The Gloo adapter: workload::GlooCollectives (TCP transport; allreduce as
// CclInit::allreduce_algorithm says, ring by default) on this rank's first rail address; Gloo
// has no notion of rails, so the other rails stay unused. Rendezvous is a FileStore in the
// group's shared store directory (Debian's Gloo has no TCP store); the bootstrap address and
// listener are not used.
//
// Deadlines: the options-API collectives (allreduce, allgather, broadcast, alltoall) take the
// per-call timeout. Reducescatter (Gloo's classic halving-doubling) does not: with a stopped
// peer it outlives the per-call timeout (also when the context timeout is lowered after
// connecting), and the caller's watchdog ends it. Gloo emits no events, keeps no counters and
// cannot abort a collective: Abort drops the context (its sockets close, peers see an error).
#include <gloo/config.h>

#include <memory>
#include <string>
#include <utility>

#include "workload/adapters/ccl_adapter.h"
#include "workload/gloo_collectives.h"

namespace faultline::workload::adapters {
namespace {

class GlooAdapter final : public CclAdapter {
 public:
  std::string Name() const override { return "gloo"; }

  Status Init(const CclInit& init) override {
    if (init.rails.empty()) return InvalidArgument("gloo: needs a rail address");
    if (init.store_dir.empty()) return InvalidArgument("gloo: needs a store directory");
    if (!init.fault_hook.empty()) return InvalidArgument("gloo: serves no fault hook");
    const std::string algorithm =
        init.allreduce_algorithm.empty() ? "ring" : init.allreduce_algorithm;
    const auto allreduce = ParseGlooAllreduce(algorithm);
    if (!allreduce) {
      return InvalidArgument("gloo: unknown allreduce algorithm '" + algorithm +
                             "' (ring, bcube, ring_chunked, halving_doubling)");
    }
    GlooConnectOptions o;
    o.rank = init.rank;
    o.size = init.size;
    o.address = init.rails.front();
    o.store_dir = init.store_dir;
    o.timeout = init.init_timeout;
    o.allreduce = *allreduce;
    return GlooCollectives::Connect(o, &gloo_);
  }

  Status Prepare(const OpArgs& args) override {
    if (gloo_ == nullptr) return Internal("gloo: Prepare before Init (or after Abort)");
    return gloo_->Prepare(args);
  }

  Status Run(const OpArgs& args, std::chrono::milliseconds timeout) override {
    if (gloo_ == nullptr) return Internal("gloo: Run before Init (or after Abort)");
    return gloo_->Run(args, timeout);
  }

  Status Barrier(std::chrono::milliseconds timeout) override {
    if (gloo_ == nullptr) return Internal("gloo: Barrier before Init (or after Abort)");
    return gloo_->Barrier(timeout);
  }

  void Abort(const std::string& /*reason*/) override { gloo_.reset(); }

  bool EmitsEvents() const override { return false; }
  // Gloo's headers say GLOO_VERSION_{MAJOR,MINOR,PATCH} (0.5.0 in every snapshot packaged so
  // far), which does not tell snapshots apart; the distribution package that provided the
  // Gloo found at configure time does (FAULTLINE_GLOO_PACKAGE, e.g. "libgloo-dev
  // 0.0~git20220518.5b14351-3", set by CMake from dpkg; absent for a Gloo built by hand).
  // That is the package installed when this was built, not a property of the loaded library.
  std::string Version() const override {
    std::string v = std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
                    "." + std::to_string(GLOO_VERSION_PATCH);
#ifdef FAULTLINE_GLOO_PACKAGE
    v += std::string(" (") + FAULTLINE_GLOO_PACKAGE + ")";
#endif
    return v;
  }
  // One TCP device bound to the first rail's address: every pair goes over rail 0.
  std::vector<int> RailsUsed(int rails) const override {
    return rails > 0 ? std::vector<int>{0} : std::vector<int>{};
  }

 private:
  std::unique_ptr<GlooCollectives> gloo_;
};

}  // namespace

std::unique_ptr<CclAdapter> NewGlooAdapter() { return std::make_unique<GlooAdapter>(); }

}  // namespace faultline::workload::adapters
