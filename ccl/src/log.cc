#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace ftccl::log {
namespace {

Level ParseLevel() {
  const char* v = std::getenv("FTCCL_LOG_LEVEL");
  if (v == nullptr) return Level::kWarn;
  std::string s(v);
  if (s == "error") return Level::kError;
  if (s == "info") return Level::kInfo;
  if (s == "debug") return Level::kDebug;
  return Level::kWarn;
}

// Every communicator of the process sets it in Init, and several may be made at once (threads
// of one process, as the C API test and a torch process with several groups do): atomic.
std::atomic<int> g_rank{-1};
std::mutex g_mu;

}  // namespace

Level CurrentLevel() {
  static const Level level = ParseLevel();
  return level;
}

void SetRank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void Write(Level level, const char* subsys, const char* file, int line, const char* fmt, ...) {
  static const char* kNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_mu);
  if (level <= Level::kWarn) {
    std::fprintf(stderr, "%ld.%06ld ftccl[%d] %s %s: %s (%s:%d)\n", static_cast<long>(ts.tv_sec),
                 ts.tv_nsec / 1000, rank, kNames[static_cast<int>(level)], subsys, msg, base, line);
  } else {
    std::fprintf(stderr, "%ld.%06ld ftccl[%d] %s %s: %s\n", static_cast<long>(ts.tv_sec),
                 ts.tv_nsec / 1000, rank, kNames[static_cast<int>(level)], subsys, msg);
  }
}

}  // namespace ftccl::log
