// link_flap: flap a rail port: down `down`, up `up`, `count` times, each period with a seeded
// jitter; the timeline expands it into link_down cycles.
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/link_flap.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& LinkFlapFault();

}  // namespace faultline::runner::faults
