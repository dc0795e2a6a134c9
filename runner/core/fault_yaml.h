// A fault entry of a scenario while it is read: what the scenario parser and the fault
// kinds' own parameter parsers (runner/faults/<kind>/, through FaultDescriptor::parse) share,
// the keys every fault has and the parsing of `target:` by its shape. Part of the core, so
// that the scenario parser reads a fault without including anything of runner/faults/.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "runner/core/fault_kind.h"
#include "runner/core/scenario.h"
#include "runner/core/yaml_reader.h"

namespace faultline::runner::faults {

// One fault's entry while it is parsed.
struct FaultYaml {
  YamlReader& reader;
  const YAML::Node& node;    // the fault's mapping
  const std::string& what;   // "fault 'f1'", for messages
  const Scenario& scenario;  // topology, and whether it validated:
  bool topology_ok = false;
};

// The keys a fault of `d` may carry besides `for` where `d` refuses it: id, type, at,
// target, then `for` (held kinds) and the kind's own keys.
std::vector<std::string> FaultKeys(const FaultDescriptor& d);

// The hint for a missing `target:` of a fault with this target shape.
std::string TargetHint(TargetShape shape);

// Parses `n` (a fault's `target:`) into `f->target` for a kind of `shape` against
// `y.scenario`'s topology: host, then rank (rank targets; link targets with nics: per_rank,
// marking `port`), rail (link and path targets) and side (kLink). False after any error.
bool ParseTarget(FaultYaml& y, const YAML::Node& n, TargetShape shape, FaultSpec* f);

}  // namespace faultline::runner::faults
