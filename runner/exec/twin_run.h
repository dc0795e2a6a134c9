// The fault-free twin of a training run: the same scenario without its faults and
// expectations, same seed and ccl, under policy failover whatever the run's policy (on a
// fault-free job failover never acts), run once into <out>/../twins/<key>/ and reused by every
// later run with the same key (goodput_ratio divides by its rate).
#pragma once

#include "runner/core/scenario.h"
#include "runner/exec/run.h"

namespace faultline::runner {

// What makes two training runs twins (16 hex digits): everything that sets the fault-free
// rate, less the faults and the policy: topology and placement, ccl, seed, the workload, the
// op timeout, the worker binary (size and time) and this process's FTCCL_* environment
// overrides, which reach every rank.
std::string TwinKey(const Scenario& sc, const RunOptions& o);

// Finds a usable twin report of `sc` or runs the twin (through RunParsedScenario), and sets
// o->twin_report (and twin_reused), or o->twin_error when none could be had.
void FindOrRunTwin(const Scenario& sc, RunOptions* o);

}  // namespace faultline::runner
