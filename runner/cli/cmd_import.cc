// faultline import LOG|DIR... --map DEVICE=hostH/railR[/switch]... [--map-switch SW:PORT=hostH/railR]...
//   [--map-rank NODE:LOCAL=hostH/rankL]... [--reproduce-ccl gloo] [--reproduce-outcome O]
//   [--within DUR] [--year Y] [--at 2s] [--name NAME] [-o FILE]
// Turns the link events of a production incident's logs (host kernels, `ip monitor link`,
// RDMA ports, switches; runner/core/link_log.h) into a scenario of link_down faults on one
// timeline (runner/core/incident_import.h), and the collective library's error lines into its
// `reproduce:` verdict. A directory is read as one log per host: every regular file in it,
// the host named by the file name up to its first dot (gpu-node-17.log -> gpu-node-17) for
// lines that name none. Exit 0 with the scenario written (to stdout without -o); 2 on bad
// input (unreadable log, bad flag, nothing mapped, or a scenario that would not validate),
// with the reason. Lines a parser skipped are warned about with their place.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
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
  std::vector<std::string> switch_maps;
  std::vector<std::string> rank_maps;
  std::string reproduce_ccl = "gloo";
  std::string reproduce_outcome;
  std::string within;
  int year = 0;
  std::string at = "2s";
  std::string tail = "3s";
  std::string name = "imported-link-events";
  std::string out;
  int hosts = 0;
  int rails = 0;
  int ranks_per_host = -1;  // not given
  std::string op = "allreduce";
  std::string bytes = "16MiB";
};

