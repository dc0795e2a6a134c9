// conn_reset: reset the TCP connections of a rail port, once (sock_diag destroy).
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/conn_reset.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& ConnResetFault();

}  // namespace faultline::runner::faults
