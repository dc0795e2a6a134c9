#include "rank_launcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "runner/exec/launcher.h"

// Present when a sanitizer runtime is linked in (scripts/sanitize), null otherwise.
extern "C" {
void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));
int __lsan_do_recoverable_leak_check() __attribute__((weak));
}

namespace ftccl::test {
namespace {

// Pipe framing: one kind byte, a 4-byte length, then the text.
constexpr char kFail = 'F';
constexpr char kProgress = 'P';
constexpr char kValue = 'V';
constexpr char kSanitizer = 'S';  // a sanitizer reported an error in the rank (its stderr)
constexpr size_t kHeader = 5;
constexpr size_t kMaxText = 8192;
constexpr int kMaxFailuresSent = 50;

void WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // The test process went away; nothing left to tell.
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

// Parses complete frames out of `buffer` into `out`, leaving a partial frame in place.
void ParseFrames(std::string* buffer, RankOutcome* out) {
  size_t pos = 0;
  while (buffer->size() - pos >= kHeader) {
    uint32_t len;
    std::memcpy(&len, buffer->data() + pos + 1, sizeof(len));
    if (buffer->size() - pos < kHeader + len) break;
    char kind = (*buffer)[pos];
    std::string text = buffer->substr(pos + kHeader, len);
    pos += kHeader + len;
    if (kind == kSanitizer) {
      out->sanitizer_report = true;
      out->failures.push_back(std::move(text));
    } else if (kind == kFail) {
      out->failures.push_back(std::move(text));
    } else if (kind == kProgress) {
      out->last_progress = std::move(text);
    } else if (kind == kValue) {
      size_t eq = text.find('=');
      if (eq != std::string::npos) {
        out->values[text.substr(0, eq)] = std::stoll(text.substr(eq + 1));
      }
    }
  }
  buffer->erase(0, pos);
}

// A rank leaves with _exit(), so neither the sanitizer's exit code after a report nor its
// leak check at exit reaches the test: the rank tells the test itself, on its channel.
constexpr char kSanitizerText[] = "a sanitizer reported an error in this rank (see its stderr)";
char sanitizer_frame[kHeader + sizeof(kSanitizerText) - 1];
int sanitizer_channel = -1;

// The sanitizer's death callback: runs in the rank just before it aborts after a report.
void SanitizerDied() {
  if (sanitizer_channel < 0) return;
  ssize_t n = write(sanitizer_channel, sanitizer_frame, sizeof(sanitizer_frame));
  (void)n;
}

void WatchForSanitizerReports(int channel_fd) {
  const uint32_t len = sizeof(kSanitizerText) - 1;
  sanitizer_frame[0] = kSanitizer;
  std::memcpy(sanitizer_frame + 1, &len, sizeof(len));
  std::memcpy(sanitizer_frame + kHeader, kSanitizerText, len);
  sanitizer_channel = channel_fd;
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(SanitizerDied);
}

// Under LeakSanitizer: the leaks of this rank's process (memory the body lost), as a report.
void CheckLeaks() {
  if (__lsan_do_recoverable_leak_check == nullptr) return;
  if (__lsan_do_recoverable_leak_check() != 0) {
    WriteAll(sanitizer_channel, sanitizer_frame, sizeof(sanitizer_frame));
  }
}

// ThreadSanitizer starts a thread of its own at a process's first pthread_create and keeps it.
// Started here, before the body counts its threads, it is not taken for a thread the
// communicator left behind.
void StartSanitizerThread() {
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
  const int before = ThreadCount();
  std::thread([] {}).join();
  // The joined thread's /proc entry goes a moment after the join.
  for (int i = 0; i < 100 && ThreadCount() > before + 1; ++i) usleep(10000);
#endif
#endif
}

// A rank's process: the body with its reporter on the launcher's channel.
int RunRank(int rank, int channel_fd, const RankBody& body) {
  signal(SIGPIPE, SIG_IGN);
  WatchForSanitizerReports(channel_fd);
  StartSanitizerThread();
  int code = 1;
  RankReporter reporter(channel_fd);
  try {
    code = body(rank, reporter);
  } catch (const std::exception& e) {
    reporter.Fail(std::string("uncaught exception: ") + e.what());
  } catch (...) {
    reporter.Fail("uncaught exception of unknown type");
  }
  if (code == 0 && reporter.failed()) code = 1;
  CheckLeaks();
  sanitizer_channel = -1;
  close(channel_fd);
  return code;
}

// Reads what the rank said so far (the channel is non-blocking).
void Drain(int fd, std::string* buffer, RankOutcome* out, bool* eof) {
  char chunk[65536];
  for (;;) {
    const ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got > 0) {
      buffer->append(chunk, static_cast<size_t>(got));
      continue;
    }
    if (got == 0 || (errno != EAGAIN && errno != EINTR)) *eof = true;
    if (got < 0 && errno == EINTR) continue;
    break;
  }
  ParseFrames(buffer, out);
}

void Record(const faultline::runner::ExitStatus& s, RankOutcome* r) {
  using State = faultline::runner::ExitStatus::State;
  r->exited = s.state == State::kExited;
  if (r->exited) r->exit_code = s.code;
  if (s.state == State::kSignaled) r->term_signal = s.signal;
  r->killed_by_launcher = s.killed_by_watchdog;
}

}  // namespace

