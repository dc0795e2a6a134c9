// faultline: fault injection and resilience tests for collective communication libraries.
#include <csignal>
#include <cstdio>

#include "base/log.h"
#include "runner/cli/cmd_validate.h"
#include "runner/cli/command.h"

namespace {

void OnBrokenPipe(int) {}

// A reader that has gone (the pipe to a killed CI job or ssh session, `| head`) must not kill
// a command before it has undone what it changed in the kernel: SIGPIPE is caught by a handler
// that does nothing, so such a write fails with EPIPE instead. A handler, not SIG_IGN: execve
// resets a caught signal to its default, so the processes the commands start (ranks, ip, srun,
// daemons) are not changed by it.
void SurviveBrokenPipes() {
  struct sigaction sa {};
  sa.sa_handler = OnBrokenPipe;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  SurviveBrokenPipes();
  CLI::App app{"faultline: fault injection and resilience tests for collective libraries"};
  app.require_subcommand(1);
  // The logger's level (base/log.h) for every command: before or after the command's name.
  bool quiet = false;
  bool verbose = false;
  app.add_flag("-q,--quiet", quiet, "only warnings and errors (FAULTLINE_LOG_LEVEL=warn)");
  app.add_flag("-v,--verbose", verbose, "debug messages too (FAULTLINE_LOG_LEVEL=debug)");
  app.fallthrough();
  faultline::cli::Action action;
  faultline::cli::RegisterInject(app, &action);
  faultline::cli::RegisterCleanup(app, &action);
  faultline::cli::RegisterValidate(app, &action);
  faultline::cli::RegisterRun(app, &action);
  faultline::cli::RegisterImport(app, &action);
  faultline::cli::RegisterReport(app, &action);
  faultline::cli::RegisterCompare(app, &action);
  faultline::cli::RegisterTrend(app, &action);
  faultline::cli::RegisterCalibrate(app, &action);
  faultline::cli::RegisterSimulate(app, &action);
  faultline::cli::RegisterCluster(app, &action);
  faultline::cli::RegisterTaskExec(app, &action);
  faultline::cli::RegisterAgent(app, &action);
  faultline::cli::RegisterExplore(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? faultline::cli::kExitOk : faultline::cli::kExitBadInput;
  }
  if (quiet && verbose) {
    std::fprintf(stderr, "faultline: --quiet and --verbose contradict each other\n");
    return faultline::cli::kExitBadInput;
  }
  if (quiet) faultline::log::SetLevel(faultline::log::Level::kWarn);
  if (verbose) faultline::log::SetLevel(faultline::log::Level::kDebug);
  if (!action) {
    std::fprintf(stderr, "faultline: no command\n");
    return faultline::cli::kExitBadInput;
  }
  return action();
}
