// What every rank process needs around its CCL calls: the per-rank log file (one write(2) per
// line, so a killed rank leaves whole lines), the watchdog that ends the process when a call
// outlives its deadline, page-aligned buffers that can be revoked, and CLOCK_MONOTONIC helpers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runner/core/worker_log.h"

namespace faultline::runner {

// CLOCK_MONOTONIC now, ns.
int64_t NowNs();
inline int64_t ToNs(std::chrono::milliseconds d) {
  return static_cast<int64_t>(d.count()) * 1000000;
}
// Sleeps until the absolute CLOCK_MONOTONIC time `t_ns` (through signals).
void SleepUntilNs(int64_t t_ns);

// The log file: every line is one write(2). Write is thread-safe.
class LogFile final {
 public:
  LogFile() = default;
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Creates (truncates) the file.
  Status Open(const std::string& path);
  // Writes one line; false when the file refused it.
  bool Write(const std::string& line);
  // Writes the last lines and ends the process with `code` (the watchdog's way out). The lock
  // is held until _exit, so no other line follows.
  [[noreturn]] void WriteAndExit(const std::vector<std::string>& lines, int code);

 private:
  bool WriteLocked(const std::string& line);
  int fd_ = -1;
  std::mutex mu_;
};

// Ends the process when an armed call outlives its deadline: logs the call as failed (an op
// line for a collective), the end line, and exits with kWorkerExitCclError. Its thread runs
// from construction to destruction; Arm / Disarm are thread-safe.
class Watchdog final {
 public:
  // REQUIRES: `log` outlives the watchdog.
  explicit Watchdog(LogFile* log);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // `what` names the call; `op` is the collective's line to complete, if it is one.
  void Arm(int64_t deadline_ns, std::string what, std::optional<WorkerOp> op);
  // Guards the teardown after the end line was written: on expiry only exits with `code`.
  void ArmTeardown(int64_t deadline_ns, int code);
  void Disarm();

 private:
  void Loop();

  LogFile* log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  int64_t deadline_ns_ = 0;
  std::string what_;
  std::optional<WorkerOp> op_;
  std::optional<int> teardown_exit_;
  std::thread thread_;  // last: starts once the members above exist
};

// Page-aligned, zeroed memory (data == nullptr when out of memory). Revoke makes any later
// access a SIGSEGV until the destructor gives the pages back.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void Revoke();
  const size_t rounded;
  void* data = nullptr;
  bool revoked = false;
};

}  // namespace faultline::runner
