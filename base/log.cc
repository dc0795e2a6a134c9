#include "base/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace faultline::log {
namespace {

Level LevelFromEnvironment() {
  Level level = Level::kInfo;
  const char* v = std::getenv("FAULTLINE_LOG_LEVEL");
  if (v != nullptr) (void)ParseLevel(v, &level);
  return level;
}

std::atomic<int>& LevelVar() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnvironment())};
  return level;
}

std::mutex g_mu;

}  // namespace

Level CurrentLevel() { return static_cast<Level>(LevelVar().load(std::memory_order_relaxed)); }

void SetLevel(Level level) { LevelVar().store(static_cast<int>(level), std::memory_order_relaxed); }

bool ParseLevel(const std::string& name, Level* level) {
  static const struct {
    const char* name;
    Level level;
  } kLevels[] = {{"error", Level::kError}, {"warn", Level::kWarn}, {"info", Level::kInfo},
                 {"debug", Level::kDebug}};
  for (const auto& l : kLevels) {
    if (name == l.name) {
      *level = l.level;
      return true;
    }
  }
  return false;
}

std::string Format(Level level, const char* component, const char* file, int line,
                   const std::string& message) {
  static const char* kNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  std::string out = std::string("faultline ") + component + ": ";
  if (level == Level::kInfo) return out + message;
  out += std::string(kNames[static_cast<int>(level)]) + ": " + message;
  if (level <= Level::kWarn) {
    const char* base = std::strrchr(file, '/');
    out += " (" + std::string(base ? base + 1 : file) + ":" + std::to_string(line) + ")";
  }
  return out;
}

void Write(Level level, const char* component, const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const std::string text = Format(level, component, file, line, msg);
  std::lock_guard<std::mutex> lock(g_mu);
  if (level == Level::kInfo) {
    std::fprintf(stdout, "%s\n", text.c_str());
    std::fflush(stdout);
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
}

}  // namespace faultline::log
