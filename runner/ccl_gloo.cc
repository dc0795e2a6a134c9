// The Gloo adapter: workload::GlooCollectives (TCP transport, ring allreduce) on this rank's
// first rail address; Gloo has no notion of rails, so the other rails stay unused. Rendezvous
// is a FileStore in the group's shared store directory (Debian's Gloo has no TCP store).
//
// Deadlines: the options-API collectives (allreduce, allgather, broadcast, alltoall) take the
// per-call timeout. Reducescatter (Gloo's classic halving-doubling) does not: with a stopped
// peer it outlives the per-call timeout (also when the context timeout is lowered after
// connecting), and the worker's watchdog ends it. Gloo emits no events.
#include <memory>
#include <string>
#include <utility>

#include "runner/ccl_adapter.h"
#include "workload/gloo_collectives.h"

namespace faultline::runner {
namespace {

Status FromGloo(const workload::Status& st) {
  return st.ok() ? Status::Ok() : Unavailable(st.message());
}

class GlooAdapter final : public CclAdapter {
 public:
  std::string Name() const override { return "gloo"; }

  Status Init(const CclInit& init) override {
    if (init.rails.empty()) return InvalidArgument("gloo: needs a rail address");
    if (init.store_dir.empty()) return InvalidArgument("gloo: needs a store directory");
    workload::GlooConnectOptions o;
    o.rank = init.rank;
    o.size = init.size;
    o.address = init.rails.front();
    o.store_dir = init.store_dir;
    o.timeout = init.init_timeout;
    o.allreduce = workload::GlooAllreduce::kRing;
    return FromGloo(workload::GlooCollectives::Connect(o, &gloo_));
  }

  Status Prepare(const workload::OpArgs& args) override {
    if (gloo_ == nullptr) return Internal("gloo: Prepare before Init");
    return FromGloo(gloo_->Prepare(args));
  }

  Status Run(const workload::OpArgs& args, std::chrono::milliseconds timeout) override {
    if (gloo_ == nullptr) return Internal("gloo: Run before Init");
    return FromGloo(gloo_->Run(args, timeout));
  }

  Status Finish(std::chrono::milliseconds timeout) override {
    if (gloo_ == nullptr) return Internal("gloo: Finish before Init");
    return FromGloo(gloo_->Barrier(timeout));
  }

  bool EmitsEvents() const override { return false; }

 private:
  std::unique_ptr<workload::GlooCollectives> gloo_;
};

}  // namespace

std::unique_ptr<CclAdapter> NewGlooAdapter() { return std::make_unique<GlooAdapter>(); }

}  // namespace faultline::runner
