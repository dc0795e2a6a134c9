// faultline validate FILE...: parses and validates scenario files without running anything
// (every combination of a matrix), and prints the hosts and rails of an inventory topology.
// Exit 0 when every file is valid; 2 otherwise, with every error of every file printed as
// file:line:column: message (hint). With --decisions the files are a run's events.jsonl, and
// every policy_decision line is checked against its schema (runner/policy/cost_model.h).
// With --inventory HOSTS the scenarios are placed on that host file as `faultline run
// --inventory` places them (scenario.h InventoryPlacement), misfits and refused faults included.
#include "runner/cli/cmd_validate.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/inventory.h"
#include "runner/core/scenario.h"
#include "runner/policy/cost_model.h"

namespace faultline::cli {

namespace {

// Every "policy_decision" line of each events.jsonl: file:line and the first violation.
int ValidateDecisionFiles(const std::vector<std::string>& files) {
  int errors = 0;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read\n", f.c_str());
      ++errors;
      continue;
    }
    std::string line;
    int n = 0, checked = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        std::fprintf(stderr, "%s:%d: not a JSON object\n", f.c_str(), n);
        ++errors;
        continue;
      }
      if (j.value("kind", "") != "policy_decision") continue;
      ++checked;
      if (Status st = policy::ValidateDecisionJson(j); !st.ok()) {
        std::fprintf(stderr, "%s:%d: %s\n", f.c_str(), n, st.message().c_str());
        ++errors;
      }
    }
    std::printf("%s: %d policy_decision line%s checked\n", f.c_str(), checked, checked == 1 ? "" : "s");
  }
  if (errors > 0) {
    std::fprintf(stderr, "%d error%s\n", errors, errors == 1 ? "" : "s");
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace

void RegisterValidate(CLI::App& app, Action* action) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto decisions = std::make_shared<bool>(false);
  auto inventory = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("validate", "check scenario files (file:line:column errors)");
  cmd->add_option("files", *files, "scenario YAML files (with --decisions: events.jsonl files)")
      ->required();
  cmd->add_flag("--decisions", *decisions,
                "check the policy_decision lines of a run's events.jsonl against their schema "
                "(runner/policy/cost_model.h) instead");
  cmd->add_option("--inventory", *inventory,
                  "host file to place the scenarios on, as faultline run --inventory does")
      ->check(CLI::ExistingFile);
  cmd->callback([action, files, decisions, inventory] {
    *action = [files, decisions, inventory]() {
      if (*decisions) return ValidateDecisionFiles(*files);
      int errors = 0;
      std::optional<runner::InventoryPlacement> placement;
      if (!inventory->empty()) {
        runner::InventoryOutcome inv = runner::ParseInventoryFile(*inventory);
        for (const runner::Diagnostic& d : inv.diagnostics) {
          std::fprintf(stderr, "%s\n", d.ToString().c_str());
        }
        if (!inv.ok()) return kExitBadInput;
        placement = runner::InventoryPlacement{
            std::move(inv.hosts),
            std::filesystem::absolute(*inventory).lexically_normal().string()};
      }
      for (const std::string& f : *files) {
        // A matrix file is valid when every combination is.
        runner::ExpandOutcome r = runner::ExpandScenarioFile(f, placement ? &*placement : nullptr);
        for (const runner::Diagnostic& d : r.diagnostics) {
          std::fprintf(stderr, "%s\n", d.ToString().c_str());
        }
        errors += static_cast<int>(r.diagnostics.size());
        if (r.ok() && r.runs.size() == 1) {
          std::printf("%s: ok (%s, %zu faults)\n", f.c_str(), r.runs[0].name.c_str(),
                      r.runs[0].faults.size());
        } else if (r.ok()) {
          std::printf("%s: ok (%s, matrix of %zu runs, %zu faults each)\n", f.c_str(),
                      r.runs[0].base_name.c_str(), r.runs.size(), r.runs[0].faults.size());
        }
        // Real hosts: show what the file resolved to, so a wrong host file is seen before a run.
        if (r.ok() && r.runs[0].topology.is_inventory()) {
          std::printf("%s", runner::DescribeInventory(r.runs[0].topology, "  ").c_str());
        }
      }
      if (errors > 0) {
        std::fprintf(stderr, "%d error%s\n", errors, errors == 1 ? "" : "s");
        return kExitBadInput;
      }
      return kExitOk;
    };
  });
}

}  // namespace faultline::cli
