// The run driver: one run's lifecycle (setup, launch, drive the timeline, wait, heal,
// finish). Where the run happens is its Site's (runner/exec/site.h); the ranks' command lines
// are rank_specs.h's, restarts restart_supervisor.h's, the faults fault_executor.h's, the
// history history_builder.h's and the report run_finish.h's.
#include "runner/exec/run.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "base/clock.h"
#include "base/log.h"
#include "injector/journal.h"
#include "injector/realtime_scope.h"
#include "reports/exit_code.h"
#include "runner/core/inventory.h"
#include "runner/core/report_json.h"
#include "runner/core/timeline.h"
#include "runner/core/worker_log.h"
#include "runner/exec/fault_executor.h"
#include "runner/exec/history_builder.h"
#include "runner/exec/rank_specs.h"
#include "runner/exec/requirements.h"
#include "runner/exec/restart_supervisor.h"
#include "runner/exec/run_finish.h"
#include "runner/exec/site.h"
#include "runner/exec/site_common.h"
#include "runner/exec/twin_run.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {
namespace {

using reports::ExitCode;
using reports::ToInt;

namespace fs = std::filesystem;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

// Restores the previous SIGINT/SIGTERM handlers when the run ends.
class StopOnSignals final {
 public:
  StopOnSignals() {
    g_stop = false;
    struct sigaction sa{};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_{};
  struct sigaction old_term_{};
};

class Run final {
 public:
  Run(Scenario sc, RunOptions o) : sc_(std::move(sc)), o_(std::move(o)) {}
  int Execute();

 private:
  Status Setup();
  Status LaunchRanks();
  void ChooseHookPaths();
  void RemoveHookPaths();
  void StartRailSampler();
  void DriveTimeline();
  void WaitRanks();
  int Finish();
  bool AllRanksExited();
  std::vector<LaunchSpec> RankSpecs(int incarnation, std::optional<int64_t> last_cost_ms);
  std::optional<int64_t> MeasureRelaunchMs();
  // Rank g's log of `incarnation`, its times on this clock.
  Result<WorkerLog> LoadRankLog(int g, int incarnation) const {
    auto log = LoadWorkerLog(RankLogPath(out_, g, incarnation));
    if (log.ok()) {
      MapWorkerLogToRunnerClock(&*log, site_->ClockOffsetNs(g / sc_.topology.ranks_per_host));
    }
    return log;
  }
  const std::vector<int>& handles() const { return supervisor_->handles(); }

