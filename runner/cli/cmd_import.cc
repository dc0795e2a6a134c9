// faultline import LOG|DIR... --map DEVICE=hostH/railR[/switch]... [--map-switch
// SW:PORT=hostH/railR]...
//   [--map-rank NODE:LOCAL=hostH/rankL]... [--reproduce-ccl gloo] [--reproduce-outcome O]
//   [--within DUR] [--year Y] [--at 2s] [--name NAME] [-o FILE]
// Turns the link events of a production incident's logs (host kernels, `ip monitor link`,
// RDMA ports, switches; runner/incident/link_log.h) into a scenario of link_down faults on one
// timeline (runner/incident/import_command.h does all but the parsing of the command line), and the
// collective library's error lines into its `reproduce:` verdict. A directory is read as one log
// per host: every regular file in it, the host named by the file name up to its first dot
// (gpu-node-17.log -> gpu-node-17) for lines that name none. Exit 0 with the scenario written (to
// stdout without -o); 2 on bad input (unreadable log, bad flag, nothing mapped, or a scenario that
// would not validate), with the reason. Lines a parser skipped are warned about with their place.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "base/log.h"
#include "runner/cli/command.h"
#include "runner/incident/import_command.h"

namespace faultline::cli {
namespace {

struct ImportArgs {
  runner::ImportFlags flags;
  std::string out;  // -o; empty: stdout
};

int Import(const ImportArgs& a) {
  runner::ImportRun run = runner::RunImport(a.flags, std::cin);
  for (const auto& m : run.messages) FL_WARN("import", "%s", m.c_str());
  if (!run.result) return kExitBadInput;
  const runner::ImportResult& res = *run.result;
  if (a.out.empty()) {
    std::fwrite(res.yaml.data(), 1, res.yaml.size(), stdout);
  } else {
    std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
    out << res.yaml;
    if (!out) {
      FL_ERROR("import", "cannot write %s", a.out.c_str());
      return kExitBadInput;
    }
  }
  std::fprintf(stderr, "faultline import: %s\n", runner::ImportSummary(res, a.out).c_str());
  return kExitOk;
}

}  // namespace

void RegisterImport(CLI::App& app, Action* action) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* cmd =
      app.add_subcommand("import",
                         "turn a production incident's logs (host kernels, ip monitor, RDMA ports, "
                         "switches, NCCL) into a replay scenario");
  cmd->add_option("logs", a->flags.logs,
                  "log files or directories of one log per host (dmesg, journalctl, syslog, ip "
                  "monitor, ibstat, switch syslog, NCCL output; - for stdin)")
      ->required();
  cmd->add_option("--map", a->flags.maps,
                  "DEVICE=hostH/railR[/switch]; DEVICE is an interface, a PCI address, an RDMA "
                  "port (mlx5_0/1), or NODE:DEVICE for the host name of the lines");
  cmd->add_option("--map-switch", a->flags.switch_maps,
                  "SWITCH:PORT=hostH/railR: a switch port and the rail whose switch side it is");
  cmd->add_option("--map-rank", a->flags.rank_maps,
                  "NODE:LOCAL=hostH/rankL: a production process (host, local rank) and its "
                  "replay rank, for the symptoms");
  cmd->add_option("--reproduce-ccl", a->flags.reproduce_ccl,
                  "the fail-stop library that should reproduce the symptoms (gloo|nccl)")
      ->capture_default_str();
  cmd->add_option("--reproduce-outcome", a->flags.reproduce_outcome,
                  "aborted_clean|hung|crashed (default: from the symptoms)");
  cmd->add_option("--within", a->flags.within,
                  "bound of the reproduced failures after the first fault (default: max(30s, 1.5 "
                  "x the incident's))");
  cmd->add_option("--year", a->flags.year,
                  "year of stamps that print none (default: that of the stamps that do, else "
                  "2000)");
  cmd->add_option("--at", a->flags.at, "scenario time of the first event")->capture_default_str();
  cmd->add_option("--tail", a->flags.tail, "run time after the last event")->capture_default_str();
  cmd->add_option("--name", a->flags.name, "scenario name")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "write the scenario here (default: stdout)");
  cmd->add_option("--hosts", a->flags.hosts,
                  "hosts (default: highest mapped host + 1, at least 2)");
  cmd->add_option("--rails", a->flags.rails,
                  "rails (default: highest mapped rail + 1, at least 2)");
  cmd->add_option("--ranks-per-host", a->flags.ranks_per_host,
                  "ranks per host (default: the highest --map-rank local rank + 1)");
  cmd->add_option("--op", a->flags.op, "collective of the workload")->capture_default_str();
  cmd->add_option("--bytes", a->flags.bytes, "message size of the workload")->capture_default_str();
  cmd->callback([action, a] { *action = [a] { return Import(*a); }; });
}

}  // namespace faultline::cli
