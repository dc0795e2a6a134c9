// loss: drop a seeded `percent` of a rail port's received IP packets (nftables).
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/loss.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& LossFault();

}  // namespace faultline::runner::faults
