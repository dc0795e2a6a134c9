#include "runner/faults/link_down/link_down.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {

const FaultDescriptor& LinkDownFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "link_down";
    d.target = TargetShape::kLink;
    d.hold = Hold::kFor;
    d.injector_params = [](const FaultSpec& f, uint64_t) { return SideParams(f); };
    d.capacity = CapacityEffect::kPort;
    d.port_share = NoShareLeft;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
