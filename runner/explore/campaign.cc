#include "runner/explore/campaign.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/sha256.h"
#include "reports/exit_code.h"
#include "reports/write_reports.h"
#include "runner/exec/run.h"
#include "runner/explore/campaign_report.h"
#include "runner/explore/fault_space.h"
#include "runner/explore/generator.h"
#include "runner/explore/invariants.h"
#include "runner/explore/shrink.h"
#include "runner/explore/sweep.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner::explore {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kOk = reports::ToInt(reports::ExitCode::kOk);
constexpr int kViolation = reports::ToInt(reports::ExitCode::kExpectationFailed);
constexpr int kBadInput = reports::ToInt(reports::ExitCode::kBadInput);
constexpr int kHarness = reports::ToInt(reports::ExitCode::kHarnessError);

// The topology and message size of a space's scenario.
TopologyShape ShapeOf(const FaultSpace& sp) {
  const Topology& t = sp.base.topology;
  return {t.hosts, t.ranks_per_host, t.rails, sp.base.workload.bytes};
}

// `sp` with the topology and message size of `shape` (targets cut to what is left).
FaultSpace SpaceWith(const FaultSpace& sp, const TopologyShape& shape) {
  FaultSpace out = sp;
  out.base.topology.hosts = shape.hosts;
  out.base.topology.ranks_per_host = shape.ranks_per_host;
  out.base.topology.rails = shape.rails;
  out.base.workload.bytes = shape.bytes;
  std::erase_if(out.targets.hosts, [&](int h) { return h >= shape.hosts; });
  std::erase_if(out.targets.rails, [&](int r) { return r >= shape.rails; });
  return out;
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool Write(const fs::path& p, const std::string& text) {
  const Status s = reports::WriteFileAtomically(p.string(), text);
  if (!s.ok()) FL_ERROR("explore", "%s", s.ToString().c_str());
  return s.ok();
}

// One run of one scenario file, judged.
// SIGINT/SIGTERM while runs go on in child processes (--jobs): the campaign passes it on to
// each of them (SIGTERM: the run heals its faults and removes its topology) and stops.
std::atomic<bool> g_children_stop{false};
void OnStopSignal(int) { g_children_stop = true; }

// One run to make in a child process.
struct Job {
  int64_t index = 0;
  fs::path file;  // the scenario
  fs::path dir;   // its run directory
  RunFaults run;  // its faults (empty for a replay)
  std::optional<double> sweep_value;
};

struct Judged {
  int code = 0;
  std::string outcome;
  std::string error;  // could not be run or judged
  std::vector<InvariantResult> invariants;
  nlohmann::json versions;
  std::optional<double> stall_ms;
  double seconds = 0;
  bool Fails(const std::string& invariant) const {
    for (const auto& i : invariants) {
      if (i.name == invariant && i.verdict == Verdict::kFail) return true;
    }
    return false;
  }
};

class Campaign final {
 public:
  Campaign(const CampaignOptions& o, FaultSpace space)
      : o_(o), space_(std::move(space)), out_(o.out_dir) {}

  int Run();

 private:
  // The runs of a sweep (sweep.h); returns the exit code.
  int RunSweep(const SweepSpec& sweep);
  // Runs `file` o_.runs times (default 5), each judged; returns the exit code.
  int RunReplay(const std::string& file);
  // Writes the campaign's files and says what it found; returns `code` (or kHarness when a
  // file could not be written).
  int Finish(int code);
  // Runs generated run `run` from `file` into `dir` and records it.
  RunRecord RunOne(const fs::path& file, int64_t index, const RunFaults& run);
  // Records a run that has been judged (rec_.runs), and returns the record.
  RunRecord& Record(const fs::path& file, const fs::path& dir, int64_t index, const RunFaults& run,
                    const Judged& j, double started_s);
  Judged RunFile(const fs::path& file, const fs::path& dir);
  // Parses `file` and makes `dir` afresh: the scenario, or nullopt with j->code and j->error.
  std::optional<Scenario> Prepare(const fs::path& file, const fs::path& dir, Judged* j);
  RunOptions OptionsFor(const fs::path& file, const fs::path& dir) const;
  // Judges the run in `dir` that ended with j->code; `run_pid` is the process that ran it
  // (the owner of its nft tables).
  void Judge(const fs::path& dir, int run_pid, Judged* j);
  // --jobs above 1: runs the jobs `next` gives (nullopt: start no more) in child processes,
  // o_.jobs at a time, and hands each judged run to `done` as it ends (false: start no more).
  // Returns when none is left running.
  void RunConcurrently(const std::function<std::optional<Job>()>& next,
                       const std::function<bool(const Job&, const Judged&, double)>& done);
  int RunSearchConcurrently();
  // Runs the jobs `next` gives one after another in this process, or --jobs at a time in
  // child processes (rec_.runs then sorted by index), handing each judged run to `done`.
  void RunJobs(const std::function<std::optional<Job>()>& next,
               const std::function<bool(const Job&, const Judged&, double)>& done);
  void ShrinkViolation(const RunRecord& failing);
  // Confirms and shrinks a violation: true when it is confirmed (rec_.shrink holds it);
  // otherwise it is recorded as unconfirmed and the campaign goes on.
  bool ConfirmAndShrink(const RunRecord& failing);
  // After a sweep's or a replay's runs: its exit code (Finish) when it was interrupted or the
  // harness failed, otherwise nullopt.
  std::optional<int> EndedEarly(bool harness);
  bool OutOfBudget() const {
    return o_.budget_ns && Since(t0_) * 1e9 >= static_cast<double>(*o_.budget_ns);
  }
  std::string Header(const std::vector<GenFault>& minimal, int failed, int runs) const;

  // Copies the rank program into OUT/bin, which every run then uses (worker_), and records
  // its source and sha256. A campaign runs for minutes to hours: a build that replaces the
  // original meanwhile would otherwise mix two versions of the code under test in one
  // campaign, unseen (it happened: a rebuild during one changed the worker between runs).
  Status PinWorker();

  const CampaignOptions& o_;
  std::string worker_;  // the pinned rank program (PinWorker)
  FaultSpace space_;
  fs::path out_;
  CampaignRecord rec_;
  Clock::time_point t0_ = Clock::now();
  bool interrupted_ = false;
  uint64_t failing_seed_ = 0;  // the scenario seed of the run being shrunk
};

std::optional<Scenario> Campaign::Prepare(const fs::path& file, const fs::path& dir, Judged* j) {
  ParseOutcome p = ParseScenarioFile(file.string());
  if (!p.ok()) {
    j->code = kHarness;
    j->error = "the generated file does not validate: " +
               (p.diagnostics.empty() ? std::string("?") : p.diagnostics.front().ToString());
    return std::nullopt;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  return std::move(*p.scenario);
}

RunOptions Campaign::OptionsFor(const fs::path& file, const fs::path& dir) const {
  RunOptions ro;
  ro.scenario_path = file.string();
  ro.out_dir = dir.string();
  ro.ccl = o_.ccl;
  ro.worker_path = worker_;  // pinned by Run before any run
  return ro;
}

Status Campaign::PinWorker() {
  const CclName ccl = o_.ccl.value_or(space_.base.ccl);
  const fs::path src = RankProgramPath(ccl, o_.worker_path);
  if (access(src.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound,
                  "worker binary " + src.string() + " not found (build " +
                      std::string(workload::adapters::CclTraitsOf(ccl).rank_program) + ")");
  }
  std::error_code ec;
  // Absolute: the ranks are started from other directories (an --out given relative).
  const fs::path dst = fs::absolute(out_ / "bin" / src.filename()).lexically_normal();
  fs::create_directories(dst.parent_path(), ec);
  if (!ec) fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    return Status(Code::kInternal,
                  "cannot copy " + src.string() + " to " + dst.string() + ": " + ec.message());
  }
  std::ifstream in(dst, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) return Status(Code::kInternal, "cannot read " + dst.string());
  rec_.worker_source = fs::absolute(src).lexically_normal().string();
  rec_.worker_sha256 = Sha256Hex(bytes.str());
  worker_ = dst.string();
  return Status::Ok();
}

Judged Campaign::RunFile(const fs::path& file, const fs::path& dir) {
  Judged j;
  const auto t0 = Clock::now();
  std::optional<Scenario> sc = Prepare(file, dir, &j);
  if (!sc) return j;
  std::printf("\nfaultline explore: %s -> %s\n", file.c_str(), dir.c_str());
  std::fflush(stdout);
  j.code = RunParsedScenario(std::move(*sc), OptionsFor(file, dir));
  interrupted_ = interrupted_ || RunInterrupted();
  j.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  Judge(dir, static_cast<int>(getpid()), &j);
  return j;
}

void Campaign::Judge(const fs::path& dir, int run_pid, Judged* out) {
  Judged& j = *out;
  if (!j.error.empty()) return;
  if (j.code == kBadInput || j.code == kHarness) {
    j.error = "faultline run into " + dir.string() + " ended with exit code " +
              std::to_string(j.code) + " (see its output)";
    return;
  }
  RunView view = LoadRunView(dir.string());
  if (view.report) {
    j.outcome = view.report->value("outcome", "");
    const auto& env = view.report->value("environment", nlohmann::json::object());
    if (env.is_object()) j.versions = env.value("versions", nlohmann::json());
    const auto& m = view.report->value("metrics", nlohmann::json::object());
    if (m.is_object() && m.value("stall_ms", nlohmann::json()).is_number()) {
      j.stall_ms = m["stall_ms"].get<double>();
    }
  }
  // What the run leaves is read until it is gone, for at most 3 s (ranks reaped, namespaces
  // deleted asynchronously by the kernel's cleanup of their last reference).
  auto read = [run_pid] {
    HostState h = ReadHostState();
    h.pid = run_pid;
    return h;
  };
  HostState host = read();
  if (space_.invariants.nothing_left_behind) {
    for (int i = 0; i < 30 && CheckNothingLeftBehind(view, host).verdict == Verdict::kFail; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      host = read();
    }
  }
  j.invariants = CheckInvariants(view, space_.invariants, &host);
}

void Campaign::RunConcurrently(const std::function<std::optional<Job>()>& next,
                               const std::function<bool(const Job&, const Judged&, double)>& done) {
  struct Running {
    Job job;
    Clock::time_point t0;
    double started_s;
  };
  std::map<pid_t, Running> running;
  g_children_stop = false;
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);  // no SA_RESTART: waitpid returns EINTR
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  bool starting = true;
  bool passed_on = false;
  for (;;) {
    while (starting && !g_children_stop && static_cast<int>(running.size()) < o_.jobs) {
      std::optional<Job> job = next();
      if (!job) {
        starting = false;
        break;
      }
      const double started_s = Since(t0_);
      Judged j;
      std::optional<Scenario> sc = Prepare(job->file, job->dir, &j);
      if (!sc) {
        starting = done(*job, j, started_s);
        continue;
      }
      const std::string log = job->dir.string() + ".log";
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = fork();
      if (pid < 0) {
        j.code = kHarness;
        j.error = std::string("cannot start a run's process: ") + std::strerror(errno);
        starting = done(*job, j, started_s);
        continue;
      }
      if (pid == 0) {
        // The child: the run installs its own SIGINT/SIGTERM handling; until then a signal
        // ends it before it has made anything.
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
          dup2(fd, STDOUT_FILENO);
          dup2(fd, STDERR_FILENO);
          close(fd);
        }
        std::printf("faultline explore: %s -> %s\n", job->file.c_str(), job->dir.c_str());
        std::fflush(stdout);
        const int code = RunParsedScenario(std::move(*sc), OptionsFor(job->file, job->dir));
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(code);
      }
      std::printf("faultline explore: %s -> %s (process %d, its output in %s)\n", job->file.c_str(),
                  job->dir.c_str(), static_cast<int>(pid), log.c_str());
      std::fflush(stdout);
      running.emplace(pid, Running{std::move(*job), Clock::now(), started_s});
    }
    if (running.empty()) break;
    if (g_children_stop && !passed_on) {
      for (const auto& [pid, r] : running) kill(pid, SIGTERM);
      passed_on = true;
      starting = false;
      interrupted_ = true;
    }
    int st = 0;
    const pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      FL_ERROR("explore", "waiting for the runs' processes: %s", std::strerror(errno));
      break;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    Running r = std::move(it->second);
    running.erase(it);
    Judged j;
    j.seconds = Since(r.t0);
    if (WIFEXITED(st)) {
      j.code = WEXITSTATUS(st);
    } else {
      j.code = kHarness;
      j.error = "the process of the run into " + r.job.dir.string() + " ended by signal " +
                std::to_string(WTERMSIG(st)) + " (its output: " + r.job.dir.string() + ".log)";
    }
    if (g_children_stop) interrupted_ = true;
    Judge(r.job.dir, static_cast<int>(pid), &j);
    if (!done(r.job, j, r.started_s)) starting = false;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
}

