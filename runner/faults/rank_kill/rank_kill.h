// rank_kill: SIGKILL a rank, once; it stays dead for the rest of the run.
// The runner's half of the kind (YAML keys, validation, injector parameters, metric class);
// the injector's half is injector/rank_kill.cc.
#pragma once

#include "runner/core/fault_kind.h"

namespace faultline::runner::faults {

const FaultDescriptor& RankKillFault();

}  // namespace faultline::runner::faults
