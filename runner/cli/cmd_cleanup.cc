// faultline cleanup: undo everything the journal records (after a crash or SIGKILL).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "base/log.h"
#include "injector/journal.h"
#include "injector/registry.h"
#include "runner/cli/command.h"

namespace faultline::cli {
namespace {

struct CleanupOptions {
  std::string journal_dir = Journal::DefaultDir();
  bool json = false;
};

int RunCleanup(const CleanupOptions& o) {
  auto journal = Journal::Open(o.journal_dir);
  if (!journal.ok()) {
    FL_ERROR("cleanup", "%s", journal.status().ToString().c_str());
    return kExitHarness;
  }
  // The fault agents' journals first (agent-<node>, under this one on a one-box cluster):
  // their faults act inside namespaces this journal may remove.
  CleanupReport report;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o.journal_dir, ec)) {
    if (!e.is_directory() || e.path().filename().string().rfind("agent-", 0) != 0) continue;
    auto sub = Journal::Open(e.path().string());
    if (!sub.ok()) {
      ++report.failed;
      report.errors.push_back(sub.status().ToString());
      continue;
    }
    CleanupReport r = CleanupJournal(**sub);
    // An agent's directory with nothing left in it goes too (rmdir removes only an empty one).
    if (r.failed == 0) std::filesystem::remove(e.path(), ec);
    report.undone += r.undone;
    report.failed += r.failed;
    report.errors.insert(report.errors.end(), r.errors.begin(), r.errors.end());
  }
  CleanupReport own = CleanupJournal(**journal);
  report.undone += own.undone;
  report.failed += own.failed;
  report.errors.insert(report.errors.end(), own.errors.begin(), own.errors.end());
  if (o.json) {
    std::cout << report.ToJson().dump() << std::endl;
  } else {
    std::printf("cleanup: undid %d journal entr%s in %s\n", report.undone,
                report.undone == 1 ? "y" : "ies", o.journal_dir.c_str());
  }
  for (const std::string& e : report.errors) FL_ERROR("cleanup", "%s", e.c_str());
  return report.failed == 0 ? kExitOk : kExitHarness;
}

}  // namespace

void RegisterCleanup(CLI::App& app, Action* action) {
  auto opts = std::make_shared<CleanupOptions>();
  CLI::App* cmd = app.add_subcommand("cleanup", "Undo every journaled change (faults, namespaces)");
  cmd->add_option("--journal", opts->journal_dir, "Journal directory (env FAULTLINE_JOURNAL_DIR)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print the result as JSON");
  cmd->callback([opts, action] { *action = [opts] { return RunCleanup(*opts); }; });
}

}  // namespace faultline::cli
