// bandwidth: limit a rail port's egress rate to `rate` (tbf, optional `burst`).
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/bandwidth.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& BandwidthFault();

}  // namespace faultline::runner::faults