std::string Campaign::Header(const std::vector<GenFault>& minimal, int failed, int runs) const {
  std::string h = "# reproduce:\n";
  h += "#   invariant: " + rec_.shrink->invariant + "\n";
  h += "#   space: " + space_.file + " (sha256 " + space_.sha256 + ")\n";
  h += "#   campaign seed " + std::to_string(rec_.seed) + ", run " +
       std::to_string(rec_.shrink->from_index) + ", shrunk to " + std::to_string(minimal.size()) +
       " fault(s)\n";
  h += "#   ccl: " + rec_.ccl + "; versions: " + rec_.version + "\n";
  h += "#   worker: sha256 " + rec_.worker_sha256 + " (a copy of " + rec_.worker_source + ")\n";
  h += "#   failed " + std::to_string(failed) + " of " + std::to_string(runs) +
       " run(s) (confirmed when " + std::to_string(rec_.confirm_k) + " of " +
       std::to_string(rec_.confirm_n) + " fail)\n";
  h += "#   replay: faultline run minimal.yaml --out DIR (the invariant is checked by "
       "faultline explore; see campaign.json)\n";
  return h;
}

void Campaign::ShrinkViolation(const RunRecord& failing) {
  rec_.shrink.emplace();
  ShrinkRecord& s = *rec_.shrink;
  s.from_index = failing.index;
  s.invariant = failing.Violation();
  const fs::path dir = out_ / "shrink";
  std::error_code ec;
  fs::create_directories(dir, ec);
  int candidate = 0;
  // The tally of every candidate asked about, by its faults.
  std::map<std::string, std::pair<int, int>> tallies;
  auto key = [](const FaultSpace& sp, const std::vector<GenFault>& fs) {
    std::string k = ShapeOf(sp).Describe() + ";";
    for (const auto& f : fs) k += Describe(f) + ";";
    return k;
  };
  auto confirm = [&](const FaultSpace& sp, const std::vector<GenFault>& faults,
                     bool first_known_failed) {
    const int c = candidate++;
    const fs::path file = dir / ("cand-" + std::to_string(c) + ".yaml");
    RunFaults rf{failing_seed_, faults};
    RunOrigin origin{
        rec_.seed, failing.index,
        "shrink candidate " + std::to_string(c) + " of run " + std::to_string(failing.index)};
    Write(file, RenderScenario(sp, rf, origin));
    int tries = 0, failed = 0;
    const bool fails = ConfirmKOfN(
        [&] {
          const int t = tries++;
          if (t == 0 && first_known_failed) {
            ++failed;
            return true;
          }
          const Judged j =
              RunFile(file, dir / ("cand-" + std::to_string(c)) / ("try-" + std::to_string(t)));
          ++s.runs;
          const bool f = j.Fails(s.invariant);
          if (f) ++failed;
          return f;
        },
        rec_.confirm_k, rec_.confirm_n, &tries);
    tallies[key(sp, faults)] = {failed, tries};
    return fails;
  };
  failing_seed_ = Generate(space_, rec_.seed, failing.index).scenario_seed;
  s.confirmed = confirm(space_, failing.faults, true);
  s.confirm_runs = s.runs;
  s.result.minimal = failing.faults;
  if (s.confirmed && o_.shrink && !OutOfBudget() && !interrupted_) {
    ShrinkLimits limits;
    limits.earliest_ns = space_.start_ns.lo;
    limits.max_candidates = o_.max_candidates;
    s.result = Shrink(
        failing.faults,
        [&](const std::vector<GenFault>& faults) {
          if (OutOfBudget() || interrupted_) return CandidateVerdict::kOutOfBudget;
          return confirm(space_, faults, false) ? CandidateVerdict::kFails
                                                : CandidateVerdict::kPasses;
        },
        [&](const std::vector<GenFault>& faults) { return FitsSpace(space_, faults); }, limits);
  }
  // Then the topology and the message, with the faults as shrunk.
  FaultSpace minimal_space = space_;
  if (s.confirmed && o_.shrink && o_.max_topology_candidates > 0 && !OutOfBudget() &&
      !interrupted_) {
    s.topology = ShrinkTopology(
        ShapeOf(space_), s.result.minimal,
        [&](const TopologyShape& shape) {
          if (OutOfBudget() || interrupted_) return CandidateVerdict::kOutOfBudget;
          return confirm(SpaceWith(space_, shape), s.result.minimal, false)
                     ? CandidateVerdict::kFails
                     : CandidateVerdict::kPasses;
        },
        o_.max_topology_candidates);
    minimal_space = SpaceWith(space_, s.topology->minimal);
  }
  const auto t = tallies[key(minimal_space, s.result.minimal)];
  s.minimal_failed = t.first;
  s.minimal_runs = t.second;
  if (!s.confirmed) return;  // flaky: no minimal file; the campaign goes on
  RunFaults rf{failing_seed_, s.result.minimal};
  RunOrigin origin{
      rec_.seed, failing.index,
      "minimal form of run " + std::to_string(failing.index) + " (" + s.invariant + ")"};
  s.minimal_file = (out_ / "minimal.yaml").string();
  Write(s.minimal_file,
        Header(s.result.minimal, t.first, t.second) + RenderScenario(minimal_space, rf, origin));
}

