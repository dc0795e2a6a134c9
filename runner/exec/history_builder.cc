#include "runner/exec/history_builder.h"

#include <algorithm>
#include <utility>

#include "runner/worker/worker.h"

namespace faultline::runner {

BuiltHistory BuildHistory(const HistoryInputs& in) {
  const Scenario& sc = *in.scenario;
  BuiltHistory out;
  History& h = out.history;
  h.world_size = sc.topology.world_size();
  h.op = sc.workload.op;
  h.run_start_ns = in.t0_ns;
  h.run_end_ns = in.run_end_ns;
  h.watchdog_fired = in.watchdog_fired;
  std::set<std::string> ccl_versions;
  for (int g = 0; g < in.ranks; ++g) {
    RankEnd end;
    end.rank = g;
    end.end_ns = in.run_end_ns;
    ExitStatus es = in.exit_status ? in.exit_status(g) : ExitStatus{};
    // Every incarnation's log (a restarted training job); the rank's end is its last one's.
    Result<WorkerLog> log = Status(Code::kNotFound, "no log");
    for (int k = 0; k <= in.incarnation; ++k) {
      log = in.load_log(g, k);
      if (!log.ok()) continue;
      for (OpRecord op : log->ops) {
        op.incarnation = k;
        op.index += k * kIncarnationIndexStride;
        h.ops.push_back(op);
      }
      h.events.insert(h.events.end(), log->events.begin(), log->events.end());
      h.events_supported = h.events_supported || log->header.events;
      h.syncs.insert(h.syncs.end(), log->syncs.begin(), log->syncs.end());
      h.shrinks.insert(h.shrinks.end(), log->shrinks.begin(), log->shrinks.end());
      h.grows.insert(h.grows.end(), log->grows.begin(), log->grows.end());
      if (log->result && k == in.incarnation) h.results.push_back(*log->result);
      for (CheckpointRecord c : log->checkpoints) {
        c.incarnation = k;
        h.checkpoints.push_back(c);
      }
      for (ResumeRecord r : log->resumes) {
        r.incarnation = k;
        h.resumes.push_back(r);
      }
      h.holds.insert(h.holds.end(), log->holds.begin(), log->holds.end());
      h.decisions.insert(h.decisions.end(), log->decisions.begin(), log->decisions.end());
      // The launch figure is the first incarnation's.
      if (log->ready_ns && k == 0) {
        out.ranks_ready_ns = std::max(out.ranks_ready_ns.value_or(0), *log->ready_ns);
        ++out.ranks_ready;
      }
      if (g == 0) h.rails_used = log->header.rails_used;
      if (!log->header.ccl_version.empty()) ccl_versions.insert(log->header.ccl_version);
      if (g == 0 && k == 0) out.ccl_knobs = log->header.ccl_knobs;
    }
    if (in.killed_by_fault.count(g) && es.state == ExitStatus::State::kSignaled) {
      end.exit = RankExit::kKilled;
    } else if (log.ok() && log->end) {
      end = *log->end;
      end.rank = g;
      end.error = log->first_error;
      // A failure outside a measured collective (the ranks' stop agreement, a barrier) is
      // only in the end line: its message is then the rank's first error.
      if (end.error.empty() && end.exit == RankExit::kError) end.error = log->end_message;
      if (es.state != ExitStatus::State::kExited ||
          (es.code != kWorkerExitOk && es.code != kWorkerExitCclError &&
           es.code != kWorkerExitRestart)) {
        end.exit = RankExit::kCrashed;
      }
    } else {
      end.exit = RankExit::kCrashed;
    }
    h.ranks.push_back(end);
  }
  h.faults = in.faults;
  // Each restart's cost: until the first step of the incarnation it started.
  for (RestartRecord r : in.restarts) {
    for (const OpRecord& op : h.ops) {
      if (op.incarnation != r.incarnation) continue;
      const int64_t c = op.start_ns - r.detected_ns;
      if (!r.cost_ns || c < *r.cost_ns) {
        r.cost_ns = c;
        r.resumed_step = op.index - op.incarnation * kIncarnationIndexStride;
      }
    }
    h.restarts.push_back(std::move(r));
  }
  h.restarts_given_up = in.restarts_given_up;
  for (const std::string& v : ccl_versions) {
    out.ccl_version = out.ccl_version ? *out.ccl_version + ", " + v : v;
  }
  return out;
}

nlohmann::json TrainJson(const History& h, const TrainingMetrics& t, const nlohmann::json& twin) {
  using nlohmann::json;
  auto since = [&](int64_t ns) { return (ns - h.run_start_ns) / 1e9; };
  json restarts = json::array();
  for (const RestartRecord& r : h.restarts) {
    restarts.push_back({{"incarnation", r.incarnation},
                        {"t_s", since(r.detected_ns)},
                        {"why", r.why},
                        {"cost_ms", r.cost_ns ? json(*r.cost_ns / 1e6) : json()},
                        {"resumed_step", r.resumed_step ? json(*r.resumed_step) : json()}});
  }
  std::vector<double> write_ms;
  int64_t newest = 0;
  for (const CheckpointRecord& c : h.checkpoints) {
    write_ms.push_back((c.end_ns - c.start_ns) / 1e6);
    newest = std::max(newest, c.step);
  }
  std::sort(write_ms.begin(), write_ms.end());
  json holds = json::array();
  for (const HoldRecord& r : h.holds) {
    if (r.rank != 0) continue;  // every rank holds together; rank 0's is the group's
    holds.push_back({{"t_s", since(r.start_ns)},
                     {"duration_ms", (r.end_ns - r.start_ns) / 1e6},
                     {"returned", r.returned}});
  }
  json decisions = json::array();
  std::vector<double> latency_ms;
  std::vector<double> reaction_ms;
  int reactions_unknown = 0;
  for (const DecisionRecord& d : h.decisions) {
    // From the first fault evidence to the action in effect (the worker's decision line).
    json reaction = d.decision.value("reaction", json::object()).value("ms", json());
    decisions.push_back(
        {{"t_s", since(d.t_ns)},
         {"rank", d.rank},
         {"chosen", d.chosen},
         {"trigger", d.decision.value("trigger", "")},
         {"latency_ms", d.latency_ns / 1e6},
         {"reaction_ms", reaction.is_number() ? reaction : json()},
         {"fault_class", d.decision.value("inputs", json::object()).value("fault_class", "")}});
    latency_ms.push_back(d.latency_ns / 1e6);
    if (reaction.is_number()) {
      reaction_ms.push_back(reaction.get<double>());
    } else {
      ++reactions_unknown;
    }
  }
  std::sort(reaction_ms.begin(), reaction_ms.end());
  std::sort(latency_ms.begin(), latency_ms.end());
  auto pct = [](const std::vector<double>& v, double p) -> json {
    if (v.empty()) return nullptr;
    const size_t i =
        std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
    return v[i];
  };
  return {{"useful_samples", t.useful_samples ? json(*t.useful_samples) : json()},
          {"finished", t.finished},
          {"resubmission_charge_s", t.resubmission_s ? json(*t.resubmission_s) : json()},
          {"job_time_s", t.job_time_s ? json(*t.job_time_s) : json()},
          {"samples_per_s", t.samples_per_s ? json(*t.samples_per_s) : json()},
          {"goodput_ratio", t.goodput_ratio ? json(*t.goodput_ratio) : json()},
          {"twin", twin},
          {"restarts", std::move(restarts)},
          {"restarts_given_up", h.restarts_given_up.empty() ? json() : json(h.restarts_given_up)},
          {"checkpoints",
           {{"written", h.checkpoints.size()},
            {"newest_step", newest},
            {"write_ms_p50", pct(write_ms, 0.5)},
            {"write_ms_max", write_ms.empty() ? json() : json(write_ms.back())}}},
          {"holds", std::move(holds)},
          {"decisions", std::move(decisions)},
          {"decision_latency_ms_p99", pct(latency_ms, 0.99)},
          {"decision_reaction_ms_p50", pct(reaction_ms, 0.5)},
          {"decision_reaction_ms_p99", pct(reaction_ms, 0.99)},
          {"decision_reactions_unknown", reactions_unknown}};
}

}  // namespace faultline::runner
