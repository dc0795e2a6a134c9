// reorder: reorder `percent` of a rail port's egress packets, the rest delayed by `delay` (netem).
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/netem.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& ReorderFault();

}  // namespace faultline::runner::faults
