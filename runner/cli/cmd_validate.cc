// faultline validate FILE...: parses and validates scenario files without running anything
// (every combination of a matrix), and prints the hosts and rails of an inventory topology.
// Exit 0 when every file is valid; 2 otherwise, with every error of every file printed as
// file:line:column: message (hint).
#include "runner/cli/cmd_validate.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runner/core/inventory.h"
#include "runner/core/scenario.h"

namespace faultline::cli {

void RegisterValidate(CLI::App& app, Action* action) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("validate", "check scenario files (file:line:column errors)");
  cmd->add_option("files", *files, "scenario YAML files")->required();
  cmd->callback([action, files] {
    *action = [files]() {
      int errors = 0;
      for (const std::string& f : *files) {
        // A matrix file is valid when every combination is.
        runner::ExpandOutcome r = runner::ExpandScenarioFile(f);
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
