#include "perf_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "runner/exec/launcher.h"

namespace faultline::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// ---- command line ---------------------------------------------------------------------------

// Parses argv into `o`. Returns -1 to go on, else the exit code (0 after --help).
int ParseArgs(int argc, char** argv, const PerfBackend& backend, PerfOptions* o) {
  CLI::App app(backend.name + "-perf: collective throughput of " + backend.name +
               " over loopback TCP, nccl-tests style. Ranks are forked processes.");
  std::string coll = CollName(o->coll), dtype = DTypeName(o->dtype), redop = RedOpName(o->redop);
  std::string min_b = "32M", max_b = "32M";
  app.add_option("-c,--collective", coll, "allreduce|allgather|reducescatter|broadcast|alltoall")
      ->capture_default_str();
  app.add_option("-b,--minbytes", min_b, "smallest size (bytes; K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", max_b, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", o->factor, "size multiplier between steps (> 1)")
      ->capture_default_str();
  app.add_option("-n,--iters", o->iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", o->warmup, "untimed iterations per size")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ranks", o->ranks, "rank processes to fork")
      ->capture_default_str()
      ->check(CLI::Range(1, 254));
  app.add_option("--rails", o->rails, "rails per rank (rail r of rank k: 127.0.(r+1).(k+1))")
      ->capture_default_str()
      ->check(CLI::Range(1, 254));
  app.add_option("--rail-net", o->rail_net,
                 "A.B: rail r of rank k at A.B.r.(10+k) instead of loopback (tests/rdma-lab/run uses 198.18)");
  app.add_flag("--check", o->check, "check every element of every rank's output");
  app.add_option("-d,--datatype", dtype, "f32|f64|f16|bf16|i32|i64|u8")->capture_default_str();
  app.add_option("-o,--op", redop, "sum|prod|min|max|avg (allreduce, reducescatter)")
      ->capture_default_str();
  app.add_option("-r,--root", o->root, "root of broadcast")->capture_default_str();
  app.add_option("--timeout", o->timeout_s, "seconds one collective may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-J,--json", o->json_path, "also write the results as JSON to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  auto bad = [&](const std::string& what) {
    std::fprintf(stderr, "%s-perf: %s\n", backend.name.c_str(), what.c_str());
    return 2;
  };
  const auto c = ParseColl(coll);
  if (!c) return bad("unknown collective '" + coll + "'");
  const auto t = ParseDType(dtype);
  if (!t) return bad("unknown datatype '" + dtype + "'");
  const auto r = ParseRedOp(redop);
  if (!r) return bad("unknown reduction '" + redop + "'");
  const auto lo = ParseBytes(min_b);
  const auto hi = ParseBytes(max_b);
  if (!lo || !hi) return bad("sizes look like 1048576, 64K, 1M or 1G");
  o->coll = *c;
  o->dtype = *t;
  o->redop = *r;
  o->min_bytes = *lo;
  o->max_bytes = *hi;
  if (o->min_bytes == 0) return bad("-b must be at least 1 byte");
  if (o->max_bytes < o->min_bytes) return bad("-e must not be below -b");
  if (o->max_bytes > o->min_bytes && !(o->factor > 1)) return bad("-f must be greater than 1");
  if (o->root < 0 || o->root >= o->ranks) return bad("--root must name a rank");
  if (backend.validate) {
    Status st = backend.validate(*o);
    if (!st.ok()) return bad(st.message());
  }
  return -1;
}

// ---- launching ---------------------------------------------------------------------------

// What a rank tells the parent. Smaller than PIPE_BUF, so every write is atomic.
struct RankRecord {
  enum Kind : uint32_t { kResult = 1, kError = 2, kDone = 3 };
  uint32_t kind = 0;
  int32_t rank = 0;
  uint64_t size_index = 0;
  double mean_us = 0;
  // CPU time (user + system, every thread of the rank's process) per timed iteration.
  double cpu_us = 0;
  uint64_t wrong = 0;
  char message[256] = {};
};
static_assert(sizeof(RankRecord) < PIPE_BUF);

// User plus system CPU time of this process (all its threads: the library's progress threads
// count), in microseconds.
double ProcessCpuUs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& tv) { return tv.tv_sec * 1e6 + static_cast<double>(tv.tv_usec); };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

