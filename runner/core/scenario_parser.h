// The scenario parser's own parts, shared by its units (not an API: use scenario.h): the
// parser class, whose sections live one file each (scenario_parser.cc: the document,
// `expect:` and `reproduce:`; scenario_topology.cc; scenario_workload.cc;
// scenario_faults.cc; scenario_matrix.cc: `matrix:` and the expansion of a file), and the
// helpers more than one of them uses. Not thread-safe; one parser per parse.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/core/yaml_reader.h"

namespace faultline::runner::scenario_internal {

// The collectives a workload may name, in the ftccl spelling (CollOpName).
struct OpEntry {
  CollOp op;
  const char* name;
};
inline constexpr OpEntry kOps[] = {
    {CollOp::kAllReduce, "allreduce"},
    {CollOp::kAllGather, "allgather"},
    {CollOp::kReduceScatter, "reducescatter"},
    {CollOp::kBroadcast, "broadcast"},
    {CollOp::kReduce, "reduce"},
    {CollOp::kAllToAll, "alltoall"},
    {CollOp::kBarrier, "barrier"},
};

// A duration as a message prints it ("1.5s").
std::string Seconds(int64_t ns);

// The text of the file at `path`; nullopt when it cannot be read.
std::optional<std::string> ReadFile(const std::string& path);
// The one diagnostic of a file that cannot be read.
Diagnostic Unreadable(const std::string& path);

// Where each matrix key lands in the scenario: {section or "" for the top level, key}.
std::pair<std::string, std::string> MatrixTarget(const std::string& key);

class ScenarioParser final : public YamlReader {
 public:
  explicit ScenarioParser(std::string file, const InventoryPlacement* placement = nullptr)
      : YamlReader(std::move(file)), placement_(placement) {}

  ParseOutcome Run(std::string_view text);
  // Validates an already loaded document (a `matrix:` key in it is skipped).
  ParseOutcome RunRoot(const YAML::Node& root);

  // One key of a `matrix:`: its name and the nodes of its values.
  struct MatrixAxis {
    std::string key;
    std::vector<YAML::Node> values;
  };
  // Checks root["matrix"] (which must exist): known keys, non-empty lists of distinct
  // scalars, no key also set in the scenario itself, a bounded number of combinations.
  // Returns true when it is valid; `axes` gets every usable axis either way (the keys that
  // are known and have at least one plain value).
  bool ParseMatrix(const YAML::Node& root, std::vector<MatrixAxis>* axes);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  void ParseTopology(const YAML::Node& n, Scenario* s);
  void ParseInventoryTopology(const YAML::Node& n, Scenario* s);
  void PlaceOnInventory(const YAML::Node& n, Scenario* s);
  void CheckRdmaRail(const YAML::Node& n, const FaultSpec& f, const Scenario& s);
  void ParseWorkload(const YAML::Node& n, Scenario* s);
  void ParseTorchWorkload(const YAML::Node& n, Scenario* s);
  void ParseTrainWorkload(const YAML::Node& n, Scenario* s);
  void CheckPolicy(const YAML::Node& p, const Scenario& s);
  void ParseFaults(const YAML::Node& n, Scenario* s);
  std::optional<FaultSpec> ParseFault(const YAML::Node& n, const Scenario& s);
  void ParseExpect(const YAML::Node& n, Scenario* s);
  void ParseReproduce(const YAML::Node& n, Scenario* s);
  void CheckFaultSchedule(const Scenario& s);
  void CheckExpectations(const YAML::Node& n, const Scenario& s);
  std::optional<double> MaxOf(const YAML::Node& n, const std::string& what, const char* key,
                              double lo, double hi);

  const InventoryPlacement* placement_ = nullptr;  // --inventory; null: the file's topology
  bool topology_ok_ = false;
  bool faults_ok_ = true;                 // every fault entry parsed
  std::vector<SourceLoc> fault_at_locs_;  // parallel to Scenario::faults
};

}  // namespace faultline::runner::scenario_internal
