// What `faultline simulate` writes: simulation.json (every input with its source beside the
// results), simulation.md and simulation.html (tables, lost GPU-hours vs scale per policy, the
// cost breakdown by fault class), the page and the table built from the JSON alone. Pure.
//
// simulation.json: {"schema": "faultline.simulation/v1", "command", "seeds", "inputs" (the
// config of the first scale, SimConfig::ToJson), "calibration": {"file", "ccl", "entries":
// [{"kind", "policy", "faults", "survived"}]} or null, "scales": [{"gpus", "bootstrap" (the
// calibration resamples behind the intervals), "differences_gpu_hours_lost": {"<a> - <b>":
// {"mean", "ci95"} or {"unpriced": why}} (paired), "hosts", "failures_per_day", "mtbf_h",
// "policies": {<name>: {"gpu_hours_lost": {"mean", "ci95": [lo, hi]} or null when unpriced,
// "effective_training_time_ratio": {...} or null, "unpriced": why or null, "actions_mean":
// {<action>: per run} (adaptive) or null, "checkpoint_interval_s", "daly_interval_s",
// "restarts_mean", "failures_mean", "breakdown_gpu_hours": {<class>: h, "checkpoint": h},
// "notes": [...]}}}], "policies": the first scale's}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/sim/calibration.h"
#include "runner/sim/simulator.h"

namespace faultline::sim {

inline constexpr char kSimulationSchema[] = "faultline.simulation/v1";

nlohmann::json SimulationJson(const SimConfig& first_scale_config,
                              const std::vector<ScaleResult>& scales, int seeds,
                              const Calibration* calibration, const std::string& calibration_file,
                              const std::string& command);
std::string SimulationMarkdown(const nlohmann::json& sim);
std::string SimulationHtml(const nlohmann::json& sim);

}  // namespace faultline::sim
