#include "runner/core/report_json.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>

#include "reports/schema.h"

namespace faultline::runner {
namespace {

nlohmann::json SecondsSince(int64_t origin, const std::optional<int64_t>& t) {
  if (!t) return nullptr;
  return static_cast<double>(*t - origin) / 1e9;
}

nlohmann::json OptString(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

// The timed stop agreements of a duration-bound loop (1-element allreduces through the library
// between collectives; their time is inside the collectives' cycles): how many, median and
// longest over every rank's, and how many failed. Null when the loop had none (iters-bound).
nlohmann::json StopAgreements(const History& h) {
  if (h.syncs.empty()) return nullptr;
  std::vector<double> ms;
  int failed = 0;
  for (const SyncRecord& s : h.syncs) {
    ms.push_back(static_cast<double>(s.end_ns - s.start_ns) / 1e6);
    failed += s.ok ? 0 : 1;
  }
  std::sort(ms.begin(), ms.end());
  return {{"count", ms.size()},
          {"median_ms", ms[ms.size() / 2]},
          {"max_ms", ms.back()},
          {"failed", failed}};
}

}  // namespace

// Policy shrink: one entry per shrink of the group (the survivors' records of the same
// exclusion), timed from the first survivor starting it to the last one done.
static nlohmann::json Shrinks(const History& h) {
  std::map<std::vector<int>, std::vector<const ShrinkRecord*>> by_set;
  for (const ShrinkRecord& s : h.shrinks) by_set[s.excluded].push_back(&s);
  std::vector<nlohmann::json> out;
  for (const auto& [excluded, recs] : by_set) {
    int64_t from = recs.front()->start_ns, to = recs.front()->end_ns, slowest = 0;
    bool ok = true;
    nlohmann::json ranks = nlohmann::json::array();
    for (const ShrinkRecord* r : recs) {
      from = std::min(from, r->start_ns);
      to = std::max(to, r->end_ns);
      slowest = std::max(slowest, r->end_ns - r->start_ns);
      ok = ok && r->ok;
      ranks.push_back(r->rank);
    }
    out.push_back({{"excluded", excluded},
                   {"group", recs.front()->group},
                   {"ranks", std::move(ranks)},
                   {"start_s", static_cast<double>(from - h.run_start_ns) / 1e9},
                   {"duration_ms", static_cast<double>(to - from) / 1e6},
                   {"slowest_rank_ms", static_cast<double>(slowest) / 1e6},
                   {"ok", ok}});
  }
  std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["start_s"].get<double>() < b["start_s"].get<double>();
  });
  return nlohmann::json(std::move(out));
}

// A rejoin after repair: one entry per grow (the records of the same joined set and group).
// stall_ms: the members' pause, from the first member starting the grow to the last rank
// training in the grown group; repair_to_full_ms: from the first joiner seeing its ports back
// to the same point (null when no joiner's record is there).
static nlohmann::json Grows(const History& h) {
  std::map<std::pair<std::vector<int>, int>, std::vector<const GrowRecord*>> by_set;
  for (const GrowRecord& g : h.grows) by_set[{g.joined, g.group}].push_back(&g);
  std::vector<nlohmann::json> out;
  for (const auto& [key, recs] : by_set) {
    std::optional<int64_t> member_from, repaired;
    int64_t to = recs.front()->end_ns;
    bool ok = true;
    nlohmann::json ranks = nlohmann::json::array();
    for (const GrowRecord* r : recs) {
      to = std::max(to, r->end_ns);
      if (r->joiner) {
        repaired = std::min(repaired.value_or(r->start_ns), r->start_ns);
      } else {
        member_from = std::min(member_from.value_or(r->start_ns), r->start_ns);
      }
      ok = ok && r->ok;
      ranks.push_back(r->rank);
    }
    const int64_t from = member_from.value_or(repaired.value_or(to));
    auto ms = [](std::optional<int64_t> a, int64_t b) {
      return a ? nlohmann::json(static_cast<double>(b - *a) / 1e6) : nlohmann::json(nullptr);
    };
    auto at = [&](std::optional<int64_t> t) {
      return t ? nlohmann::json(static_cast<double>(*t - h.run_start_ns) / 1e9)
               : nlohmann::json(nullptr);
    };
    out.push_back({{"joined", key.first},
                   {"group", key.second},
                   {"ranks", std::move(ranks)},
                   {"repaired_s", at(repaired)},
                   {"start_s", static_cast<double>(from - h.run_start_ns) / 1e9},
                   {"stall_ms", ms(member_from, to)},
                   {"repair_to_full_ms", ms(repaired, to)},
                   {"ok", ok}});
  }
  std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["start_s"].get<double>() < b["start_s"].get<double>();
  });
  return nlohmann::json(std::move(out));
}

