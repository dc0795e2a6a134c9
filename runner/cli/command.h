// Subcommands of the `faultline` CLI. Each lives in its own file (cmd_<name>.cc) and
// registers itself on the app; the chosen one's action runs after parsing.
//
// Exit codes shared by the commands: 0 success; 1 an expectation failed (run) or a regression
// (compare); 2 bad input or a refusal, nothing was changed; 3 the harness or the kernel failed
// (and said why).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace faultline::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitExpectation = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitHarness = 3;

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

}  // namespace faultline::cli