void RankReporter::Send(char kind, std::string_view text) {
  if (text.size() > kMaxText) text = text.substr(0, kMaxText);
  char header[kHeader];
  header[0] = kind;
  uint32_t len = static_cast<uint32_t>(text.size());
  std::memcpy(header + 1, &len, sizeof(len));
  std::string frame(header, kHeader);
  frame.append(text);
  WriteAll(fd_, frame.data(), frame.size());
}

void RankReporter::Fail(std::string_view message) {
  ++failures_;
  if (failures_ <= kMaxFailuresSent) Send(kFail, message);
  if (failures_ == kMaxFailuresSent + 1) Send(kFail, "(further failures of this rank not shown)");
}

void RankReporter::Progress(std::string_view note) { Send(kProgress, note); }

void RankReporter::Value(std::string_view key, int64_t value) {
  std::string text(key);
  text += '=';
  text += std::to_string(value);
  Send(kValue, text);
}

int64_t RankOutcome::value(const std::string& key, int64_t fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

bool LaunchResult::AllOk() const {
  if (timed_out || !setup_error.empty()) return false;
  for (const RankOutcome& r : ranks) {
    if (!r.ok()) return false;
  }
  return true;
}

int64_t LaunchResult::Sum(const std::string& key) const {
  int64_t sum = 0;
  for (const RankOutcome& r : ranks) {
    auto it = r.values.find(key);
    if (it != r.values.end()) sum += it->second;
  }
  return sum;
}

std::string LaunchResult::Describe() const {
  std::ostringstream os;
  if (!setup_error.empty()) os << "launcher: " << setup_error << "\n";
  if (timed_out) os << "wall-clock bound exceeded after " << elapsed.count() << " ms\n";
  for (const RankOutcome& r : ranks) {
    if (r.ok()) continue;
    os << "rank " << r.rank << " (pid " << r.pid << "): ";
    if (r.killed_by_launcher) {
      os << "killed by the launcher (hung)";
    } else if (r.exited) {
      os << "exit code " << r.exit_code;
    } else {
      os << "killed by signal " << r.term_signal << " (" << strsignal(r.term_signal) << ")";
    }
    if (!r.last_progress.empty()) os << "; last progress: " << r.last_progress;
    os << "\n";
    for (const std::string& f : r.failures) os << "  rank " << r.rank << ": " << f << "\n";
  }
  return os.str();
}

LaunchResult LaunchRanks(int size, std::chrono::milliseconds wall_limit, const RankBody& body,
                         const std::function<void()>& after_fork) {
  namespace fr = faultline::runner;
  LaunchResult result;
  const Clock::time_point start = Clock::now();
  const int64_t deadline_ns =
      faultline::MonoNow() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall_limit).count();
  auto launcher = fr::LocalNetnsLauncher::Create({""}, "");
  if (!launcher.ok()) {
    result.setup_error = launcher.status().ToString();
    return result;
  }
  fr::Launcher& l = **launcher;
  std::vector<fr::LaunchSpec> world(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    world[rank].placement.global_rank = rank;
    world[rank].body = [rank, &body](int channel_fd) { return RunRank(rank, channel_fd, body); };
  }
  auto handles = l.StartWorld(world);
  if (after_fork) after_fork();
  if (!handles.ok()) {
    result.setup_error = handles.status().ToString();
    return result;
  }
  const size_t n = handles->size();
  std::vector<std::string> buffers(n);
  std::vector<bool> drained(n, false);
  for (size_t i = 0; i < n; ++i) {
    RankOutcome outcome;
    outcome.rank = static_cast<int>(i);
    outcome.pid = l.LocalPid((*handles)[i]).value_or(-1);
    result.ranks.push_back(outcome);
    fcntl(l.ChannelFd((*handles)[i]), F_SETFL, O_NONBLOCK);
  }
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<size_t> index;
    for (size_t i = 0; i < n; ++i) {
      if (!drained[i]) {
        pfds.push_back({l.ChannelFd((*handles)[i]), POLLIN, 0});
        index.push_back(i);
      }
    }
    if (!pfds.empty()) poll(pfds.data(), pfds.size(), 20);
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      const size_t i = index[k];
      bool eof = false;
      Drain(pfds[k].fd, &buffers[i], &result.ranks[i], &eof);
      if (eof) drained[i] = true;
    }
    if (pfds.empty()) usleep(5000);
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) {
      auto st = l.Wait((*handles)[i], 0);  // polls
      if (st.ok() && !st->running() && drained[i]) ++done;
    }
    if (done == n) break;
    if (faultline::MonoNow() >= deadline_ns) {
      // The watchdog: every rank still running is killed and reaped.
      l.WaitAll(0);
      result.timed_out = true;
      // Collect what the killed ranks said before they died.
      for (size_t i = 0; i < n; ++i) {
        bool eof = false;
        Drain(l.ChannelFd((*handles)[i]), &buffers[i], &result.ranks[i], &eof);
      }
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    Record(l.status((*handles)[i]), &result.ranks[i]);
    // Whatever the test expects of this rank, a sanitizer report fails the test.
    if (result.ranks[i].sanitizer_report) {
      ADD_FAILURE() << "rank " << i << ": a sanitizer reported an error (its report is above)";
    }
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return result;
}

