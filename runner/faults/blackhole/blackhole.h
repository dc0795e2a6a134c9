// blackhole: silently drop every packet a rail port receives; the link stays up (nftables).
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/blackhole.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& BlackholeFault();

}  // namespace faultline::runner::faults
