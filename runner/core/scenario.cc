#include "runner/core/scenario.h"

#include <fstream>
#include <sstream>

#include "base/units.h"
#include "runner/core/scenario_parser.h"
#include "workload/collective.h"

// The scenario's types and its entry points. The parser is one unit per section
// (scenario_parser.h).
namespace faultline::runner {
namespace scenario_internal {

std::string Seconds(int64_t ns) { return FormatDuration(ns); }

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Diagnostic Unreadable(const std::string& path) {
  return {path, {0, 0}, "cannot read the file", "check the path and its permissions"};
}

}  // namespace scenario_internal

using scenario_internal::kOps;

std::string Diagnostic::ToString() const {
  std::string out =
      file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " + message;
  if (!hint.empty()) out += " (" + hint + ")";
  return out;
}

const char* WorkloadKindName(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kTorchDdp:
      return "torch_ddp";
    case WorkloadKind::kTrain:
      return "train";
    case WorkloadKind::kCollectives:
      break;
  }
  return "collectives";
}

const char* CclNameString(CclName c) {
  // Every row's name is a string literal: data() ends in a NUL.
  return workload::adapters::CclTraitsOf(c).name.data();
}

std::optional<CclName> CclNameFromString(std::string_view name) {
  const workload::adapters::CclTraits* t = workload::adapters::FindCclTraits(name);
  if (t == nullptr) return std::nullopt;
  return t->id;
}

const char* RecoveryPolicyString(RecoveryPolicyName p) {
  switch (p) {
    case RecoveryPolicyName::kShrink:
      return "shrink";
    case RecoveryPolicyName::kFailStop:
      return "fail_stop";
    case RecoveryPolicyName::kWait:
      return "wait";
    case RecoveryPolicyName::kAdaptive:
      return "adaptive";
    case RecoveryPolicyName::kFailover:
      break;
  }
  return "failover";
}

const char* CollOpName(CollOp op) {
  for (const auto& e : kOps) {
    if (e.op == op) return e.name;
  }
  return "?";
}

double BusBwFactor(CollOp op, int world) {
  return workload::BusBwFactorOf(CollOpName(op), world).value_or(0.0);
}

const char* TopologyKindString(TopologyKind k) {
  return k == TopologyKind::kInventory ? "inventory" : "netns";
}

const InventoryRail* Topology::InventoryRailAt(int host, int rail) const {
  if (!is_inventory() || host < 0 || host >= static_cast<int>(inventory.size())) return nullptr;
  const auto& rails = inventory[host].rails;
  if (rail < 0 || rail >= static_cast<int>(rails.size())) return nullptr;
  return &rails[rail];
}

const char* NicLayoutString(NicLayout n) {
  return n == NicLayout::kPerRank ? "per_rank" : "shared";
}

const char* LinkSideString(LinkSide s) { return s == LinkSide::kSwitch ? "switch" : "host"; }

std::optional<int> FaultTarget::GlobalRank(const Topology& t) const {
  if (!rank) return std::nullopt;
  return host * t.ranks_per_host + *rank;
}

nlohmann::json FaultTarget::ToJson() const {
  nlohmann::json j = {{"host", host}};
  if (rank) j["rank"] = *rank;
  if (rail) j["rail"] = *rail;
  if (!rank || port) j["side"] = LinkSideString(side);
  return j;
}

bool CclEmitsPathEvents(CclName ccl) {
  return workload::adapters::CclTraitsOf(ccl).emits_path_events;
}

std::vector<Diagnostic> ExpectationsUnmeasurable(const Scenario& s, CclName ccl,
                                                 const std::string& file) {
  std::vector<Diagnostic> out;
  if (CclEmitsPathEvents(ccl) || s.JudgedByReproduce(ccl)) return out;
  for (const auto& [key, loc] : s.expect.locations) {
    if (key != "detection_ms" && key != "failover_first_ms") continue;
    out.push_back({file, loc,
                   "expect." + key + " needs CCL path events, which " + CclNameString(ccl) +
                       " does not emit",
                   "remove it (failover_latency_ms is measured for every ccl, from collective "
                   "progress where there are no path events), or run with ccl " +
                       workload::adapters::CclNamesWhere(
                           [](const workload::adapters::CclTraits& t) {
                             return t.emits_path_events;
                           })});
  }
  return out;
}

std::string Scenario::MatrixLabel() const {
  std::string out;
  for (const auto& [k, v] : matrix) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

ParseOutcome ParseScenario(std::string_view yaml_text, const std::string& file) {
  ExpandOutcome e = ExpandScenario(yaml_text, file);
  if (!e.diagnostics.empty()) return {std::nullopt, std::move(e.diagnostics)};
  if (e.runs.size() != 1) {
    ParseOutcome out;
    out.diagnostics.push_back({file,
                               {0, 0},
                               "the matrix expands to " + std::to_string(e.runs.size()) +
                                   " runs where one scenario is expected",
                               "run or validate the file with faultline, which expands it"});
    return out;
  }
  return {std::move(e.runs.front()), {}};
}

ParseOutcome ParseScenarioNode(const YAML::Node& root, const std::string& file) {
  scenario_internal::ScenarioParser parser(file);
  return parser.RunRoot(root);
}

ParseOutcome ParseScenarioFile(const std::string& path) {
  auto text = scenario_internal::ReadFile(path);
  if (!text) return {std::nullopt, {scenario_internal::Unreadable(path)}};
  return ParseScenario(*text, path);
}

}  // namespace faultline::runner
