#include "runner/exec/run_finish.h"

#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "reports/finish_run.h"
#include "reports/run_files.h"
#include "reports/text.h"
#include "reports/verdict.h"
#include "reports/write_reports.h"
#include "runner/core/checks.h"
#include "runner/core/metrics.h"
#include "runner/core/report_json.h"
#include "runner/exec/run_artefacts.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Opt(const std::optional<double>& v, const char* unit) {
  return v ? Fmt("%.1f", *v) + unit : "-";
}

// `ccl_version`: what the ranks' libraries said (WorkerHeader::ccl_version); null when no
// rank said one.
nlohmann::json Environment(const Scenario& sc, const RunOptions& o, const std::string& run_id,
                           const std::optional<std::string>& ccl_version) {
  utsname u{};
  uname(&u);
  // An inventory's rails are not shaped: their capacity is in environment.topology.
  nlohmann::json knobs = {
      {"op_timeout_ms", o.op_timeout_ms},
      {"rail_gbps",
       sc.topology.is_inventory() ? nlohmann::json() : nlohmann::json(sc.topology.rail_gbps)}};
  if (sc.topology.per_rank_nics()) knobs["nics"] = NicLayoutString(sc.topology.nics);
  return {{"kernel", std::string(u.sysname) + " " + u.release},
          {"machine", u.machine},
          {"versions",
           {{"faultline", FAULTLINE_VERSION},
            {CclNameString(sc.ccl), ccl_version ? nlohmann::json(*ccl_version) : nullptr}}},
          {"run_id", run_id},
          {"knobs", knobs}};
}

}  // namespace

