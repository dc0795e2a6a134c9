// faultline import LOG... --map DEVICE=hostH/railR[/switch]... [--at 2s] [--name NAME] [-o FILE]
// Turns the NIC link events of kernel logs or `ip monitor link` output (runner/core/link_log.h)
// into a scenario of link_down faults that validates. Exit 0 with the scenario written (to
// stdout without -o); 2 on bad input (unreadable log, bad flag, nothing mapped, or a
// scenario that would not validate), with the reason.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/units.h"
#include "runner/cli/command.h"
#include "runner/core/incident_import.h"

namespace faultline::cli {
namespace {

struct ImportArgs {
  std::vector<std::string> logs;
  std::vector<std::string> maps;
  std::string at = "2s";
  std::string tail = "3s";
  std::string name = "imported-link-events";
  std::string out;
  int hosts = 0;
  int rails = 0;
  int ranks_per_host = 1;
  std::string op = "allreduce";
  std::string bytes = "16MiB";
};

int Import(const ImportArgs& a) {
  runner::ImportOptions o;
  o.name = a.name;
  o.ranks_per_host = a.ranks_per_host;
  o.op = a.op;
  o.bytes = a.bytes;
  if (a.hosts > 0) o.hosts = a.hosts;
  if (a.rails > 0) o.rails = a.rails;
  auto at = ParseDuration(a.at);
  auto tail = ParseDuration(a.tail);
  if (!at.ok() || !tail.ok()) {
    std::fprintf(stderr, "faultline import: --at/--tail: %s\n",
                 (!at.ok() ? at.status() : tail.status()).ToString().c_str());
    return kExitBadInput;
  }
  o.at_ns = *at;
  o.tail_ns = *tail;
  for (const auto& m : a.maps) {
    auto r = runner::ParseRailMapping(m);
    if (!r.ok()) {
      std::fprintf(stderr, "faultline import: %s\n", r.status().message().c_str());
      return kExitBadInput;
    }
    o.map[r->first] = r->second;
  }
  std::vector<runner::LinkEvent> events;
  for (const auto& path : a.logs) {
    std::stringstream ss;
    if (path == "-") {
      ss << std::cin.rdbuf();
    } else {
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "faultline import: cannot read %s\n", path.c_str());
        return kExitBadInput;
      }
      ss << in.rdbuf();
    }
    auto ev = runner::ParseLinkLog(ss.str(), path);
    events.insert(events.end(), ev.begin(), ev.end());
  }
  auto res = runner::ImportLinkEvents(events, o);
  if (!res.ok()) {
    std::fprintf(stderr, "faultline import: %s\n", res.status().message().c_str());
    return kExitBadInput;
  }
  for (const auto& u : res->unmapped) {
    std::fprintf(stderr, "faultline import: ignored the events of %s (no --map for it)\n",
                 u.c_str());
  }
  if (a.out.empty()) {
    std::fwrite(res->yaml.data(), 1, res->yaml.size(), stdout);
  } else {
    std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
    out << res->yaml;
    if (!out) {
      std::fprintf(stderr, "faultline import: cannot write %s\n", a.out.c_str());
      return kExitBadInput;
    }
  }
  std::fprintf(stderr, "faultline import: %d fault(s) (%d permanent) from %zu link event(s)%s%s\n",
               res->faults, res->permanent, res->used.size(), a.out.empty() ? "" : " -> ",
               a.out.c_str());
  return kExitOk;
}

}  // namespace

void RegisterImport(CLI::App& app, Action* action) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "turn NIC link events of kernel logs or `ip monitor link` into a scenario");
  cmd->add_option("logs", a->logs, "log files (dmesg, journalctl, syslog, ip monitor; - for stdin)")
      ->required();
  cmd->add_option("--map", a->maps,
                  "DEVICE=hostH/railR[/switch]; DEVICE is an interface, a PCI address, or "
                  "NODE:DEVICE for the host name of syslog/journal lines")
      ->required();
  cmd->add_option("--at", a->at, "scenario time of the first event")->capture_default_str();
  cmd->add_option("--tail", a->tail, "run time after the last event")->capture_default_str();
  cmd->add_option("--name", a->name, "scenario name")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "write the scenario here (default: stdout)");
  cmd->add_option("--hosts", a->hosts, "hosts (default: highest mapped host + 1, at least 2)");
  cmd->add_option("--rails", a->rails, "rails (default: highest mapped rail + 1, at least 2)");
  cmd->add_option("--ranks-per-host", a->ranks_per_host, "ranks per host")->capture_default_str();
  cmd->add_option("--op", a->op, "collective of the workload")->capture_default_str();
  cmd->add_option("--bytes", a->bytes, "message size of the workload")->capture_default_str();
  cmd->callback([action, a] {
    *action = [a] { return Import(*a); };
  });
}

}  // namespace faultline::cli
