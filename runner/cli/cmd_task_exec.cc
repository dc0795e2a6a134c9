// faultline task-exec: the task side of the Slurm launcher (runner/exec/slurm_launcher.h),
// what srun starts on every node. Not meant to be run by hand.
#include <memory>
#include <string>

#include "runner/cli/command.h"
#include "runner/exec/slurm_launcher.h"

namespace faultline::cli {

void RegisterTaskExec(CLI::App& app, Action* action) {
  auto dir = std::make_shared<std::string>();
  // Hidden from --help (an empty group): only the Slurm launcher's tasks call it.
  CLI::App* cmd = app.add_subcommand("task-exec", "the task side of the Slurm launcher");
  cmd->group("");
  cmd->add_option("--dir", *dir, "The launcher's task directory")->required();
  cmd->callback([dir, action] { *action = [dir] { return runner::RunSlurmTask(*dir); }; });
}

}  // namespace faultline::cli
