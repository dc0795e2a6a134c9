// The one logger of ftccl: levels plus a subsystem prefix ("NET/TCP", "INIT", "COLL").
// FTCCL_LOG_LEVEL=error|warn|info|debug (default warn). WARN and ERROR carry file:line.
#pragma once

#include <cstdio>

namespace ftccl::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

Level CurrentLevel();
void SetRank(int rank);
void Write(Level level, const char* subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace ftccl::log

#define FTCCL_LOG(level, subsys, ...)                                                       \
  do {                                                                                      \
    if (static_cast<int>(level) <= static_cast<int>(::ftccl::log::CurrentLevel()))          \
      ::ftccl::log::Write(level, subsys, __FILE__, __LINE__, __VA_ARGS__);                  \
  } while (0)
#define LOG_ERROR(subsys, ...) FTCCL_LOG(::ftccl::log::Level::kError, subsys, __VA_ARGS__)
#define LOG_WARN(subsys, ...) FTCCL_LOG(::ftccl::log::Level::kWarn, subsys, __VA_ARGS__)
#define LOG_INFO(subsys, ...) FTCCL_LOG(::ftccl::log::Level::kInfo, subsys, __VA_ARGS__)
#define LOG_DEBUG(subsys, ...) FTCCL_LOG(::ftccl::log::Level::kDebug, subsys, __VA_ARGS__)

// Broken invariants (bugs, never expected failures): abort with file:line.
#define FTCCL_CHECK(cond)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "ftccl: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
