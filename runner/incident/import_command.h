// `faultline import` between its argument parsing and its output: the flags checked and turned
// into ImportOptions, the logs read (files, directories of one log per host, stdin), parsed on
// one year, and imported (ImportIncident, incident_import.h). runner/cli/cmd_import.cc parses
// the command line into ImportFlags, calls RunImport, prints what it says and writes the
// scenario.
//
// Every message is what the command prints after "faultline import: ", in order. Pure but
// for reading the logs named by the flags (and `in` for "-"); thread-safe.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/incident/incident_import.h"
#include "runner/incident/link_log.h"

namespace faultline::runner {

// The command's flags as typed (the defaults are the command's).
struct ImportFlags {
  std::vector<std::string> logs;         // files, directories, "-" for `in`
  std::vector<std::string> maps;         // --map (ParseRailMapping)
  std::vector<std::string> switch_maps;  // --map-switch (ParseSwitchMapping)
  std::vector<std::string> rank_maps;    // --map-rank (ParseRankMapping)
  std::string reproduce_ccl = "gloo";    // gloo | nccl
  std::string reproduce_outcome;         // empty: from the symptoms
  std::string within;                    // a duration; empty: the default bound
  int year = 0;                          // 0: that of the stamps that print one, else 2000
  std::string at = "2s";
  std::string tail = "3s";
  std::string name = "imported-link-events";
  int hosts = 0;            // 0: from the mappings
  int rails = 0;            // 0: from the mappings
  int ranks_per_host = -1;  // -1: from the mappings
  std::string op = "allreduce";
  std::string bytes = "16MiB";
};

// The flags as ImportOptions. kInvalidArgument, with the message the command prints, for a
// bad duration, mapping, --reproduce-ccl or --reproduce-outcome, or no --map / --map-switch.
Result<ImportOptions> OptionsFromFlags(const ImportFlags& flags);

// One log to read: a file, or "-".
struct LogInput {
  std::string path;
  std::string node;  // the host of lines that name none; empty: unknown
  std::string text;
};

// The host a file of a directory of per-host logs stands for: a leading IPv4 address
// ("10.0.0.17.log" -> "10.0.0.17"), else the name up to its first dot ("gpu-node-17.log" ->
// "gpu-node-17").
std::string HostOfLogFile(const std::string& file_name);

// The logs named by `paths`, read: a directory gives each regular file in it (sorted by
// name, its host from HostOfLogFile), "-" is `in`. kInvalidArgument for a directory without
// files or a file that cannot be read.
Result<std::vector<LogInput>> ReadLogInputs(const std::vector<std::string>& paths,
                                            std::istream& in);

// The year most of the stamps that print one are in, when some stamps print none (classic
// syslog); nullopt when no stamp lacks a year or none has one.
std::optional<int> YearOfStamps(const std::vector<ParsedLog>& logs);

// Parses every input, stamps without a year in `year`; with `year` 0, in 2000 and then
// again in YearOfStamps where there is one, so that hosts logging with and without years
// share a clock.
std::vector<ParsedLog> ParseLogInputs(const std::vector<LogInput>& inputs, int year);

// "warning: FILE:LINE: REASON" ("warning: FILE: REASON" without a line).
std::string WarningMessage(const LogWarning& w);

// What RunImport did: the scenario (when the import succeeded) and the messages to print
// before it is written, in order; on failure the last message says why.
struct ImportRun {
  std::optional<ImportResult> result;
  std::vector<std::string> messages;
};

// The whole import: OptionsFromFlags, ReadLogInputs, ParseLogInputs, ImportIncident. On
// success: a warning per skipped line and per ignored event, then a line per device or
// process without a mapping. On an import failure: a warning per line the parsers skipped,
// then the reason.
ImportRun RunImport(const ImportFlags& flags, std::istream& in);

// The closing line: "N fault(s) (P permanent) from E link event(s), S symptom(s)[ -> OUT]".
std::string ImportSummary(const ImportResult& r, const std::string& out);

}  // namespace faultline::runner