void SendRecord(int fd, RankRecord rec) {
  const char* p = reinterpret_cast<const char*>(&rec);
  size_t left = sizeof(rec);
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nothing left to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void SendError(int fd, int rank, const std::string& what) {
  RankRecord rec;
  rec.kind = RankRecord::kError;
  rec.rank = rank;
  std::snprintf(rec.message, sizeof(rec.message), "%s", what.c_str());
  SendRecord(fd, rec);
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) {
    const size_t rounded = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
    data = std::aligned_alloc(4096, rounded);
    if (data != nullptr) std::memset(data, 0, rounded);  // touch every page before timing
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data = nullptr;
};

Status Guarded(const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Internal(std::string("exception: ") + e.what());
  } catch (...) {
    return Internal("unknown exception");
  }
}

// Where a rank runs: its rank, its rails, the bootstrap (and, on rank 0, its listener).
struct RankEnv {
  int rank = 0;
  std::vector<std::string> rail_addrs;
  std::string bootstrap;
  int bootstrap_listen_fd = -1;  // rank 0 only
  std::string scratch_dir;
};

// The adapter's error as the harness's message.
Status FromAdapter(const faultline::Status& st) {
  return st.ok() ? Status::Ok() : Internal(st.message());
}

// Body of one rank process. Returns its exit code.
int RankMain(const PerfBackend& backend, const PerfOptions& o, const RankEnv& env,
             const std::vector<size_t>& sizes, int out_fd) {
  const std::chrono::milliseconds timeout(o.timeout_s * 1000LL);
  std::unique_ptr<workload::adapters::CclAdapter> ccl;
  Status st = Guarded([&] {
    auto created = workload::adapters::CreateCclAdapter(backend.name);
    if (!created.ok()) return FromAdapter(created.status());
    ccl = std::move(created).value();
    workload::adapters::CclInit init;
    init.rank = env.rank;
    init.size = o.ranks;
    init.bootstrap = env.bootstrap;
    init.bootstrap_listen_fd = env.bootstrap_listen_fd;
    init.rails = env.rail_addrs;
    init.store_dir = env.scratch_dir;
    init.op_timeout = timeout;
    if (backend.configure) backend.configure(o, &init);
    Status s = FromAdapter(ccl->Init(init));
    if (env.bootstrap_listen_fd >= 0) close(env.bootstrap_listen_fd);  // the adapter has its own
    return s;
  });
  if (!st.ok()) {
    SendError(out_fd, env.rank, "create: " + st.message());
    return 3;
  }
  const size_t ts = DTypeSize(o.dtype);
  size_t max_send = 0, max_recv = 0;
  for (size_t bytes : sizes) {
    const SizeLayout l = LayoutFor(o.coll, o.dtype, o.ranks, bytes);
    max_send = std::max(max_send, l.send_elems * ts);
    max_recv = std::max(max_recv, l.recv_elems * ts);
  }
  AlignedBuffer send(max_send), recv(max_recv);
  if (send.data == nullptr || recv.data == nullptr) {
    SendError(out_fd, env.rank, "out of memory for the buffers");
    return 3;
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    const SizeLayout l = LayoutFor(o.coll, o.dtype, o.ranks, sizes[k]);
    FillInput(o, l, env.rank, send.data);
    OpArgs args;
    args.coll = o.coll;
    args.send = send.data;
    args.recv = recv.data;
    args.count = l.count;
    args.dtype = o.dtype;
    args.redop = o.redop;
    args.root = o.root;
    RankRecord rec;
    rec.kind = RankRecord::kResult;
    rec.rank = env.rank;
    rec.size_index = k;
    st = Guarded([&]() -> Status {
      Status s = FromAdapter(ccl->Prepare(args));
      if (!s.ok()) return Internal("prepare: " + s.message());
      for (int i = 0; i < o.warmup; ++i) {
        s = FromAdapter(ccl->Run(args, timeout));
        if (!s.ok()) return Internal("warm-up: " + s.message());
      }
      s = FromAdapter(ccl->Barrier(timeout));
      if (!s.ok()) return Internal("barrier: " + s.message());
      const double cpu0 = ProcessCpuUs();
      const auto t0 = SteadyClock::now();
      for (int i = 0; i < o.iters; ++i) {
        s = FromAdapter(ccl->Run(args, timeout));
        if (!s.ok()) return Internal("iteration " + std::to_string(i) + ": " + s.message());
      }
      const auto t1 = SteadyClock::now();
      rec.cpu_us = (ProcessCpuUs() - cpu0) / o.iters;
      rec.mean_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
      if (o.check) {
        std::memset(recv.data, 0xFF, l.recv_elems * ts);  // NaN or all ones: never a result
        s = FromAdapter(ccl->Run(args, timeout));
        if (!s.ok()) return Internal("check run: " + s.message());
        rec.wrong = CountWrong(o, l, env.rank, recv.data);
      }
      return Status::Ok();
    });
    if (!st.ok()) {
      SendError(out_fd, env.rank, std::to_string(sizes[k]) + " bytes: " + st.message());
      return 3;
    }
    SendRecord(out_fd, rec);
  }
  // Nobody leaves while a peer may still talk to it (some algorithms send a last notification
  // after their own result is complete).
  st = Guarded([&] { return FromAdapter(ccl->Finish(timeout)); });
  if (!st.ok()) {
    SendError(out_fd, env.rank, "final barrier: " + st.message());
    return 3;
  }
  ccl.reset();
  RankRecord done;
  done.kind = RankRecord::kDone;
  done.rank = env.rank;
  SendRecord(out_fd, done);
  return 0;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

struct Row {
  SizeLayout layout;
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  // CPU time of one collective summed over all ranks (user + system, every thread).
  double cpu_us = 0;
  uint64_t wrong = 0;
};

// CPU seconds all ranks spend per GB of the collective's size (the larger of a rank's buffers,
// as `size`): what moving and checking a byte costs, comparable across libraries.
double CpuSecondsPerGb(const Row& row) {
  if (row.layout.bytes == 0) return 0;
  return row.cpu_us * 1e-6 / (static_cast<double>(row.layout.bytes) / 1e9);
}

// The parent: starts the ranks (fork launches of runner::LocalNetnsLauncher, each with its
// channel to the parent), prints the table, writes the JSON.
class PerfRun final {
 public:
  PerfRun(const PerfBackend& backend, const PerfOptions& o)
      : backend_(backend), o_(o), sizes_(SizeSweep(o.min_bytes, o.max_bytes, o.factor)) {}
  ~PerfRun() {
    KillAll();
    ReapAll();
    launcher_.reset();
    if (listen_fd_ >= 0) close(listen_fd_);
    if (!scratch_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(scratch_, ec);
    }
  }
  PerfRun(const PerfRun&) = delete;
  PerfRun& operator=(const PerfRun&) = delete;

  int Run();

 private:
  Status Start();
  void Collect();
  void KillAll();
  void Reap(size_t k);  // waits for rank k; records how it ended unless it was killed here
  void ReapAll();
  // A rank died without reporting: the root cause, reported before any rank's error.
  void Crash(const std::string& why) {
    if (crash_.empty()) crash_ = why;
  }
  void PrintHeader();
  void PrintRow(const Row& row);
  void Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }
  void WriteJson();

  const PerfBackend& backend_;
  const PerfOptions& o_;
  std::vector<size_t> sizes_;
  std::string scratch_;
  int listen_fd_ = -1;
  std::unique_ptr<runner::LocalNetnsLauncher> launcher_;
  std::vector<int> handles_;  // by rank
  std::vector<int> pipes_;    // the ranks' channels (the launcher's); -1 once at end of file
  std::vector<bool> reaped_;
  std::vector<bool> done_;
  std::vector<bool> killed_;
  std::vector<bool> reported_error_;
  std::string crash_;
  std::vector<std::vector<RankRecord>> results_;  // [size][rank]
  std::vector<Row> rows_;
  std::vector<std::pair<std::string, std::string>> knobs_;
  std::string error_;
};

