// port_drop: take a rail port down for the rest of the run (`remove: true`: the device disappears).
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/port_drop.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& PortDropFault();

}  // namespace faultline::runner::faults