  Scenario sc_;
  RunOptions o_;
  std::string run_id_;
  std::string out_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<Site> site_;
  std::unique_ptr<FaultExecutor> faults_;
  std::unique_ptr<RestartSupervisor> supervisor_;
  std::string worker_exe_;
  // Where each rank serves its fault hook (where the ccl's traits say it serves one; empty
  // otherwise), by global rank, and what the report says about it.
  std::vector<std::string> hook_paths_;
  nlohmann::json hook_record_;
  // How long before its time an action is prepared: arming a fault fsyncs the journal.
  static constexpr int64_t kArmLeadNs = 30'000'000;
  std::string timeline_scheduling_;
  int64_t t0_ = 0;
  int64_t execute_start_ns_ = 0;
  int64_t run_end_ns_ = 0;
  bool watchdog_fired_ = false;
  std::optional<int64_t> relaunch_ms_;  // MeasureRelaunchMs, for the ranks' cost model
  std::vector<std::string> harness_errors_;
  // Every rail port's counters from just before t0 until the ranks have exited, as the site
  // samples them (rail_sampler.h).
  std::optional<RailSeries> rail_series_;
  static constexpr int64_t kRailPeriodNs = 20'000'000;
  static constexpr int64_t kRailLeadNs = 200'000'000;  // first sample before t0
};

Status Run::Setup() {
  run_id_ = NewRunId();
  out_ = o_.out_dir.empty() ? "out/" + sc_.name + "-" + run_id_ : o_.out_dir;
  std::error_code ec;
  fs::create_directories(out_ + "/ranks", ec);
  if (ec) return Status(Code::kInvalidArgument, "cannot create " + out_ + ": " + ec.message());
  fs::copy_file(o_.scenario_path, out_ + "/scenario.yaml", fs::copy_options::overwrite_existing, ec);
  FL_ASSIGN_OR_RETURN(journal_, Journal::Open(Journal::DefaultDir()));
  FL_ASSIGN_OR_RETURN(site_, MakeSite(SiteContext{&sc_, &o_, run_id_, out_}));
  FL_RETURN_IF_ERROR(site_->Prepare(journal_.get()));
  faults_ = std::make_unique<FaultExecutor>(sc_, site_.get());
  return Status();
}

Status Run::LaunchRanks() {
  FL_RETURN_IF_ERROR(site_->OpenLauncher());
  supervisor_ = std::make_unique<RestartSupervisor>(
      sc_, &site_->launcher(),
      [this](int k, std::optional<int64_t> cost) { return RankSpecs(k, cost); },
      [this](int g, int k) { return LoadRankLog(g, k); }, &g_stop, &harness_errors_);
  // The library's rank program (its traits row: faultline-worker, or one of its own).
  const std::string program(workload::adapters::CclTraitsOf(sc_.ccl).rank_program);
  const std::string worker = RankProgramPath(sc_.ccl, o_.worker_path);
  worker_exe_ = worker;
  if (sc_.workload.kind != WorkloadKind::kTorchDdp && access(worker.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound,
                  "worker binary " + worker + " not found (build " + program + ")");
  }
  const int world = sc_.topology.world_size();
  ChooseHookPaths();
  if (sc_.workload.kind == WorkloadKind::kTrain) relaunch_ms_ = MeasureRelaunchMs();
  FL_RETURN_IF_ERROR(site_->StartFaultService(hook_paths_));
  // Every rank starts its workload at t0 (CLOCK_MONOTONIC is shared by all namespaces), which
  // leaves time to join the group; scenario offsets count from there. A Python rank first
  // loads PyTorch (about 1.5 s of CPU each, the ranks sharing this machine's cores).
  const bool torch = sc_.workload.kind == WorkloadKind::kTorchDdp;
  const int64_t cores = std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
  t0_ = MonoNow() + 2'000'000'000LL + 50'000'000LL * world +
        (torch ? 1'500'000'000LL * world / cores : 0);
  faults_->Schedule(t0_);
  std::error_code ec;
  // The rendezvous directory of the CCLs that need one (Gloo's file store, NCCL's unique id):
  // always fresh, so nothing of an earlier run in the same --out is picked up.
  fs::remove_all(out_ + "/store", ec);
  fs::create_directories(out_ + "/store", ec);
  if (sc_.workload.kind == WorkloadKind::kTrain) {
    // The job's checkpoints: fresh, so no earlier run's are resumed.
    fs::remove_all(out_ + "/checkpoints", ec);
    fs::create_directories(out_ + "/checkpoints", ec);
  }
  auto started = site_->launcher().StartWorld(RankSpecs(0, std::nullopt));
  if (!started.ok()) return started.status();
  supervisor_->Started(std::move(started).value(), 0);
  return Status();
}

// The runner's part of a restart, measured once per run before the ranks start: a world of
// placeholder processes where the ranks will run is started, killed and reaped, as the
// supervisor does with the job's ranks, plus the supervisor's polling period (it sees a
// stopped rank at most that late). nullopt when the placeholders could not be started.
std::optional<int64_t> Run::MeasureRelaunchMs() {
  std::vector<LaunchSpec> specs = RankSpecs(0, std::nullopt);
  for (size_t g = 0; g < specs.size(); ++g) {
    specs[g].argv = {"sleep", "60"};
    specs[g].body = nullptr;
    specs[g].name = "relaunch-probe" + std::to_string(g);
  }
  Launcher& l = site_->launcher();
  const int64_t start = MonoNow();
  auto handles = l.StartWorld(specs);
  if (!handles.ok()) {
    FL_INFO("run", "the relaunch was not measured: %s", handles.status().ToString().c_str());
    return std::nullopt;
  }
  for (int h : *handles) (void)l.Kill(h, SIGKILL);
  for (int h : *handles) (void)l.Wait(h, MonoNow() + 10'000'000'000LL);
  const int64_t ms = (MonoNow() - start + RestartSupervisor::kCheckPeriodNs) / 1'000'000;
  FL_INFO("run", "the runner's relaunch of %zu ranks: %lld ms (detect bound included)",
          specs.size(), static_cast<long long>(ms));
  return ms;
}

std::vector<LaunchSpec> Run::RankSpecs(int incarnation, std::optional<int64_t> last_cost_ms) {
  RankSpecInputs in;
  in.scenario = &sc_;
  const Topology& t = sc_.topology;
  in.placement.rails.assign(t.hosts, {});
  for (int h = 0; h < t.hosts; ++h) {
    for (int l = 0; l < t.ranks_per_host; ++l) in.placement.rails[h].push_back(site_->RankRails(h, l));
    in.placement.env.push_back(site_->RankEnv(h));
    in.placement.clock_offset_ns.push_back(site_->ClockOffsetNs(h));
  }
  in.placement.bootstrap_host = site_->BootstrapHost();
  in.out_dir = out_;
  in.worker = worker_exe_;
  in.op_timeout_ms = o_.op_timeout_ms;
  in.t0_ns = t0_;
  in.incarnation = incarnation;
  in.last_restart_cost_ms = last_cost_ms;
  in.relaunch_ms = relaunch_ms_;
  in.hook_paths = hook_paths_;
  if (incarnation > 0) {
    std::error_code ec;
    fs::create_directories(RankStoreDir(out_, incarnation), ec);
  }
  return BuildRankSpecs(in);
}

void Run::ChooseHookPaths() {
  // Every rank of a ccl whose traits say it serves the fault hook (ftccl) serves it
  // (conn_corrupt, qp_error; also `faultline inject` by hand during a run) at
  // out/ranks/rankN.hook. A Unix socket path holds at most 107 bytes; under a deep --out the
  // sockets go to /run/faultline/hooks instead, and the report says so.
  const int world = sc_.topology.world_size();
  hook_paths_.assign(world, "");
  if (!workload::adapters::CclTraitsOf(sc_.ccl).serves_fault_hook) {
    hook_record_ = {
        {"served", false},
        {"why", std::string("ccl ") + CclNameString(sc_.ccl) + " serves no fault hook"}};
    return;
  }
  constexpr size_t kSunPathMax = 107;
  const std::string ranks_dir = fs::absolute(out_ + "/ranks").lexically_normal().string();
  const std::string fallback_dir = "/run/faultline/hooks";
  std::string why;
  for (int g = 0; g < world; ++g) {
    std::string p = ranks_dir + "/rank" + std::to_string(g) + ".hook";
    if (p.size() > kSunPathMax) {
      why = "'" + p + "' is " + std::to_string(p.size()) + " bytes, more than a Unix socket path " +
            "holds (" + std::to_string(kSunPathMax) + ")";
      p = fallback_dir + "/" + run_id_ + "-rank" + std::to_string(g) + ".hook";
    }
    hook_paths_[g] = p;
  }
  if (!why.empty()) {
    std::error_code ec;
    fs::create_directories(fallback_dir, ec);
    fs::permissions(fallback_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    FL_INFO("run", "fault hooks under %s: %s", fallback_dir.c_str(), why.c_str());
  }
  hook_record_ = {{"served", true}, {"paths", hook_paths_}};
  if (!why.empty()) hook_record_["fallback"] = why;
}

void Run::RemoveHookPaths() {
  // A rank removes its socket when it ends; one that was killed leaves it behind.
  for (const auto& p : hook_paths_) {
    std::error_code ec;
    if (!p.empty() && fs::is_socket(fs::symlink_status(p, ec))) fs::remove(p, ec);
  }
}

bool Run::AllRanksExited() {
  Launcher& l = site_->launcher();
  for (int h : handles()) {
    if (l.status(h).running()) {
      auto st = l.Wait(h, MonoNow());
      if (!st.ok() || st->running()) return false;
    }
  }
  return true;
}

void Run::StartRailSampler() {
  const Workload& w = sc_.workload;
  const size_t reserve = static_cast<size_t>(
      (kRailLeadNs + w.duration_ns.value_or(30'000'000'000LL) + 10'000'000'000LL) / kRailPeriodNs);
  site_->StartRails(t0_ - kRailLeadNs, kRailPeriodNs, reserve);
}

void Run::DriveTimeline() {
  Timeline tl = BuildTimeline(sc_, sc_.seed);
  // The ranks keep every core busy; a fault must still start within a few ms of its time.
  RealtimeScope priority;
  timeline_scheduling_ = priority.description();
  for (const auto& a : tl.actions) {
    const int64_t when = FaultExecutor::ActionTime(t0_, a.at_ns);
    // Coarse wait that notices a stop request or the end of every rank. It ends early enough
    // for the fault to be armed (its undo journalled and fsynced) before its time; the
    // injection then sleeps precisely to that time.
    while (!g_stop && MonoNow() < when - kArmLeadNs) {
      supervisor_->Check();
      if (AllRanksExited()) return;
      SleepUntil(std::min(when - kArmLeadNs, MonoNow() + 20'000'000), &g_stop);
    }
    if (g_stop) return;
    faults_->Do(a, when, RankRefs{&hook_paths_, &handles()});
  }
}

void Run::WaitRanks() {
  const Workload& w = sc_.workload;
  // The watchdog: the workload's own length plus every deadline a worker may still be waiting
  // out, then some slack for joining and leaving the group.
  int64_t budget = w.duration_ns ? *w.duration_ns : 0;
  budget += 2 * o_.op_timeout_ms * 1'000'000 + 15'000'000'000LL;
  if (w.iters) budget += *w.iters * o_.op_timeout_ms * 1'000'000 / 10;
  if (w.kind == WorkloadKind::kTrain && w.iters) budget += *w.iters * w.compute_ns;
  // A restarted job gets the whole budget again from its relaunch.
  auto deadline = [&] { return std::max(t0_, supervisor_->incarnation_start_ns()) + budget; };
  for (;;) {
    supervisor_->Check();
    if (g_stop || MonoNow() >= deadline() || AllRanksExited()) break;
    SleepUntil(std::min(deadline(), MonoNow() + RestartSupervisor::kCheckPeriodNs), &g_stop);
  }
  WaitAllReport r = site_->launcher().WaitAll(g_stop ? MonoNow() : deadline());
  watchdog_fired_ = r.hung() && !g_stop;
  run_end_ns_ = MonoNow();
}

int Run::Finish() {
  HistoryInputs hi;
  hi.scenario = &sc_;
  hi.ranks = static_cast<int>(handles().size());
  hi.incarnation = supervisor_->incarnation();
  hi.t0_ns = t0_;
  hi.run_end_ns = run_end_ns_;
  hi.watchdog_fired = watchdog_fired_;
  hi.exit_status = [this](int g) {
    return site_->has_launcher() ? site_->launcher().status(handles()[g]) : ExitStatus{};
  };
  hi.load_log = [this](int g, int k) { return LoadRankLog(g, k); };
  hi.killed_by_fault = faults_->killed_by_fault();
  hi.faults = faults_->records();
  hi.restarts = supervisor_->restarts();
  hi.restarts_given_up = supervisor_->given_up();
  FinishInputs fi;
  fi.scenario = &sc_;
  fi.options = &o_;
  fi.out_dir = out_;
  fi.run_id = run_id_;
  fi.t0_ns = t0_;
  fi.execute_start_ns = execute_start_ns_;
  fi.built = BuildHistory(hi);
  fi.site = site_.get();
  fi.rail_series = std::move(rail_series_);
  fi.hook_record = hook_record_;
  fi.timeline_scheduling = timeline_scheduling_;
  fi.harness_errors = &harness_errors_;
  return FinishRun(fi);
}

int Run::Execute() {
  execute_start_ns_ = MonoNow();
  StopOnSignals signals;
  Status st = Setup();
  if (st.ok()) st = LaunchRanks();
  if (!st.ok()) {
    FL_ERROR("run", "%s", st.ToString().c_str());
    if (site_) site_->CloseLauncher();
    RemoveHookPaths();
    if (site_) (void)site_->Teardown();
    return ToInt(st.code() == Code::kInvalidArgument ? ExitCode::kBadInput
                                                     : ExitCode::kHarnessError);
  }
  StartRailSampler();
  DriveTimeline();
  WaitRanks();
  rail_series_ = site_->StopRails();
  faults_->HealAll(&harness_errors_);
  // The runner stopped the ranks itself: say so in the report, or a reader would take the
  // outcome (the stopped ranks look crashed) for the CCL's.
  if (g_stop) harness_errors_.push_back("interrupted by a signal: the ranks were stopped early");
  int code = Finish();
  // Ranks first (a live process keeps its namespace alive), then the network.
  site_->CloseLauncher();
  // The training job's checkpoints are its state, not results: the report has what they cost.
  if (sc_.workload.kind == WorkloadKind::kTrain) {
    std::error_code ec;
    fs::remove_all(out_ + "/checkpoints", ec);
  }
  RemoveHookPaths();
  Status td = site_->Teardown();
  if (!td.ok()) {
    FL_ERROR("run", "tearing down the topology: %s", td.ToString().c_str());
    code = ToInt(ExitCode::kHarnessError);
  }
  if (g_stop) {
    FL_WARN("run", "interrupted; every fault healed and the topology removed");
    return ToInt(ExitCode::kHarnessError);
  }
  return code;
}

}  // namespace

std::string RankProgramPath(CclName ccl, const std::string& worker_path) {
  if (!worker_path.empty()) return worker_path;
  return ExeDir() + "/" + std::string(workload::adapters::CclTraitsOf(ccl).rank_program);
}

bool RunInterrupted() { return g_stop; }

std::optional<std::string> LocalRunRefusal(const Scenario& sc) {
  // The local launcher builds namespaces on one machine; real hosts are reached through Slurm,
  // which starts the ranks and a fault agent on each of them.
  if (!sc.topology.is_inventory() || IsLocalInventory(sc.topology)) return std::nullopt;
  return "an inventory topology names real hosts, which the local launcher (namespaces on this "
         "machine) cannot reach: run it with --launcher slurm (inside an allocation of its "
         "hosts, or with --partition P); only an inventory whose every host is this machine "
         "(addr: 127.0.0.1) runs locally; 'faultline validate' checks the file and its host "
         "file";
}

int RunParsedScenario(Scenario sc, const RunOptions& options) {
  if (options.seed) sc.seed = *options.seed;
  if (options.ccl && *options.ccl != sc.ccl) {
    // The file was validated for its own ccl; expectations the override cannot measure are
    // bad input, said at their place in the file.
    const auto bad = ExpectationsUnmeasurable(sc, *options.ccl, options.scenario_path);
    for (const auto& d : bad) std::fprintf(stderr, "%s (--ccl %s)\n", d.ToString().c_str(), CclNameString(*options.ccl));
    if (!bad.empty()) return ToInt(ExitCode::kBadInput);
    sc.ccl = *options.ccl;
  }
  if (auto why = options.launcher == "slurm" ? std::nullopt : LocalRunRefusal(sc)) {
    std::fprintf(stderr, "%s: %s\n", options.scenario_path.c_str(), why->c_str());
    return ToInt(ExitCode::kBadInput);
  }
  // What the CCL traits table says this build and machine cannot run (a library not built
  // here, a GPU per rank where fewer are visible) is bad input, refused before anything starts.
  if (auto why = CclRunRefusal(workload::adapters::CclTraitsOf(sc.ccl),
                               sc.topology.world_size(), options.launcher != "slurm")) {
    std::fprintf(stderr, "%s: %s\n", options.scenario_path.c_str(), why->c_str());
    return ToInt(ExitCode::kBadInput);
  }
  if (geteuid() != 0) {
    FL_ERROR("run", "needs root (network namespaces, netlink, nftables)");
    return ToInt(ExitCode::kHarnessError);
  }
  RunOptions o = options;
  if (sc.workload.op_timeout_ns && !o.op_timeout_given) {
    o.op_timeout_ms = *sc.workload.op_timeout_ns / 1'000'000;
  }
  if (sc.workload.kind == WorkloadKind::kTrain && !sc.faults.empty() && o.twin_report.empty()) {
    FindOrRunTwin(sc, &o);
    if (g_stop) return ToInt(ExitCode::kHarnessError);
  }
  Run run(std::move(sc), o);
  return run.Execute();
}

}  // namespace faultline::runner
