// conn_corrupt: write one corrupt frame on a rank's connection to `peer` on a path, once, through
// the rank's fault hook.
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/conn_corrupt.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& ConnCorruptFault();

}  // namespace faultline::runner::faults
