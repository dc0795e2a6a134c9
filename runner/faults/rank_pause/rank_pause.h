// rank_pause: SIGSTOP a rank for `for` (SIGCONT on revert), or until the end of the run.
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/rank_pause.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& RankPauseFault();

}  // namespace faultline::runner::faults
