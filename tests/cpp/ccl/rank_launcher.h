// RankLauncher: runs the ranks of a test as real processes.
//
// LaunchRanks() starts one process per rank as a fork launch of the project's launcher
// (runner/exec/launcher.h: LocalNetnsLauncher::StartWorld with a body per rank), runs a body in
// each, and waits for all of them under a wall-clock bound. A rank that is still running when
// the bound passes is killed with SIGKILL by the launcher's watchdog (WaitAll) and the launch
// is marked timed out; no process outlives the call, and a rank also dies (PR_SET_PDEATHSIG)
// if the test process itself is killed. Each rank reports failures, progress notes and named
// numbers to the test through its launcher channel; they are written as they happen, so what
// a rank said before it hung or crashed still reaches the test. In a sanitized build a rank
// also reports a sanitizer's error (and, under LeakSanitizer, the leaks it has when its body
// returns) on that channel, and LaunchRanks fails the current test for it whatever the test
// expects of that rank: a rank leaves with _exit(), so the sanitizer's exit code and leak
// check at exit would not otherwise reach the test.
//
// LaunchCommunicators() and LaunchWithOptions() add the ftccl setup on top: the test process
// binds a bootstrap listener on 127.0.0.1:0 and hands it to rank 0 (bootstrap_listen_fd); every
// rank gets two rails on distinct 127.0.0.x addresses.
//
// REQUIRES: the calling process has no threads besides the main one (a forked child only
// inherits the calling thread, and locks held by others would stay held). Rank bodies never
// return into GoogleTest: the child leaves with _exit() and must not use gtest assertions.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ftccl/communicator.h"

namespace ftccl::test {

// The child side of the pipe to the test process. Only used inside a rank process.
class RankReporter final {
 public:
  explicit RankReporter(int fd) : fd_(fd) {}
  RankReporter(const RankReporter&) = delete;
  RankReporter& operator=(const RankReporter&) = delete;

  // Records a failure; the rank exits non-zero. The text is shown in the test's failure.
  void Fail(std::string_view message);
  // Remembers what the rank is doing; the last note is shown when the rank fails or hangs.
  void Progress(std::string_view note);
  // A named number for the test to check (e.g. a CommStats counter). Last value wins.
  void Value(std::string_view key, int64_t value);

  bool failed() const { return failures_ > 0; }
  int failures() const { return failures_; }

 private:
  void Send(char kind, std::string_view text);

  int fd_;
  int failures_ = 0;
};

// What became of one rank process.
struct RankOutcome {
  int rank = -1;
  pid_t pid = -1;
  bool exited = false;  // left through exit/_exit (see exit_code)
  int exit_code = -1;   // valid when exited
  int term_signal = 0;  // the signal that ended it, when !exited
  bool killed_by_launcher = false;
  std::vector<std::string> failures;  // texts passed to RankReporter::Fail
  std::string last_progress;
  std::map<std::string, int64_t> values;
  // A sanitizer (in a sanitized build) reported an error or a leak in this rank.
  bool sanitizer_report = false;

  bool ok() const { return exited && exit_code == 0 && failures.empty(); }
  int64_t value(const std::string& key, int64_t fallback = -1) const;
};

struct LaunchResult {
  std::vector<RankOutcome> ranks;
  bool timed_out = false;
  std::string setup_error;  // the launcher itself could not start the ranks
  std::chrono::milliseconds elapsed{0};

  bool AllOk() const;
  // Sum of a reported value over the ranks that reported it.
  int64_t Sum(const std::string& key) const;
  // Multi-line description of every rank that did not succeed, for assertion messages.
  std::string Describe() const;
};

// A rank's body: returns the exit code (0 = success unless it reported a failure).
using RankBody = std::function<int(int rank, RankReporter& reporter)>;

// Forks `size` rank processes running `body` and waits for all of them, at most `wall_limit`.
// `after_fork`, when set, runs in the test process once every rank has been forked.
LaunchResult LaunchRanks(int size, std::chrono::milliseconds wall_limit, const RankBody& body,
                         const std::function<void()>& after_fork = nullptr);

// --- ftccl setup ---------------------------------------------------------------------------

inline constexpr int kDefaultRails = 2;

// The address of `rail` on `rank`: distinct for every (rank, rail) pair.
std::string RailAddress(int rank, int rail);

struct CommLaunch {
  int size = 1;
  int rails = kDefaultRails;
  std::chrono::milliseconds wall_limit{90000};
  Millis init_timeout{20000};
  Millis op_timeout{30000};
  // Applied to each rank's options after the defaults above are filled in.
  std::function<void(CommOptions&)> configure;
};

// Bound on a communicator's destructor; the rank fails if destruction takes longer.
inline constexpr Millis kDestroyBound{10000};

using OptionsBody = std::function<int(const CommOptions& options, RankReporter& reporter)>;
// Launches ranks with ready CommOptions; the body creates (or fails to create) its communicator.
LaunchResult LaunchWithOptions(const CommLaunch& launch, const OptionsBody& body);

using CommBody = std::function<Status(Communicator& comm, RankReporter& reporter)>;
// Launches ranks, each with a created communicator. A failed Create, a non-ok Status from the
// body, a destructor slower than kDestroyBound, or a thread or descriptor of the communicator
// still there after its destructor is a failure of that rank.
LaunchResult LaunchCommunicators(const CommLaunch& launch, const CommBody& body);

// --- helpers for rank bodies ---------------------------------------------------------------

// Milliseconds since `start` on the monotonic clock.
int64_t MillisSince(Clock::time_point start);
// "r<ranks>", for test names.
std::string RanksTag(int ranks);
// Number of open file descriptors and of threads of the calling process.
int OpenFdCount();
int ThreadCount();
// ThreadCount() once it is `expected`, or after one second. A joined thread's
// /proc/self/task entry goes away a moment after pthread_join returns (the kernel wakes the
// joiner before it reaps the thread), so a count taken at once can be one high; a thread still
// running stays.
int ThreadCountSettled(int expected);

}  // namespace ftccl::test
