// The fault-free twin of a training run: the same scenario without its faults and
// expectations, same seed and ccl, under policy failover, run once into <out>/../twins/<key>/
// and reused by every later run with the same key (goodput_ratio divides by its rate).
#pragma once

#include "runner/core/scenario.h"
#include "runner/exec/run.h"

namespace faultline::runner {

// Finds a usable twin report of `sc` or runs the twin (through RunParsedScenario), and sets
// o->twin_report (and twin_reused), or o->twin_error when none could be had.
void FindOrRunTwin(const Scenario& sc, RunOptions* o);

}  // namespace faultline::runner