int Campaign::Run() {
  rec_.space_file = space_.file;
  rec_.space_sha256 = space_.sha256;
  rec_.space_name = space_.base.name;
  rec_.ccl = CclNameString(o_.ccl.value_or(space_.base.ccl));
  rec_.seed = o_.seed;
  rec_.confirm_k = o_.confirm_k;
  rec_.confirm_n = o_.confirm_n;
  rec_.jobs = o_.jobs;
  const InvariantSettings& inv = space_.invariants;
  if (inv.exact_results) rec_.invariants_on.push_back("exact_results");
  if (inv.no_silent_hang) rec_.invariants_on.push_back("no_silent_hang");
  if (inv.liveness_after_heal) rec_.invariants_on.push_back("liveness_after_heal");
  if (inv.lossless) rec_.invariants_on.push_back("lossless");
  if (inv.ccl_sequence) rec_.invariants_on.push_back("ccl_sequence");
  if (inv.nothing_left_behind) rec_.invariants_on.push_back("nothing_left_behind");
  std::error_code ec;
  fs::create_directories(out_ / "runs", ec);
  if (ec) {
    FL_ERROR("explore", "cannot create %s: %s", out_.c_str(), ec.message().c_str());
    return kBadInput;
  }
  if (Status st = PinWorker(); !st.ok()) {
    FL_ERROR("explore", "%s", st.ToString().c_str());
    return st.code() == Code::kNotFound ? kBadInput : kHarness;
  }
  std::printf("faultline explore: every run uses %s (sha256 %s), a copy of %s\n", worker_.c_str(),
              rec_.worker_sha256.c_str(), rec_.worker_source.c_str());
  std::fflush(stdout);
  if (o_.replay) return RunReplay(*o_.replay);
  if (o_.sweep) {
    SweepSpec sweep;
    if (auto err = ParseSweep(*o_.sweep, space_, &sweep)) {
      std::fprintf(stderr, "faultline explore: %s\n", err->c_str());
      return kBadInput;
    }
    return RunSweep(sweep);
  }
  if (o_.jobs > 1) return RunSearchConcurrently();
  int code = kOk;
  rec_.stop_reason = "runs";
  for (int64_t index = 0;; ++index) {
    if (o_.runs && index >= *o_.runs) break;
    if (OutOfBudget()) {
      rec_.stop_reason = "budget";
      break;
    }
    const RunFaults run = Generate(space_, o_.seed, index);
    const fs::path file = out_ / "runs" / ("run-" + std::to_string(index) + ".yaml");
    if (!Write(file, RenderScenario(space_, run, {o_.seed, index, ""}))) {
      code = kHarness;
      rec_.stop_reason = "harness error";
      break;
    }
    const RunRecord r = RunOne(file, index, run);
    if (interrupted_) {
      rec_.stop_reason = "interrupted";
      code = kHarness;
      break;
    }
    if (!r.error.empty()) {
      FL_ERROR("explore", "run %lld: %s", static_cast<long long>(index), r.error.c_str());
      code = kHarness;
      rec_.stop_reason = "harness error";
      break;
    }
    const std::string v = r.Violation();
    std::printf("faultline explore: run %lld %s: %s\n", static_cast<long long>(index),
                r.outcome.c_str(),
                v.empty() ? "every invariant holds" : ("VIOLATION " + v).c_str());
    if (!v.empty()) {
      if (ConfirmAndShrink(r)) {
        rec_.stop_reason = "violation";
        code = kViolation;
        break;
      }
      if (interrupted_) {
        rec_.stop_reason = "interrupted";
        code = kHarness;
        break;
      }
    }
  }
  return Finish(code);
}