Status PerfRun::Start() {
  char tmpl[] = "/tmp/faultline-perf-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return Internal(std::string("mkdtemp: ") + std::strerror(errno));
  }
  scratch_ = tmpl;
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 256) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Internal(std::string("bootstrap listener: ") + std::strerror(errno));
  }
  const std::string bootstrap = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  results_.assign(sizes_.size(), {});
  auto launcher = runner::LocalNetnsLauncher::Create({""}, "");
  if (!launcher.ok()) return Internal(launcher.status().ToString());
  launcher_ = std::move(launcher).value();
  std::vector<runner::LaunchSpec> world;
  for (int rank = 0; rank < o_.ranks; ++rank) {
    RankEnv env;
    env.rank = rank;
    for (int r = 0; r < o_.rails; ++r) {
      env.rail_addrs.push_back(o_.rail_net.empty()
                                   ? "127.0." + std::to_string(r + 1) + "." + std::to_string(rank + 1)
                                   : o_.rail_net + "." + std::to_string(r) + "." + std::to_string(10 + rank));
    }
    env.bootstrap = bootstrap;
    env.scratch_dir = scratch_;
    runner::LaunchSpec spec;
    spec.placement.global_rank = rank;
    spec.body = [this, env](int channel_fd) mutable {
      // Only rank 0 keeps the listener: if it dies, the bootstrap port must not keep accepting.
      if (env.rank == 0) {
        env.bootstrap_listen_fd = listen_fd_;
      } else {
        close(listen_fd_);
      }
      return RankMain(backend_, o_, env, sizes_, channel_fd);
    };
    world.push_back(std::move(spec));
  }
  auto handles = launcher_->StartWorld(world);
  close(listen_fd_);  // rank 0 holds its own copy
  listen_fd_ = -1;
  if (!handles.ok()) return Internal(handles.status().ToString());
  handles_ = std::move(handles).value();
  for (int h : handles_) {
    pipes_.push_back(launcher_->ChannelFd(h));
    reaped_.push_back(false);
    done_.push_back(false);
    killed_.push_back(false);
    reported_error_.push_back(false);
  }
  return Status::Ok();
}

