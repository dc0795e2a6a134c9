#include "runner/faults/conn_reset/conn_reset.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {

const FaultDescriptor& ConnResetFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "conn_reset";
    d.rdma_refused = kSocketsBypassedByRdma;
    d.target = TargetShape::kSocketLink;
    d.hold = Hold::kOnce;
    d.for_refused_hint = kActsOnceHint;
    // The executor names the port's address (src) and namespace.
    d.injector_params = [](const FaultSpec&, uint64_t) { return nlohmann::json::object(); };
    d.capacity = CapacityEffect::kNone;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