bool Campaign::ConfirmAndShrink(const RunRecord& failing) {
  ShrinkViolation(failing);
  if (rec_.shrink->confirmed) return true;
  // Failed fewer than k of n times: noted as unconfirmed, not a violation.
  std::printf(
      "faultline explore: run %lld: %s failed %lld of %lld run(s), fewer than %d: "
      "unconfirmed, going on\n",
      static_cast<long long>(failing.index), failing.Violation().c_str(),
      static_cast<long long>(rec_.shrink->minimal_failed),
      static_cast<long long>(rec_.shrink->minimal_runs), o_.confirm_k);
  rec_.unconfirmed.push_back(std::move(*rec_.shrink));
  rec_.shrink.reset();
  return false;
}

RunRecord Campaign::RunOne(const fs::path& file, int64_t index, const RunFaults& run) {
  const double started_s = Since(t0_);
  const fs::path dir = out_ / "runs" / ("run-" + std::to_string(index));
  return Record(file, dir, index, run, RunFile(file, dir), started_s);
}

RunRecord& Campaign::Record(const fs::path& file, const fs::path& dir, int64_t index,
                            const RunFaults& run, const Judged& j, double started_s) {
  RunRecord r;
  r.index = index;
  r.file = file.string();
  r.dir = dir.string();
  r.outcome = j.outcome;
  r.exit_code = j.code;
  r.seconds = j.seconds;
  r.started_s = started_s;
  r.faults = run.faults;
  r.invariants = j.invariants;
  r.error = j.error;
  r.stall_ms = j.stall_ms;
  if (rec_.version.empty() && !j.versions.is_null()) rec_.version = j.versions.dump();
  rec_.runs.push_back(std::move(r));
  return rec_.runs.back();
}

