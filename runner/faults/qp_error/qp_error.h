// qp_error: move a rank's verbs QP to `peer` on a path to the error state, once, through the
// rank's fault hook.
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/qp_error.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& QpErrorFault();

}  // namespace faultline::runner::faults