nlohmann::json BuildReportJson(const ReportInputs& in) {
  const Scenario& s = *in.scenario;
  const History& h = *in.history;
  const RunMetrics& m = *in.metrics;
  nlohmann::json faults = nlohmann::json::array();
  for (const FaultRecord& f : h.faults) {
    nlohmann::json j = {{"id", f.id},
                        {"type", f.kind},
                        {"target", f.target.ToJson()},
                        {"scheduled_s", SecondsSince(h.run_start_ns, f.scheduled_ns)},
                        {"applied_s", SecondsSince(h.run_start_ns, f.applied_ns)},
                        {"reverted_s", SecondsSince(h.run_start_ns, f.reverted_ns)},
                        {"observed_s", SecondsSince(h.run_start_ns, f.observed_ns)},
                        {"observed", f.observed}};
    if (!f.error.empty()) j["error"] = f.error;
    if (!f.cycles.empty()) {
      nlohmann::json cycles = nlohmann::json::array();
      for (const FaultRecord::Cycle& c : f.cycles) {
        cycles.push_back({{"down_scheduled_s", SecondsSince(h.run_start_ns, c.down_scheduled_ns)},
                          {"down_s", SecondsSince(h.run_start_ns, c.down_ns)},
                          {"up_scheduled_s", SecondsSince(h.run_start_ns, c.up_scheduled_ns)},
                          {"up_s", SecondsSince(h.run_start_ns, c.up_ns)}});
      }
      j["cycles"] = std::move(cycles);
    }
    faults.push_back(std::move(j));
  }
  nlohmann::json per_fault = nlohmann::json::array();
  for (const FaultMetrics& fm : m.per_fault) {
    nlohmann::json j = {{"id", fm.id}};
    j.update(fm.values.ToJson());
    j["progress_ms"] = fm.progress_ms ? nlohmann::json(*fm.progress_ms) : nlohmann::json(nullptr);
    j["all_flows_ms"] =
        fm.all_flows_ms ? nlohmann::json(*fm.all_flows_ms) : nlohmann::json(nullptr);
    j["convergence"] =
        fm.convergence.empty() ? nlohmann::json(nullptr) : nlohmann::json(fm.convergence);
    j["never_converged"] = fm.never_converged;
    nlohmann::json flows = nlohmann::json::array();
    for (const Flow& fl : fm.flows) {
      flows.push_back({{"rank", fl.rank},
                       {"peer", fl.peer},
                       {"path", fl.path},
                       {"down_s", SecondsSince(h.run_start_ns, fl.down_ns)},
                       {"resumed_s", SecondsSince(h.run_start_ns, fl.resumed_ns)},
                       {"counted", fl.counted}});
    }
    j["flows"] = std::move(flows);
    if (in.fault_rails != nullptr) {
      for (const FaultRails& fr : *in.fault_rails) {
        if (fr.fault_id != fm.id) continue;
        nlohmann::json rails = nlohmann::json::array();
        for (const RailWindow& w : fr.rails) rails.push_back(w.ToJson());
        j["rails"] = std::move(rails);
      }
    }
    per_fault.push_back(std::move(j));
  }
  nlohmann::json expectations = nlohmann::json::array();
  for (const CheckResult& c : *in.checks) expectations.push_back(c.ToJson());
  nlohmann::json out = {
      {"schema", reports::kReportSchema},
      {"scenario",
       {{"name", s.name},
        {"file", in.scenario_file},
        {"sha256", in.scenario_sha256},
        {"seed", in.seed}}},
      {"environment", in.environment},
      {"ccl", CclNameString(s.ccl)},
      {"policy", RecoveryPolicyString(s.policy)},
      {"outcome", OutcomeName(m.outcome)},
      {"shrinks", Shrinks(h)},
      {"grows", Grows(h)},
      {"correctness",
       {{"checked", s.workload.check},
        {"wrong", s.workload.check && m.wrong_results ? nlohmann::json(*m.wrong_results)
                                                      : nlohmann::json(nullptr)}}},
      {"faults", std::move(faults)},
      {"window",
       {{"start_s", 0.0},
        {"end_s", SecondsSince(h.run_start_ns, WindowEndNs(h))},
        {"runner_end_s", SecondsSince(h.run_start_ns, h.run_end_ns)},
        {"rails_used", h.rails_used ? nlohmann::json(*h.rails_used) : nlohmann::json(nullptr)},
        {"baseline_op_ms",
         m.baseline_op_ms ? nlohmann::json(*m.baseline_op_ms) : nlohmann::json(nullptr)},
        {"stop_agreements", StopAgreements(h)}}},
      {"metrics", m.overall.ToJson()},
      {"per_fault", std::move(per_fault)},
      {"expectations", std::move(expectations)},
      {"files",
       {{"timeseries", OptString(in.files.timeseries)},
        {"events", OptString(in.files.events)},
        {"junit", OptString(in.files.junit)},
        {"html", OptString(in.files.html)},
        {"rails", OptString(in.files.rails)}}},
  };
  if (!in.rails_note.is_null()) out["rails"] = in.rails_note;
  if (in.training != nullptr) {
    out["metrics"].update(in.training->ToJson());
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [k, v] : s.workload.script_args) args[k] = v;
    if (s.workload.kind == WorkloadKind::kTrain) {
      const Workload& w = s.workload;
      out["workload"] = {{"kind", "train"},
                         {"steps", w.iters.value_or(0)},
                         {"batch", w.batch},
                         {"compute_ms", w.compute_ns / 1e6},
                         {"grad_bytes", w.bytes},
                         {"checkpoint_every", w.checkpoint_every},
                         {"wait_bound_ms", w.wait_bound_ns / 1e6}};
      return out;
    }
    out["workload"] = {
        {"kind", WorkloadKindName(s.workload.kind)},
        {"script", s.workload.script.empty() ? nlohmann::json("faultline_torch.ddp_train")
                                             : nlohmann::json(s.workload.script)},
        {"steps", s.workload.iters.value_or(0)},
        {"warmup", s.workload.warmup_iters},
        {"args", std::move(args)}};
  }
  return out;
}

}  // namespace faultline::runner
