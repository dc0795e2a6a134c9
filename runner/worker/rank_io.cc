#include "runner/worker/rank_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "runner/worker/worker.h"

namespace faultline::runner {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SleepUntilNs(int64_t t_ns) {
  timespec ts{static_cast<time_t>(t_ns / 1000000000), static_cast<long>(t_ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

LogFile::~LogFile() {
  if (fd_ >= 0) close(fd_);
}

Status LogFile::Open(const std::string& path) {
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return ErrnoStatus("open " + path, errno);
  return Status::Ok();
}

bool LogFile::Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteLocked(line);
}

void LogFile::WriteAndExit(const std::vector<std::string>& lines, int code) {
  mu_.lock();
  for (const std::string& line : lines) WriteLocked(line);
  _exit(code);
}

bool LogFile::WriteLocked(const std::string& line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

Watchdog::Watchdog(LogFile* log) : log_(log), thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Arm(int64_t deadline_ns, std::string what, std::optional<WorkerOp> op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    deadline_ns_ = deadline_ns;
    what_ = std::move(what);
    op_ = std::move(op);
    teardown_exit_.reset();
  }
  cv_.notify_all();
}

void Watchdog::ArmTeardown(int64_t deadline_ns, int code) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    deadline_ns_ = deadline_ns;
    what_ = "teardown";
    op_.reset();
    teardown_exit_ = code;
  }
  cv_.notify_all();
}

void Watchdog::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    const int64_t now = NowNs();
    if (now < deadline_ns_) {
      cv_.wait_for(lock, std::chrono::nanoseconds(deadline_ns_ - now));
      continue;
    }
    if (teardown_exit_) {
      std::fprintf(stderr, "faultline-worker: the library's teardown did not end in time\n");
      _exit(*teardown_exit_);
    }
    const std::string error = "worker deadline: " + what_ +
                              " did not return by its deadline plus grace (the library did "
                              "not honour it)";
    std::vector<std::string> lines;
    if (op_) {
      WorkerOp op = *op_;
      op.end_ns = now;
      op.ok = false;
      op.wrong.reset();
      op.error = error;
      lines.push_back(WorkerOpLine(op));
    }
    WorkerEnd end;
    end.ok = false;
    end.message = error;
    end.t_ns = now;
    end.first_error_ns = now;
    end.watchdog = true;
    lines.push_back(WorkerEndLine(end));
    std::fprintf(stderr, "faultline-worker: %s\n", error.c_str());
    log_->WriteAndExit(lines, kWorkerExitCclError);
  }
}

AlignedBuffer::AlignedBuffer(size_t bytes)
    : rounded(std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096)) {
  data = std::aligned_alloc(4096, rounded);
  if (data != nullptr) std::memset(data, 0, rounded);  // touch every page before the loop
}

AlignedBuffer::~AlignedBuffer() {
  if (revoked) mprotect(data, rounded, PROT_READ | PROT_WRITE);
  std::free(data);
}

void AlignedBuffer::Revoke() {
  revoked = data != nullptr && mprotect(data, rounded, PROT_NONE) == 0;
}

}  // namespace faultline::runner
