// Subcommands of the `faultline` CLI. Each lives in its own file (cmd_<name>.cc) and
// registers itself on the app; the chosen one's action runs after parsing.
//
// Exit codes shared by the commands: reports::ExitCode (reports/exit_code.h).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "reports/exit_code.h"

namespace faultline::cli {

// The ints of reports::ExitCode (reports/exit_code.h), for the actions' int results.
inline constexpr int kExitOk = reports::ToInt(reports::ExitCode::kOk);
inline constexpr int kExitExpectation = reports::ToInt(reports::ExitCode::kExpectationFailed);
inline constexpr int kExitBadInput = reports::ToInt(reports::ExitCode::kBadInput);
inline constexpr int kExitHarness = reports::ToInt(reports::ExitCode::kHarnessError);

using Action = std::function<int()>;

void RegisterInject(CLI::App& app, Action* action);
void RegisterCleanup(CLI::App& app, Action* action);
void RegisterRun(CLI::App& app, Action* action);
void RegisterImport(CLI::App& app, Action* action);
void RegisterReport(CLI::App& app, Action* action);
void RegisterCompare(CLI::App& app, Action* action);
void RegisterTrend(CLI::App& app, Action* action);
void RegisterCalibrate(CLI::App& app, Action* action);
void RegisterSimulate(CLI::App& app, Action* action);
void RegisterCluster(CLI::App& app, Action* action);
void RegisterTaskExec(CLI::App& app, Action* action);
void RegisterAgent(CLI::App& app, Action* action);
void RegisterExplore(CLI::App& app, Action* action);

}  // namespace faultline::cli
