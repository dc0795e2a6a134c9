#include "runner/faults/blackhole/blackhole.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {

const FaultDescriptor& BlackholeFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "blackhole";
    d.rdma_refused = kNftablesBypassedByRdma;
    d.target = TargetShape::kLink;
    d.hold = Hold::kFor;
    // nftables drops on the host-side port; the executor names it.
    d.injector_params = [](const FaultSpec&, uint64_t) { return nlohmann::json::object(); };
    d.capacity = CapacityEffect::kPort;
    d.port_share = NoShareLeft;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