void PerfRun::KillAll() {
  for (size_t k = 0; k < handles_.size(); ++k) {
    if (reaped_[k]) continue;
    launcher_->Kill(handles_[k], SIGKILL).IgnoreError();
    killed_[k] = true;
  }
}

void PerfRun::Reap(size_t k) {
  if (reaped_[k]) return;
  auto status = launcher_->Wait(handles_[k], INT64_MAX);
  reaped_[k] = true;
  if (!status.ok() || killed_[k]) return;
  const std::string who = "rank " + std::to_string(k);
  if (status->state == runner::ExitStatus::State::kSignaled) {
    Crash(who + " died of signal " + std::to_string(status->signal) + " (" +
          strsignal(status->signal) + ")");
  } else if (status->code != 0 && !reported_error_[k]) {
    Crash(who + " exited with code " + std::to_string(status->code) + " without saying why");
  } else if (status->code == 0 && !done_[k]) {
    Crash(who + " exited before finishing");
  }
}

void PerfRun::ReapAll() {
  for (size_t k = 0; k < handles_.size(); ++k) Reap(k);
}

void PerfRun::Collect() {
  // A library's own deadlines end a stuck collective within timeout_s; this only catches a rank
  // that hangs outside them (a whole size, every warm-up and timed run, is allowed to be slow).
  const auto silence_limit =
      std::chrono::seconds(static_cast<int64_t>(o_.timeout_s) * (o_.warmup + o_.iters + 3) + 10);
  const auto grace = std::chrono::seconds(5);
  auto last_progress = SteadyClock::now();
  bool killing = false;  // a rank failed: the others get `grace`, then SIGKILL
  SteadyClock::time_point kill_at{};
  size_t next_row = 0;
  std::vector<size_t> partial(pipes_.size(), 0);
  std::vector<RankRecord> pending(pipes_.size());
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<size_t> who;
    for (size_t k = 0; k < pipes_.size(); ++k) {
      if (pipes_[k] >= 0) {
        pfds.push_back({pipes_[k], POLLIN, 0});
        who.push_back(k);
      }
    }
    if (pfds.empty()) break;
    const int n = poll(pfds.data(), pfds.size(), 500);
    if (n < 0 && errno != EINTR) {
      Fail(std::string("poll: ") + std::strerror(errno));
      KillAll();
      break;
    }
    const auto now = SteadyClock::now();
    for (size_t p = 0; n > 0 && p < pfds.size(); ++p) {
      if ((pfds[p].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const size_t k = who[p];
      char* dst = reinterpret_cast<char*>(&pending[k]) + partial[k];
      const ssize_t got = read(pipes_[k], dst, sizeof(RankRecord) - partial[k]);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {  // the rank is gone
        pipes_[k] = -1;
        Reap(k);
        if (!done_[k] && !killing) {
          killing = true;
          kill_at = now + grace;
        }
        continue;
      }
      partial[k] += static_cast<size_t>(got);
      if (partial[k] < sizeof(RankRecord)) continue;
      partial[k] = 0;
      const RankRecord rec = pending[k];
      last_progress = now;
      if (rec.kind == RankRecord::kDone) {
        done_[k] = true;
      } else if (rec.kind == RankRecord::kError) {
        std::fprintf(stderr, "# rank %d: %s\n", rec.rank, rec.message);
        reported_error_[k] = true;
        Fail("rank " + std::to_string(rec.rank) + ": " + rec.message);
        if (!killing) {
          killing = true;
          kill_at = now + grace;
        }
      } else if (rec.kind == RankRecord::kResult && rec.size_index < sizes_.size()) {
        results_[rec.size_index].push_back(rec);
      }
    }
    while (next_row < sizes_.size() && results_[next_row].size() == static_cast<size_t>(o_.ranks)) {
      Row row;
      row.layout = LayoutFor(o_.coll, o_.dtype, o_.ranks, sizes_[next_row]);
      for (const RankRecord& r : results_[next_row]) {
        row.time_us = std::max(row.time_us, r.mean_us);
        row.cpu_us += r.cpu_us;
        row.wrong += r.wrong;
      }
      row.algbw = row.time_us > 0 ? static_cast<double>(row.layout.bytes) / row.time_us / 1e3 : 0;
      row.busbw = row.algbw * workload::BusBwFactor(o_.coll, o_.ranks);
      rows_.push_back(row);
      PrintRow(row);
      ++next_row;
    }
    if (killing && now >= kill_at) {
      KillAll();
      kill_at = SteadyClock::time_point::max();
    }
    if (now - last_progress > silence_limit) {
      Fail("no rank reported for " + std::to_string(silence_limit.count()) + " s: hung");
      KillAll();
      last_progress = now;
    }
  }
  ReapAll();
}

void PerfRun::PrintHeader() {
  std::printf("# %s-perf: %s, %d ranks, %d rails, dtype %s", backend_.name.c_str(),
              CollName(o_.coll), o_.ranks, o_.rails, DTypeName(o_.dtype));
  if (IsReduction(o_.coll)) std::printf(", redop %s", RedOpName(o_.redop));
  if (o_.coll == Coll::kBroadcast) std::printf(", root %d", o_.root);
  std::printf(", iters %d, warmup %d, check %s\n", o_.iters, o_.warmup, o_.check ? "on" : "off");
  std::printf("# rails: rail r of rank k at 127.0.(r+1).(k+1); ranks are processes on this host\n");
  for (const std::string& note : backend_.notes) std::printf("# %s\n", note.c_str());
  if (!knobs_.empty()) {
    std::printf("# %s knobs:", backend_.name.c_str());
    for (const auto& [k, v] : knobs_) std::printf(" %s=%s", k.c_str(), v.c_str());
    std::printf("\n");
  }
  std::printf("#\n");
  std::printf("# %10s %12s %6s %6s %11s %8s %8s %8s %10s %9s\n", "size", "count", "type",
              "redop", "time", "algbw", "busbw", "#wrong", "cpu", "cpu/GB");
  std::printf("# %10s %12s %6s %6s %11s %8s %8s %8s %10s %9s\n", "(B)", "(elements)", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(s)");
  std::fflush(stdout);
}

void PerfRun::PrintRow(const Row& row) {
  const std::string wrong = o_.check ? std::to_string(row.wrong) : "N/A";
  std::printf("  %10zu %12zu %6s %6s %11.1f %8.3f %8.3f %8s %10.1f %9.3f\n", row.layout.bytes,
              row.layout.print_count, DTypeName(o_.dtype),
              IsReduction(o_.coll) ? RedOpName(o_.redop) : "none", row.time_us, row.algbw,
              row.busbw, wrong.c_str(), row.cpu_us, CpuSecondsPerGb(row));
  std::fflush(stdout);
}

void PerfRun::WriteJson() {
  if (o_.json_path.empty()) return;
  nlohmann::json j;
  j["schema"] = "faultline.perf/v1";
  j["ccl"] = backend_.name;
  j["collective"] = CollName(o_.coll);
  j["dtype"] = DTypeName(o_.dtype);
  j["redop"] = IsReduction(o_.coll) ? RedOpName(o_.redop) : "none";
  j["root"] = o_.root;
  j["ranks"] = o_.ranks;
  j["rails"] = o_.rails;
  j["iters"] = o_.iters;
  j["warmup"] = o_.warmup;
  j["check"] = o_.check;
  j["busbw_factor"] = workload::BusBwFactor(o_.coll, o_.ranks);
  nlohmann::json knobs = nlohmann::json::object();
  for (const auto& [k, v] : knobs_) knobs[k] = v;
  j["knobs"] = knobs;
  j["notes"] = backend_.notes;
  nlohmann::json results = nlohmann::json::array();
  double sum_busbw = 0;
  uint64_t wrong = 0;
  for (const Row& row : rows_) {
    nlohmann::json r;
    r["size"] = row.layout.bytes;
    r["count"] = row.layout.print_count;
    r["type"] = DTypeName(o_.dtype);
    r["redop"] = IsReduction(o_.coll) ? RedOpName(o_.redop) : "none";
    r["time_us"] = row.time_us;
    r["algbw_gbps"] = row.algbw;
    r["busbw_gbps"] = row.busbw;
    r["cpu_us"] = row.cpu_us;
    r["cpu_s_per_gb"] = row.layout.bytes > 0 ? nlohmann::json(CpuSecondsPerGb(row)) : nullptr;
    if (o_.check) {
      r["wrong"] = row.wrong;
    } else {
      r["wrong"] = nullptr;
    }
    results.push_back(r);
    sum_busbw += row.busbw;
    wrong += row.wrong;
  }
  j["results"] = results;
  j["avg_busbw_gbps"] = rows_.empty() ? 0.0 : sum_busbw / static_cast<double>(rows_.size());
  j["wrong_total"] = o_.check ? nlohmann::json(wrong) : nlohmann::json(nullptr);
  j["complete"] = rows_.size() == sizes_.size();
  j["error"] = error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_);
  std::ofstream out(o_.json_path);
  out << j.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "# cannot write %s\n", o_.json_path.c_str());
    Fail("cannot write " + o_.json_path);
  }
}