int Campaign::RunSearchConcurrently() {
  int code = kOk;
  rec_.stop_reason = "runs";
  int64_t next_index = 0;
  for (;;) {
    std::vector<RunRecord> violating;
    bool harness = false;
    RunConcurrently(
        [&]() -> std::optional<Job> {
          if (o_.runs && next_index >= *o_.runs) return std::nullopt;
          if (OutOfBudget()) {
            rec_.stop_reason = "budget";
            return std::nullopt;
          }
          const int64_t index = next_index++;
          Job job;
          job.index = index;
          job.run = Generate(space_, o_.seed, index);
          job.file = out_ / "runs" / ("run-" + std::to_string(index) + ".yaml");
          job.dir = out_ / "runs" / ("run-" + std::to_string(index));
          if (!Write(job.file, RenderScenario(space_, job.run, {o_.seed, index, ""}))) {
            harness = true;
            return std::nullopt;
          }
          return job;
        },
        [&](const Job& job, const Judged& j, double started_s) {
          const RunRecord& r = Record(job.file, job.dir, job.index, job.run, j, started_s);
          if (interrupted_) return false;  // the run was stopped: not a harness error
          if (!r.error.empty()) {
            FL_ERROR("explore", "run %lld: %s", static_cast<long long>(r.index), r.error.c_str());
            harness = true;
            return false;
          }
          const std::string v = r.Violation();
          std::printf("faultline explore: run %lld %s: %s\n", static_cast<long long>(r.index),
                      r.outcome.c_str(),
                      v.empty() ? "every invariant holds" : ("VIOLATION " + v).c_str());
          std::fflush(stdout);
          if (v.empty()) return true;
          violating.push_back(r);
          return false;
        });
    auto by_index = [](const RunRecord& a, const RunRecord& b) { return a.index < b.index; };
    std::sort(rec_.runs.begin(), rec_.runs.end(), by_index);
    std::sort(violating.begin(), violating.end(), by_index);
    if (interrupted_) {
      rec_.stop_reason = "interrupted";
      code = kHarness;
      break;
    }
    if (harness) {
      rec_.stop_reason = "harness error";
      code = kHarness;
      break;
    }
    if (violating.empty()) break;  // --runs made, or the budget spent
    // Each violation of this round, lowest index first, until one is confirmed.
    for (const RunRecord& v : violating) {
      if (ConfirmAndShrink(v)) {
        rec_.stop_reason = "violation";
        code = kViolation;
        break;
      }
      if (interrupted_ || OutOfBudget()) break;
    }
    if (code == kViolation) break;
    if (interrupted_) {
      rec_.stop_reason = "interrupted";
      code = kHarness;
      break;
    }
    rec_.stop_reason = "runs";
  }
  return Finish(code);
}