std::string RailAddress(int rank, int rail) {
  // rail 0: 127.0.0.10.., rail 1: 127.0.0.74..; bootstrap stays on 127.0.0.1.
  return "127.0.0." + std::to_string(10 + 64 * rail + rank);
}

LaunchResult LaunchWithOptions(const CommLaunch& launch, const OptionsBody& body) {
  int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t addr_len = sizeof(addr);
  if (listen_fd < 0 || bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd, 128) != 0 ||
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) {
    LaunchResult failed;
    failed.setup_error = std::string("bootstrap listener: ") + std::strerror(errno);
    if (listen_fd >= 0) close(listen_fd);
    return failed;
  }
  const std::string bootstrap = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  return LaunchRanks(
      launch.size, launch.wall_limit,
      [&](int rank, RankReporter& reporter) {
        CommOptions options;
        options.rank = rank;
        options.size = launch.size;
        options.bootstrap = bootstrap;
        if (rank == 0) {
          options.bootstrap_listen_fd = listen_fd;
        } else {
          close(listen_fd);
        }
        for (int rail = 0; rail < launch.rails; ++rail) {
          options.rails.push_back(RailAddress(rank, rail));
        }
        options.init_timeout = launch.init_timeout;
        options.op_timeout = launch.op_timeout;
        if (launch.configure) launch.configure(options);
        return body(options, reporter);
      },
      // Once rank 0 has it, the test process lets go of the listener: if rank 0 dies, its
      // bootstrap port must not keep accepting.
      [listen_fd] { close(listen_fd); });
}

LaunchResult LaunchCommunicators(const CommLaunch& launch, const CommBody& body) {
  return LaunchWithOptions(launch, [&](const CommOptions& options, RankReporter& reporter) {
    const int fds_before = OpenFdCount();
    const int threads_before = ThreadCount();
    reporter.Progress("Communicator::Create");
    Result<std::unique_ptr<Communicator>> created = Communicator::Create(options);
    if (!created.ok()) {
      reporter.Fail("Communicator::Create: " + created.status().ToString());
      return 1;
    }
    std::unique_ptr<Communicator> comm = std::move(created).value();
    Status status = body(*comm, reporter);
    if (!status.ok()) reporter.Fail("rank body returned " + status.ToString());
    reporter.Progress("destroying the communicator");
    Clock::time_point start = Clock::now();
    comm.reset();
    int64_t destroy_ms = MillisSince(start);
    reporter.Value("destroy_ms", destroy_ms);
    if (destroy_ms > kDestroyBound.count()) {
      reporter.Fail("~Communicator took " + std::to_string(destroy_ms) + " ms");
    }
    const int threads_after = ThreadCountSettled(threads_before);
    if (threads_after != threads_before) {
      reporter.Fail(std::to_string(threads_after - threads_before) +
                    " threads still running after ~Communicator");
    }
    if (OpenFdCount() > fds_before) {
      reporter.Fail(std::to_string(OpenFdCount() - fds_before) +
                    " descriptors still open after ~Communicator");
    }
    return reporter.failed() ? 1 : 0;
  });
}

std::string RanksTag(int ranks) {
  std::string tag = "r";
  tag += std::to_string(ranks);
  return tag;
}

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

namespace {
int CountEntries(const char* dir_path) {
  DIR* dir = opendir(dir_path);
  if (dir == nullptr) return -1;
  int count = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}
}  // namespace

// The directory stream's own descriptor is counted too; callers compare counts, so it cancels.
int OpenFdCount() { return CountEntries("/proc/self/fd"); }
int ThreadCount() { return CountEntries("/proc/self/task"); }

int ThreadCountSettled(int expected) {
  int n = ThreadCount();
  for (int i = 0; i < 100 && n != expected; ++i) {
    usleep(10000);
    n = ThreadCount();
  }
  return n;
}

}  // namespace ftccl::test