int PerfRun::Run() {
  if (backend_.knobs) knobs_ = backend_.knobs(o_);
  PrintHeader();
  Status st = Start();
  if (!st.ok()) {
    Fail(st.message());
    KillAll();
  }
  Collect();
  if (!crash_.empty()) {
    error_ = error_.empty() ? crash_ : crash_ + "; first error reported: " + error_;
  }
  uint64_t wrong = 0;
  double sum_busbw = 0;
  for (const Row& row : rows_) {
    wrong += row.wrong;
    sum_busbw += row.busbw;
  }
  WriteJson();
  if (!rows_.empty()) {
    std::printf("# Avg bus bandwidth    : %s GB/s\n",
                Fmt("%.3f", sum_busbw / static_cast<double>(rows_.size())).c_str());
  }
  if (o_.check) {
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrong),
                wrong == 0 ? "OK" : "FAILED");
  }
  std::fflush(stdout);
  if (!error_.empty()) {
    std::fprintf(stderr, "%s-perf: FAILED: %s\n", backend_.name.c_str(), error_.c_str());
    return 3;
  }
  if (rows_.size() != sizes_.size()) {
    std::fprintf(stderr, "%s-perf: FAILED: only %zu of %zu sizes completed\n",
                 backend_.name.c_str(), rows_.size(), sizes_.size());
    return 3;
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace

std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, double factor) {
  std::vector<size_t> sizes;
  size_t s = min_bytes;
  while (s <= max_bytes) {
    sizes.push_back(s);
    if (!(factor > 1)) break;
    const double next = std::floor(static_cast<double>(s) * factor);
    if (next > static_cast<double>(max_bytes)) break;
    s = std::max(s + 1, static_cast<size_t>(next));
  }
  return sizes;
}

workload::CheckSpec SpecOf(const PerfOptions& o) {
  workload::CheckSpec spec;
  spec.coll = o.coll;
  spec.dtype = o.dtype;
  spec.redop = o.redop;
  spec.root = o.root;
  spec.ranks = o.ranks;
  return spec;
}

void FillInput(const PerfOptions& o, const SizeLayout& l, int rank, void* send) {
  workload::FillInput(SpecOf(o), l, rank, send);
}

uint64_t CountWrong(const PerfOptions& o, const SizeLayout& l, int rank, const void* recv) {
  return workload::CountWrong(SpecOf(o), l, rank, recv);
}

int PerfMain(int argc, char** argv, const PerfBackend& backend) {
  PerfOptions o;
  const int rc = ParseArgs(argc, argv, backend, &o);
  if (rc >= 0) return rc;
  signal(SIGPIPE, SIG_IGN);
  PerfRun run(backend, o);
  return run.Run();
}

}  // namespace faultline::bench
