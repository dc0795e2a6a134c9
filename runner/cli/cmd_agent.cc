// faultline agent: the per-host fault agent of fleet runs (runner/exec/agent.h).
#include <memory>
#include <string>

#include "runner/cli/command.h"
#include "runner/exec/agent.h"

namespace faultline::cli {

void RegisterAgent(CLI::App& app, Action* action) {
  auto o = std::make_shared<runner::AgentOptions>();
  CLI::App* cmd = app.add_subcommand(
      "agent", "Per-host fault agent of a fleet run (token in FAULTLINE_AGENT_TOKEN)");
  cmd->add_option("--listen", o->listen,
                  "management address to listen on; several: chosen by SLURM_NODEID")
      ->delimiter(',')
      ->required();
  cmd->add_option("--port", o->port, "TCP port")->required();
  cmd->add_option("--allow", o->allow, "interface it may act on: NETNS/DEV or N=NETNS/DEV (host N)");
  cmd->add_option("--hook-dir", o->hook_dir, "fault-hook sockets it may use live under this");
  cmd->add_option("--journal", o->journal_dir, "journal (default <journal>/agent-<node>)");
  cmd->add_option("--lease-ms", o->lease_ms, "heal and exit after this long without the runner")
      ->capture_default_str();
  cmd->callback([o, action] { *action = [o] { return runner::RunAgent(*o); }; });
}

}  // namespace faultline::cli
