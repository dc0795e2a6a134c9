// The one logger of the faultline command, its agents and its workers: levels plus a component
// prefix, as ftccl's logger has (ccl/src/log.h; ftccl keeps its own, as it depends on nothing
// of the project).
//
// A line reads `faultline <component>: <message>`, e.g. `faultline run: restart 1: ...`, so a
// message says which part of the harness wrote it. kInfo goes to stdout (what a user follows
// while a run goes); kWarn and kError go to stderr and carry the level and file:line, as
// ftccl's WARN does: `faultline run: WARN: <message> (run_driver.cc:120)`. kDebug (stderr) is
// written only with --verbose or FAULTLINE_LOG_LEVEL=debug.
//
// The level: FAULTLINE_LOG_LEVEL=error|warn|info|debug when set, else kInfo; the command line's
// --quiet (kWarn) and --verbose (kDebug) override it through SetLevel. Results a command was
// asked for (a run's summary table, `compare`'s table, a verdict line) are not logs and are
// printed by their writers whatever the level.
//
// Thread-safe: a line is written whole under one lock.
#pragma once

#include <string>

namespace faultline::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// The level in force. REQUIRES nothing; reads FAULTLINE_LOG_LEVEL once.
Level CurrentLevel();
void SetLevel(Level level);
// "error", "warn", "info", "debug" -> the level; false (and `level` untouched) otherwise.
bool ParseLevel(const std::string& name, Level* level);

// Writes one line (see above). `component` is e.g. "run", "agent", "import"; `file` a path
// whose last element is printed for kWarn and kError.
void Write(Level level, const char* component, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// The line Write would print, without the newline (for tests and for callers that collect
// messages).
std::string Format(Level level, const char* component, const char* file, int line,
                   const std::string& message);

}  // namespace faultline::log

#define FL_LOG(level, component, ...)                                                      \
  do {                                                                                     \
    if (static_cast<int>(level) <= static_cast<int>(::faultline::log::CurrentLevel()))     \
      ::faultline::log::Write(level, component, __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)
#define FL_ERROR(component, ...) FL_LOG(::faultline::log::Level::kError, component, __VA_ARGS__)
#define FL_WARN(component, ...) FL_LOG(::faultline::log::Level::kWarn, component, __VA_ARGS__)
#define FL_INFO(component, ...) FL_LOG(::faultline::log::Level::kInfo, component, __VA_ARGS__)
#define FL_DEBUG(component, ...) FL_LOG(::faultline::log::Level::kDebug, component, __VA_ARGS__)