std::optional<int> Campaign::EndedEarly(bool harness) {
  if (interrupted_) {
    rec_.stop_reason = "interrupted";
    return Finish(kHarness);
  }
  if (harness) {
    rec_.stop_reason = "harness error";
    return Finish(kHarness);
  }
  return std::nullopt;
}

void Campaign::RunJobs(const std::function<std::optional<Job>()>& next,
                       const std::function<bool(const Job&, const Judged&, double)>& done) {
  if (o_.jobs > 1) {
    RunConcurrently(next, done);
    std::sort(rec_.runs.begin(), rec_.runs.end(),
              [](const RunRecord& a, const RunRecord& b) { return a.index < b.index; });
    return;
  }
  for (;;) {
    std::optional<Job> job = next();
    if (!job) return;
    const double started_s = Since(t0_);
    const Judged j = RunFile(job->file, job->dir);
    if (!done(*job, j, started_s)) return;
  }
}

int Campaign::RunSweep(const SweepSpec& sweep) {
  rec_.sweep = sweep;
  rec_.stop_reason = "runs";
  const int64_t per_value = o_.runs.value_or(1);
  const std::vector<double> values = SweepValues(sweep);
  const auto total = static_cast<int64_t>(values.size()) * per_value;
  int code = kOk;
  bool harness = false;
  int64_t next_index = 0;
  RunJobs(
      [&]() -> std::optional<Job> {
        if (next_index >= total) return std::nullopt;
        if (OutOfBudget()) {
          rec_.stop_reason = "budget";
          return std::nullopt;
        }
        const int64_t index = next_index++;
        const double value = values[static_cast<size_t>(index / per_value)];
        const int64_t rep = index % per_value;
        const FaultSpace at = SpaceAt(space_, sweep, value);
        Job job;
        job.index = index;
        job.run = Generate(at, o_.seed, rep);
        job.sweep_value = value;
        job.file = out_ / "runs" / ("run-" + std::to_string(index) + ".yaml");
        job.dir = out_ / "runs" / ("run-" + std::to_string(index));
        char note[96];
        std::snprintf(note, sizeof note, "sweep of %s at %g, run %lld", sweep.Label().c_str(),
                      value, static_cast<long long>(rep));
        if (!Write(job.file, RenderScenario(at, job.run, {o_.seed, rep, note}))) {
          harness = true;
          return std::nullopt;
        }
        return job;
      },
      [&](const Job& job, const Judged& j, double started_s) {
        RunRecord& last = Record(job.file, job.dir, job.index, job.run, j, started_s);
        last.sweep_value = job.sweep_value;
        std::printf(
            "faultline explore: sweep %s = %g run %lld: %s, stall %s ms%s\n", sweep.Label().c_str(),
            *job.sweep_value, static_cast<long long>(job.index % per_value), last.outcome.c_str(),
            last.stall_ms ? std::to_string(static_cast<int64_t>(*last.stall_ms)).c_str() : "-",
            last.Violation().empty() ? "" : (", VIOLATION " + last.Violation()).c_str());
        std::fflush(stdout);
        if (interrupted_) return false;
        if (!last.error.empty()) {
          FL_ERROR("explore", "run %lld: %s", static_cast<long long>(job.index),
                   last.error.c_str());
          harness = true;
          return false;
        }
        if (!last.Violation().empty()) code = kViolation;
        return !interrupted_;
      });
  if (auto ended = EndedEarly(harness)) return *ended;
  return Finish(code);
}