int FinishRun(FinishInputs& in_) {
  Scenario& sc_ = *in_.scenario;
  const RunOptions& o_ = *in_.options;
  const std::string& out_ = in_.out_dir;
  const std::string& run_id_ = in_.run_id;
  const int64_t t0_ = in_.t0_ns;
  const History& h = in_.built.history;
  nlohmann::json& rails_note = in_.site->rails_note();
  if (sc_.topology.is_inventory()) {
    // A real rail's capacity is what its host's kernel reported, never a default: the slowest
    // rail's, for the capacity a bandwidth fault leaves; 0 (unknown) unless every rail's is known.
    std::optional<double> slowest;
    bool all = static_cast<int>(in_.site->rail_capacity().size()) == sc_.topology.hosts;
    for (const std::vector<RailCapacity>& host : in_.site->rail_capacity()) {
      all = all && static_cast<int>(host.size()) == sc_.topology.rails;
      for (const RailCapacity& c : host) {
        all = all && c.bps.has_value();
        if (c.bps) slowest = std::min(slowest.value_or(*c.bps), *c.bps);
      }
    }
    sc_.topology.rail_gbps = all && slowest ? *slowest / 1e9 : 0;
  }
  RunMetrics m = ComputeMetrics(h, MetricsOptionsFor(sc_, h.rails_used));
  // A replay on the library the incident's `reproduce:` names is judged by it: did it
  // reproduce the incident; every other run by `expect:`.
  const bool judged_by_reproduce = sc_.JudgedByReproduce(sc_.ccl);
  std::vector<CheckResult> checks =
      judged_by_reproduce ? CheckReproduce(*sc_.reproduce, m, h) : CheckExpectations(sc_.expect, m);

  // Files.
  ReportFiles files;
  files.timeseries = "timeseries.csv";
  files.events = "events.jsonl";
  {
    std::ofstream ts(out_ + "/timeseries.csv");
    WriteTimeseriesCsv(h, t0_, ts);
  }
  {
    std::ofstream ev(out_ + "/events.jsonl");
    WriteEventsJsonl(h, t0_, ev);
  }
  std::string scenario_text;
  {
    std::ifstream in(o_.scenario_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    scenario_text = ss.str();
  }
  // Per-rail throughput from the sampled counters.
  std::vector<FaultRails> fault_rails;
  if (in_.rail_series) {
    const RailSeries& rs = *in_.rail_series;
    rails_note["samples"] = rs.samples();
    if (rs.samples() >= 2) {
      std::ofstream(out_ + "/rails.csv") << reports::RailsCsv(RailsTableOf(rs, t0_));
      files.rails = "rails.csv";
      RailWindowOptions ro;
      // The baseline window starts where the metrics' does: the first measured collective.
      ro.baseline_from_ns = m.measured_from_ns.value_or(t0_ + sc_.workload.warmup_ns);
      ro.window_end_ns = WindowEndNs(h);
      fault_rails = RailWindows(rs, h.faults, ro);
    } else {
      rails_note["why_no_file"] = "fewer than two samples were taken";
    }
  }
  rails_note["sampled"] = files.rails.has_value();
  ReportInputs in;
  in.fault_rails = &fault_rails;
  in.rails_note = rails_note;
  in.scenario = &sc_;
  in.scenario_file = o_.scenario_path;
  in.scenario_sha256 = Sha256Hex(scenario_text);
  in.seed = sc_.seed;
  in.environment = Environment(sc_, o_, run_id_, in_.built.ccl_version);
  // The library's own settings in force (NCCL's interface choice and resiliency knobs), as
  // rank 0 read them; null for unset.
  if (!in_.built.ccl_knobs.empty()) {
    nlohmann::json ck = nlohmann::json::object();
    for (const auto& [k, v] : in_.built.ccl_knobs)
      ck[k] = v.empty() ? nlohmann::json() : nlohmann::json(v);
    in.environment["knobs"]["ccl"] = std::move(ck);
  }
  in_.site->AddEnvironment(&in.environment);
  // From `faultline run` (its start) to the last rank ready (joined, prepared): null unless
  // every rank said when it was ready.
  in.environment["launch"] = {
      {"ranks", sc_.topology.world_size()},
      {"all_ready_ms",
       in_.built.ranks_ready == sc_.topology.world_size() && in_.built.ranks_ready_ns
           ? nlohmann::json((*in_.built.ranks_ready_ns - in_.execute_start_ns) / 1e6)
           : nlohmann::json(nullptr)}};
  in.environment["fault_hook"] = in_.hook_record;
  in.environment["timeline_scheduling"] = in_.timeline_scheduling;
  in.history = &h;
  in.metrics = &m;
  in.checks = &checks;
  in.files = files;
  std::optional<TrainingMetrics> training;
  const bool train = sc_.workload.kind == WorkloadKind::kTrain;
  nlohmann::json twin;
  std::optional<std::string> twin_sha;
  if (sc_.workload.kind == WorkloadKind::kTorchDdp || train) {
    training = ComputeTraining(h, sc_.workload.warmup_iters, train);
    in.training = &*training;
  }
  if (train) {
    // goodput_ratio: this job's useful samples per second over its fault-free twin's.
    if (sc_.faults.empty()) {
      twin = {{"self", true}};
      if (training->samples_per_s) training->goodput_ratio = 1.0;
    } else if (!o_.twin_report.empty()) {
      twin = {{"report", o_.twin_report}, {"reused", o_.twin_reused}};
      try {
        std::ifstream tin(o_.twin_report);
        const nlohmann::json tj = nlohmann::json::parse(tin);
        const double rate = tj["train"]["samples_per_s"].get<double>();
        twin["samples_per_s"] = rate;
        twin["job_time_s"] = tj["train"]["job_time_s"];
        const nlohmann::json& th = tj["metrics"]["param_sha256"];
        if (th.is_string()) twin_sha = th.get<std::string>();
        twin["param_sha256"] = th;
        if (rate > 0 && training->samples_per_s)
          training->goodput_ratio = *training->samples_per_s / rate;
      } catch (const nlohmann::json::exception& e) {
        twin["error"] = std::string("unreadable twin report: ") + e.what();
      }
    } else {
      twin = {{"error", o_.twin_error.empty() ? "no fault-free twin was run" : o_.twin_error}};
    }
  }
  if (train && !judged_by_reproduce && sc_.expect.param_sha256_twin) {
    checks.push_back(CheckParamHashAgainstTwin(training->param_sha256, twin_sha));
  }
  nlohmann::json report = BuildReportJson(in);
  if (sc_.reproduce) {
    const Reproduce& r = *sc_.reproduce;
    // A replay whose harness failed, or whose faults were not all applied, reproduced nothing.
    bool reproduced = judged_by_reproduce && (*in_.harness_errors).empty();
    for (const auto& c : checks) reproduced = reproduced && c.pass;
    for (const auto& f : h.faults) reproduced = reproduced && f.applied_ns && f.error.empty();
    report["reproduce"] = {
        {"ccl", CclNameString(r.ccl)},
        {"outcome", r.outcome},
        {"ranks", r.ranks},
        {"within_ms", static_cast<double>(r.within_ns) / 1e6},
        {"judged", judged_by_reproduce},
        // null on a run of another library: it says nothing about this
        {"reproduced", judged_by_reproduce ? nlohmann::json(reproduced) : nlohmann::json(nullptr)}};
  }
  report["judged_by"] = judged_by_reproduce ? "reproduce" : "expect";
  if (train) {
    report["restarts"] = h.restarts.size();
    report["train"] = TrainJson(h, *training, twin);
  }
  if (!(*in_.harness_errors).empty()) report["harness_errors"] = (*in_.harness_errors);
  // report.json, then junit.xml, report.html and summary.md from it; a writer failure is the
  // harness's and is recorded in report.json on disk. The verdict and the exit code are those
  // of report.json as read back (reports/finish_run.h), so the file and the exit code agree.
  const reports::FinishedRun finished = reports::FinishRun(out_, report);
  (*in_.harness_errors)
      .insert((*in_.harness_errors).end(), finished.errors.begin(), finished.errors.end());

  // Summary.
  std::printf("\nfaultline run: %s  (ccl %s, seed %llu, run %s)\n", sc_.name.c_str(),
              CclNameString(sc_.ccl), static_cast<unsigned long long>(sc_.seed), run_id_.c_str());
  std::printf("  collectives completed: %lld, wrong results: %s, baseline busbw: %s\n",
              static_cast<long long>(m.completed_ops),
              m.wrong_results ? std::to_string(*m.wrong_results).c_str() : "not checked",
              Opt(m.overall.baseline_busbw_gbps, " Gbps").c_str());
  std::printf("  %-8s %-12s %-14s %10s %10s %10s %10s %10s %10s %9s\n", "fault", "kind", "target",
              "applied_s", "stall", "detect", "first", "full", "recovery", "degraded");
  for (size_t i = 0; i < h.faults.size(); ++i) {
    const FaultRecord& f = h.faults[i];
    const MetricValues& v = i < m.per_fault.size() ? m.per_fault[i].values : MetricValues{};
    std::string target = "h" + std::to_string(f.target.host);
    if (f.target.rail) target += "/r" + std::to_string(*f.target.rail);
    if (f.target.rank) target += (f.target.port ? "/n" : "/k") + std::to_string(*f.target.rank);
    if (f.target.side == LinkSide::kSwitch) target += "/sw";
    const bool never = i < m.per_fault.size() && m.per_fault[i].never_converged;
    std::printf("  %-8s %-12s %-14s %10s %10s %10s %10s %10s %10s %9s\n", f.id.c_str(),
                f.kind.c_str(), target.c_str(),
                f.applied_ns ? Fmt("%.3f", (*f.applied_ns - t0_) / 1e9).c_str() : "FAILED",
                Opt(v.stall_ms, "ms").c_str(), Opt(v.detection_ms, "ms").c_str(),
                Opt(v.failover_first_ms, "ms").c_str(),
                never ? "never" : Opt(v.failover_latency_ms, "ms").c_str(),
                Opt(v.recovery_ms, "ms").c_str(),
                v.degraded_ratio ? Fmt("%.3f", *v.degraded_ratio).c_str() : "-");
    if (!f.error.empty()) std::printf("           error: %s\n", f.error.c_str());
    if (i < report["faults"].size()) {
      const std::string played = reports::FormatCycles(report["faults"][i]);
      if (!played.empty()) std::printf("           %s\n", played.c_str());
    }
  }
  std::printf("  outcome: %s (%s)\n", OutcomeName(m.outcome), m.outcome_reason.c_str());
  for (const auto& c : checks) {
    std::printf("  %s %-20s limit %-28s value %s\n", c.pass ? "PASS" : "FAIL", c.name.c_str(),
                c.limit.dump().c_str(), c.value.dump().c_str());
  }
  const reports::Verdict verdict = finished.verdict;
  for (const auto& e : (*in_.harness_errors)) FL_ERROR("run", "%s", e.c_str());
  if (!reports::FaultErrors(report).empty()) {
    FL_ERROR("run", "a fault could not be injected (see above)");
  }
  if (judged_by_reproduce) {
    std::printf("  incident replay on %s: %s\n", CclNameString(sc_.ccl),
                report["reproduce"].value("reproduced", false) ? "REPRODUCED" : "NOT REPRODUCED");
  }
  const int code = reports::ToInt(finished.code);
  std::printf("  verdict: %s (exit %d); report: %s/report.json\n", reports::VerdictName(verdict),
              code, out_.c_str());
  std::fflush(stdout);
  return code;
}

}  // namespace faultline::runner