int Import(const ImportArgs& a) {
  runner::ImportOptions o;
  o.name = a.name;
  if (a.ranks_per_host != -1) o.ranks_per_host = a.ranks_per_host;
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
  // Every --map, --map-switch and --map-rank flag through its parser into its table.
  auto parse_maps = [](const std::vector<std::string>& flags, auto parse, auto* table) {
    for (const auto& f : flags) {
      auto r = parse(f);
      if (!r.ok()) {
        std::fprintf(stderr, "faultline import: %s\n", r.status().message().c_str());
        return false;
      }
      (*table)[r->first] = r->second;
    }
    return true;
  };
  if (!parse_maps(a.maps, runner::ParseRailMapping, &o.map) ||
      !parse_maps(a.switch_maps, runner::ParseSwitchMapping, &o.switch_map) ||
      !parse_maps(a.rank_maps, runner::ParseRankMapping, &o.rank_map)) {
    return kExitBadInput;
  }
  if (a.maps.empty() && a.switch_maps.empty()) {
    std::fprintf(stderr, "faultline import: give --map (host devices) or --map-switch (switch "
                         "ports): name the rail of each device\n");
    return kExitBadInput;
  }
  if (a.reproduce_ccl == "gloo") {
    o.reproduce_ccl = runner::CclName::kGloo;
  } else if (a.reproduce_ccl == "nccl") {
    o.reproduce_ccl = runner::CclName::kNccl;
  } else {
    std::fprintf(stderr, "faultline import: --reproduce-ccl: gloo or nccl, not '%s'\n",
                 a.reproduce_ccl.c_str());
    return kExitBadInput;
  }
  if (!a.reproduce_outcome.empty()) {
    if (a.reproduce_outcome != "aborted_clean" && a.reproduce_outcome != "hung" &&
        a.reproduce_outcome != "crashed") {
      std::fprintf(stderr, "faultline import: --reproduce-outcome: aborted_clean, hung or "
                           "crashed, not '%s'\n", a.reproduce_outcome.c_str());
      return kExitBadInput;
    }
    o.reproduce_outcome = a.reproduce_outcome;
  }
  if (!a.within.empty()) {
    auto w = ParseDuration(a.within);
    if (!w.ok() || *w <= 0) {
      std::fprintf(stderr, "faultline import: --within: give a duration, e.g. 30s\n");
      return kExitBadInput;
    }
    o.within_ns = *w;
  }
  // The logs: files, and directories of one log per host.
  struct Input {
    std::string path;
    std::string node;  // the host of lines that name none
    std::string text;
  };
  std::vector<Input> inputs;
  namespace fs = std::filesystem;
  for (const auto& path : a.logs) {
    std::error_code ec;
    if (path != "-" && fs::is_directory(path, ec)) {
      std::vector<fs::path> files;
      for (const auto& de : fs::directory_iterator(path, ec)) {
        if (de.is_regular_file(ec)) files.push_back(de.path());
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) {
        std::fprintf(stderr, "faultline import: %s holds no log file\n", path.c_str());
        return kExitBadInput;
      }
      for (const auto& f : files) {
        const std::string name = f.filename().string();
        // The host: the name up to its first dot, or a whole IPv4 address ("10.0.0.17.log").
        std::smatch ip;
        const std::string host =
            std::regex_search(name, ip, std::regex(R"(^(\d{1,3}(\.\d{1,3}){3})(\.|$))"))
                ? std::string(ip[1])
                : name.substr(0, name.find('.'));
        inputs.push_back({f.string(), host, ""});
      }
    } else {
      inputs.push_back({path, "", ""});
    }
  }
  for (auto& in : inputs) {
    std::stringstream ss;
    if (in.path == "-") {
      ss << std::cin.rdbuf();
    } else {
      std::ifstream f(in.path, std::ios::binary);
      if (!f) {
        std::fprintf(stderr, "faultline import: cannot read %s\n", in.path.c_str());
        return kExitBadInput;
      }
      ss << f.rdbuf();
    }
    in.text = ss.str();
  }
  auto parse_all = [&](int year) {
    std::vector<runner::ParsedLog> out;
    for (const auto& in : inputs) {
      out.push_back(runner::ParseIncidentLog(in.text, in.path, in.node, year));
    }
    return out;
  };
  // Stamps without a year (classic syslog) take the year of the stamps that print one, so
  // that hosts and switches logging both ways share a clock; --year sets it.
  int year = a.year;
  std::vector<runner::ParsedLog> logs = parse_all(year > 0 ? year : 2000);
  if (year == 0) {
    std::map<int, int> years;
    bool assumed = false;
    auto note = [&](const std::optional<int64_t>& wall, bool year_assumed) {
      if (!wall) return;
      if (year_assumed) {
        assumed = true;
        return;
      }
      const std::time_t t = static_cast<std::time_t>(*wall / 1'000'000'000);
      std::tm tm{};
      if (gmtime_r(&t, &tm)) ++years[tm.tm_year + 1900];
    };
    for (const auto& l : logs) {
      for (const auto& e : l.links) note(e.wall_ns, e.year_assumed);
      for (const auto& e : l.symptoms) note(e.wall_ns, e.year_assumed);
      for (const auto& e : l.clocks) note(e.wall_ns, e.year_assumed);
    }
    if (assumed && !years.empty()) {
      year = std::max_element(years.begin(), years.end(), [](const auto& x, const auto& y) {
               return x.second < y.second;
             })->first;
      logs = parse_all(year);
    }
  }
  auto warn = [](const runner::LogWarning& w) {
    if (w.line > 0) {
      std::fprintf(stderr, "faultline import: warning: %s:%d: %s\n", w.file.c_str(), w.line,
                   w.reason.c_str());
    } else {
      std::fprintf(stderr, "faultline import: warning: %s: %s\n", w.file.c_str(), w.reason.c_str());
    }
  };
  auto res = runner::ImportIncident(logs, o);
  if (!res.ok()) {
    for (const auto& l : logs) {
      for (const auto& w : l.warnings) warn({w.file, w.line, w.reason + " (line skipped)"});
    }
    std::fprintf(stderr, "faultline import: %s\n", res.status().message().c_str());
    return kExitBadInput;
  }
  for (const auto& w : res->warnings) warn(w);
  for (const auto& u : res->unmapped) {
    std::fprintf(stderr, "faultline import: ignored the events of %s (no mapping for it)\n",
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
  std::fprintf(stderr,
               "faultline import: %d fault(s) (%d permanent) from %zu link event(s), %zu "
               "symptom(s)%s%s\n",
               res->faults, res->permanent, res->used.size(), res->symptoms.size(),
               a.out.empty() ? "" : " -> ", a.out.c_str());
  return kExitOk;
}

}  // namespace

void RegisterImport(CLI::App& app, Action* action) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "turn a production incident's logs (host kernels, ip monitor, RDMA ports, "
                "switches, NCCL) into a replay scenario");
  cmd->add_option("logs", a->logs,
                  "log files or directories of one log per host (dmesg, journalctl, syslog, ip "
                  "monitor, ibstat, switch syslog, NCCL output; - for stdin)")
      ->required();
  cmd->add_option("--map", a->maps,
                  "DEVICE=hostH/railR[/switch]; DEVICE is an interface, a PCI address, an RDMA "
                  "port (mlx5_0/1), or NODE:DEVICE for the host name of the lines");
  cmd->add_option("--map-switch", a->switch_maps,
                  "SWITCH:PORT=hostH/railR: a switch port and the rail whose switch side it is");
  cmd->add_option("--map-rank", a->rank_maps,
                  "NODE:LOCAL=hostH/rankL: a production process (host, local rank) and its "
                  "replay rank, for the symptoms");
  cmd->add_option("--reproduce-ccl", a->reproduce_ccl,
                  "the fail-stop library that should reproduce the symptoms (gloo|nccl)")
      ->capture_default_str();
  cmd->add_option("--reproduce-outcome", a->reproduce_outcome,
                  "aborted_clean|hung|crashed (default: from the symptoms)");
  cmd->add_option("--within", a->within,
                  "bound of the reproduced failures after the first fault (default: max(30s, 1.5 "
                  "x the incident's))");
  cmd->add_option("--year", a->year,
                  "year of stamps that print none (default: that of the stamps that do, else "
                  "2000)");
  cmd->add_option("--at", a->at, "scenario time of the first event")->capture_default_str();
  cmd->add_option("--tail", a->tail, "run time after the last event")->capture_default_str();
  cmd->add_option("--name", a->name, "scenario name")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "write the scenario here (default: stdout)");
  cmd->add_option("--hosts", a->hosts, "hosts (default: highest mapped host + 1, at least 2)");
  cmd->add_option("--rails", a->rails, "rails (default: highest mapped rail + 1, at least 2)");
  cmd->add_option("--ranks-per-host", a->ranks_per_host,
                  "ranks per host (default: the highest --map-rank local rank + 1)");
  cmd->add_option("--op", a->op, "collective of the workload")->capture_default_str();
  cmd->add_option("--bytes", a->bytes, "message size of the workload")->capture_default_str();
  cmd->callback([action, a] {
    *action = [a] { return Import(*a); };
  });
}

}  // namespace faultline::cli