int Campaign::RunReplay(const std::string& file) {
  rec_.stop_reason = "runs";
  int code = kOk;
  int failed = 0;
  bool harness = false;
  const int64_t n = o_.runs.value_or(5);
  int64_t next_index = 0;
  RunJobs(
      [&]() -> std::optional<Job> {
        if (next_index >= n) return std::nullopt;
        if (OutOfBudget()) {
          rec_.stop_reason = "budget";
          return std::nullopt;
        }
        Job job;
        job.index = next_index++;
        job.file = file;
        job.dir = out_ / "runs" / ("run-" + std::to_string(job.index));
        return job;
      },
      [&](const Job& job, const Judged& j, double started_s) {
        const RunRecord& r = Record(job.file, job.dir, job.index, job.run, j, started_s);
        if (interrupted_) return false;
        if (!r.error.empty()) {
          // Judged by nothing: never "every invariant holds".
          FL_ERROR("explore", "replay %lld of %s: %s", static_cast<long long>(job.index),
                   file.c_str(), r.error.c_str());
          harness = true;
          return false;
        }
        const std::string v = r.Violation();
        std::printf("faultline explore: replay %lld of %s: %s\n", static_cast<long long>(job.index),
                    file.c_str(), v.empty() ? "every invariant holds" : ("VIOLATION " + v).c_str());
        std::fflush(stdout);
        if (!v.empty()) {
          ++failed;
          code = kViolation;
        }
        return !interrupted_;
      });
  if (auto ended = EndedEarly(harness)) return *ended;
  std::printf("faultline explore: %s violated an invariant in %d of %zu run(s)\n", file.c_str(),
              failed, rec_.runs.size());
  return Finish(code);
}

