// link_down: set a rail port administratively down (host or switch side) for `for`, or until the
// end of the run. The runner's half of the kind (YAML keys, validation, injector parameters, metric
// class); the injector's half is injector/link_down.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& LinkDownFault();

}  // namespace faultline::runner::faults
