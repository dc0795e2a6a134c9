// Long-lived processes and directories the project creates outside a run (the one-box Slurm
// cluster of `faultline cluster up`), journaled so that `faultline cleanup` removes them after
// a crash like any namespace.
//
// A daemon is started as an orphan of this process (it outlives the command that started it)
// in a named network namespace, in the foreground of its own session, with its output in a log
// file. In a named namespace it also gets a mount namespace of its own whose /sys is mounted
// afresh, as `ip netns exec` does, so that it (and what it starts: a slurmd's job steps) sees
// that namespace's interfaces under /sys/class/net. It is journaled ("daemon": {pid, start_time,
// name}) after fork and before exec, so no daemon ever runs unrecorded; its undo sends SIGTERM,
// then SIGKILL after a grace period, and never signals a recycled pid. "netns_procs" ({netns})
// kills every process still inside a namespace (job steps, ranks a daemon started) so that the
// namespace can really go; "dir"
// ({path}) removes a directory tree the project made, recognised by its marker file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "injector/process.h"

namespace faultline {

class Journal;

// The marker file that makes a directory removable by a "dir" undo.
inline constexpr const char* kOwnedDirMarker = ".faultline-owned";

struct DaemonSpec {
  std::string name;                // for the journal and errors ("slurmd h1")
  std::vector<std::string> argv;   // argv[0]: a path or a name looked up in $PATH
  std::vector<std::string> env;    // "KEY=VALUE" added to this process's environment
  std::string netns;               // "" = this process's namespace
  std::string log_path;            // stdout and stderr; "" = /dev/null
};

struct StartedDaemon {
  ProcessRef ref;
  std::string journal_id;
};

// Starts the daemon as described above. Errors: the program not found, the namespace not
// enterable, the journal not writable (the child is killed then; nothing is left).
Result<StartedDaemon> StartDaemon(Journal& journal, const DaemonSpec& spec);
// SIGTERM, up to `grace_ns` for it to go, then SIGKILL. Ok when already gone.
Status StopDaemon(const ProcessRef& ref, int64_t grace_ns = 3'000'000'000);

// SIGKILLs every process whose network namespace is `netns` and waits (up to 2 s) until they
// are gone. Ok when the namespace does not exist. Returns how many were signalled.
Result<int> KillNetnsProcesses(const std::string& netns);

// Creates `path` (and parents) with `mode` and its marker file, journaled first ("dir").
Result<std::string> CreateOwnedDir(Journal& journal, const std::string& path, unsigned mode);

// The undo functions of the three journal kinds (injector/registry.cc).
Status UndoDaemon(const nlohmann::json& undo);
Status UndoNetnsProcs(const nlohmann::json& undo);
Status UndoOwnedDir(const nlohmann::json& undo);

}  // namespace faultline
