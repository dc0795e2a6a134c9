#include "runner/incident/import_command.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "base/units.h"

namespace faultline::runner {

Result<ImportOptions> OptionsFromFlags(const ImportFlags& a) {
  ImportOptions o;
  o.name = a.name;
  if (a.ranks_per_host != -1) o.ranks_per_host = a.ranks_per_host;
  o.op = a.op;
  o.bytes = a.bytes;
  if (a.hosts > 0) o.hosts = a.hosts;
  if (a.rails > 0) o.rails = a.rails;
  auto at = ParseDuration(a.at);
  auto tail = ParseDuration(a.tail);
  if (!at.ok() || !tail.ok()) {
    return InvalidArgument("--at/--tail: " + (!at.ok() ? at.status() : tail.status()).ToString());
  }
  o.at_ns = *at;
  o.tail_ns = *tail;
  // Every --map, --map-switch and --map-rank flag through its parser into its table.
  Status bad;
  auto parse_maps = [&bad](const std::vector<std::string>& flags, auto parse, auto* table) {
    for (const auto& f : flags) {
      auto r = parse(f);
      if (!r.ok()) {
        bad = InvalidArgument(r.status().message());
        return false;
      }
      (*table)[r->first] = r->second;
    }
    return true;
  };
  if (!parse_maps(a.maps, ParseRailMapping, &o.map) ||
      !parse_maps(a.switch_maps, ParseSwitchMapping, &o.switch_map) ||
      !parse_maps(a.rank_maps, ParseRankMapping, &o.rank_map)) {
    return bad;
  }
  if (a.maps.empty() && a.switch_maps.empty()) {
    return InvalidArgument(
        "give --map (host devices) or --map-switch (switch ports): name the rail of each "
        "device");
  }
  if (a.reproduce_ccl == "gloo") {
    o.reproduce_ccl = CclName::kGloo;
  } else if (a.reproduce_ccl == "nccl") {
    o.reproduce_ccl = CclName::kNccl;
  } else {
    return InvalidArgument("--reproduce-ccl: gloo or nccl, not '" + a.reproduce_ccl + "'");
  }
  if (!a.reproduce_outcome.empty()) {
    if (a.reproduce_outcome != "aborted_clean" && a.reproduce_outcome != "hung" &&
        a.reproduce_outcome != "crashed") {
      return InvalidArgument("--reproduce-outcome: aborted_clean, hung or crashed, not '" +
                             a.reproduce_outcome + "'");
    }
    o.reproduce_outcome = a.reproduce_outcome;
  }
  if (!a.within.empty()) {
    auto w = ParseDuration(a.within);
    if (!w.ok() || *w <= 0) return InvalidArgument("--within: give a duration, e.g. 30s");
    o.within_ns = *w;
  }
  return o;
}

std::string HostOfLogFile(const std::string& name) {
  std::smatch ip;
  return std::regex_search(name, ip, std::regex(R"(^(\d{1,3}(\.\d{1,3}){3})(\.|$))"))
             ? std::string(ip[1])
             : name.substr(0, name.find('.'));
}

Result<std::vector<LogInput>> ReadLogInputs(const std::vector<std::string>& paths,
                                            std::istream& in) {
  namespace fs = std::filesystem;
  std::vector<LogInput> inputs;
  for (const auto& path : paths) {
    std::error_code ec;
    if (path != "-" && fs::is_directory(path, ec)) {
      std::vector<fs::path> files;
      for (const auto& de : fs::directory_iterator(path, ec)) {
        if (de.is_regular_file(ec)) files.push_back(de.path());
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) return InvalidArgument(path + " holds no log file");
      for (const auto& f : files) {
        inputs.push_back({f.string(), HostOfLogFile(f.filename().string()), ""});
      }
    } else {
      inputs.push_back({path, "", ""});
    }
  }
  for (auto& input : inputs) {
    std::stringstream ss;
    if (input.path == "-") {
      ss << in.rdbuf();
    } else {
      std::ifstream f(input.path, std::ios::binary);
      if (!f) return InvalidArgument("cannot read " + input.path);
      ss << f.rdbuf();
    }
    input.text = ss.str();
  }
  return inputs;
}

std::optional<int> YearOfStamps(const std::vector<ParsedLog>& logs) {
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
  if (!assumed || years.empty()) return std::nullopt;
  return std::max_element(years.begin(), years.end(),
                          [](const auto& x, const auto& y) { return x.second < y.second; })
      ->first;
}

std::vector<ParsedLog> ParseLogInputs(const std::vector<LogInput>& inputs, int year) {
  auto parse_all = [&](int y) {
    std::vector<ParsedLog> out;
    for (const auto& in : inputs) out.push_back(ParseIncidentLog(in.text, in.path, in.node, y));
    return out;
  };
  // Stamps without a year (classic syslog) take the year of the stamps that print one, so
  // that hosts and switches logging both ways share a clock; a given year sets it.
  std::vector<ParsedLog> logs = parse_all(year > 0 ? year : 2000);
  if (year == 0) {
    if (auto y = YearOfStamps(logs)) logs = parse_all(*y);
  }
  return logs;
}

std::string WarningMessage(const LogWarning& w) {
  if (w.line > 0) return "warning: " + w.file + ":" + std::to_string(w.line) + ": " + w.reason;
  return "warning: " + w.file + ": " + w.reason;
}

ImportRun RunImport(const ImportFlags& flags, std::istream& in) {
  ImportRun run;
  auto options = OptionsFromFlags(flags);
  if (!options.ok()) {
    run.messages.push_back(options.status().message());
    return run;
  }
  auto inputs = ReadLogInputs(flags.logs, in);
  if (!inputs.ok()) {
    run.messages.push_back(inputs.status().message());
    return run;
  }
  const std::vector<ParsedLog> logs = ParseLogInputs(*inputs, flags.year);
  auto res = ImportIncident(logs, *options);
  if (!res.ok()) {
    for (const auto& l : logs) {
      for (const auto& w : l.warnings) {
        run.messages.push_back(WarningMessage({w.file, w.line, w.reason + " (line skipped)"}));
      }
    }
    run.messages.push_back(res.status().message());
    return run;
  }
  for (const auto& w : res->warnings) run.messages.push_back(WarningMessage(w));
  for (const auto& u : res->unmapped) {
    run.messages.push_back("ignored the events of " + u + " (no mapping for it)");
  }
  run.result = std::move(*res);
  return run;
}

std::string ImportSummary(const ImportResult& r, const std::string& out) {
  return std::to_string(r.faults) + " fault(s) (" + std::to_string(r.permanent) +
         " permanent) from " + std::to_string(r.used.size()) + " link event(s), " +
         std::to_string(r.symptoms.size()) + " symptom(s)" + (out.empty() ? "" : " -> ") + out;
}

}  // namespace faultline::runner
