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
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string msg(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(msg.data(), msg.size() + 1, fmt, again);
  va_end(again);
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