int Campaign::Finish(int code) {
  if (interrupted_ && code == kOk) code = kHarness;
  rec_.exit_code = code;
  rec_.seconds = Since(t0_);
  bool ok = Write(out_ / "campaign.json", CampaignJson(rec_).dump(2) + "\n");
  ok = Write(out_ / "campaign.html", CampaignHtml(rec_)) && ok;
  ok = Write(out_ / "junit.xml", CampaignJunit(rec_)) && ok;
  if (!ok) return kHarness;
  std::printf("faultline explore: %zu run(s), %s; %s\n", rec_.runs.size(), rec_.stop_reason.c_str(),
              (out_ / "campaign.html").c_str());
  if (rec_.shrink) {
    std::printf("faultline explore: %s violated in run %lld, shrunk to %zu fault(s): %s\n",
                rec_.shrink->invariant.c_str(), static_cast<long long>(rec_.shrink->from_index),
                rec_.shrink->result.minimal.size(), rec_.shrink->minimal_file.c_str());
  }
  return code;
}

}  // namespace

std::optional<std::string> ParseConfirm(const std::string& text, int* k, int* n) {
  int a = 0, b = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d/%d%c", &a, &b, &extra) != 2 || a < 1 || b < a || b > 20) {
    return "--confirm must be K/N with 1 <= K <= N <= 20, got '" + text + "'";
  }
  *k = a;
  *n = b;
  return std::nullopt;
}

int RunCampaign(const CampaignOptions& options) {
  SpaceOutcome parsed = ParseFaultSpaceFile(options.space_path);
  if (!parsed.ok()) {
    for (const auto& d : parsed.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
    return kBadInput;
  }
  if (options.out_dir.empty()) {
    std::fprintf(stderr, "faultline explore: --out DIR is required\n");
    return kBadInput;
  }
  if (options.sweep) {
    SweepSpec sweep;
    if (auto err = ParseSweep(*options.sweep, *parsed.space, &sweep)) {
      std::fprintf(stderr, "faultline explore: %s\n", err->c_str());
      return kBadInput;
    }
  }
  if (options.replay) {
    // The file to replay is the user's: one that does not validate is bad input, said with its
    // line before anything runs, not a harness error in its first run.
    ParseOutcome file = ParseScenarioFile(*options.replay);
    if (!file.ok()) {
      for (const auto& d : file.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
      return kBadInput;
    }
  }
  if (options.ccl) parsed.space->base.ccl = *options.ccl;
  const CclName ccl = parsed.space->base.ccl;
  const auto* traits = workload::adapters::FindCclTraits(CclNameString(ccl));
  if (!traits || !traits->built_here) {
    std::fprintf(stderr, "faultline explore: ccl %s is not built here%s%s\n", CclNameString(ccl),
                 traits && !traits->how_to_build.empty() ? ": " : "",
                 traits ? std::string(traits->how_to_build).c_str() : "");
    return kBadInput;
  }
  if (!traits->serves_fault_hook) {
    for (const auto& k : parsed.space->kinds) {
      if (k.weight > 0 && k.type == "conn_corrupt") {
        std::fprintf(stderr,
                     "faultline explore: %s draws conn_corrupt, which goes through the ranks' "
                     "fault hook; ccl %s serves none\n",
                     options.space_path.c_str(), CclNameString(ccl));
        return kBadInput;
      }
    }
  }
  Campaign c(options, std::move(*parsed.space));
  return c.Run();
}

}  // namespace faultline::runner::explore
