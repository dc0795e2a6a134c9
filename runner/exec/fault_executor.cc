#include "runner/exec/fault_executor.h"

#include <algorithm>
#include <utility>

#include "reports/verdict.h"
#include "runner/faults/registry.h"

namespace faultline::runner {

FaultExecutor::FaultExecutor(const Scenario& sc, Site* site) : sc_(sc), site_(site) {
  for (const auto& f : sc.faults) {
    State st;
    st.record.id = f.id;
    st.record.kind = f.kind;
    st.record.target = f.target;
    st.record.error = reports::kRanksEndedFirstError;
    faults_.push_back(std::move(st));
  }
}

void FaultExecutor::Schedule(int64_t t0_ns) {
  for (size_t i = 0; i < faults_.size(); ++i)
    faults_[i].record.scheduled_ns = ActionTime(t0_ns, sc_.faults[i].at_ns);
}

void FaultExecutor::Do(const TimelineAction& a, int64_t when, const RankRefs& ranks) {
  auto it = std::find_if(faults_.begin(), faults_.end(),
                         [&](const State& f) { return f.record.id == a.fault_id; });
  if (it == faults_.end()) return;
  State& f = *it;
  FaultRecord& rec = f.record;
  FaultRecord::Cycle* cycle = nullptr;
  if (faults::DescriptorOf(a.kind).hold == faults::Hold::kSchedule && a.cycle >= 0) {
    if (rec.cycles.size() <= static_cast<size_t>(a.cycle)) rec.cycles.resize(a.cycle + 1);
    cycle = &rec.cycles[a.cycle];
    (a.type == ActionType::kApply ? cycle->down_scheduled_ns : cycle->up_scheduled_ns) = when;
  }
  if (a.type == ActionType::kApply) {
    if (rec.error.rfind("not applied", 0) == 0) rec.error.clear();
    auto params = site_->ResolveTarget(a, ranks);
    if (!params.ok()) {
      if (rec.error.empty()) rec.error = params.status().ToString();
      return;
    }
    std::unique_ptr<AppliedFault> handle;
    FaultApplyResult r = site_->Apply(a, *params, when, &handle);
    if (r.attempted && faults::DescriptorOf(a.kind).kills_rank) {
      if (auto g = a.target.GlobalRank(sc_.topology)) killed_[*g] = true;
    }
    if (cycle != nullptr && r.applied) cycle->down_ns = r.applied_ns;
    if (!rec.applied_ns && r.applied) {
      rec.applied_ns = r.applied_ns;
      rec.observed_ns = r.observed_ns;
      rec.observed = r.observed;
    }
    if (!r.error.empty() && rec.error.empty()) rec.error = r.error;
    if (handle) {
      if (r.applied) f.newest = handle.get();
      f.by_cycle[a.cycle] = std::move(handle);
    }
    return;
  }
  auto c = f.by_cycle.find(a.cycle);
  if (c == f.by_cycle.end() || !c->second->applied() || c->second->reverted()) return;
  if (RevertedEarly(f)) return;
  AppliedFault::RevertResult r = c->second->Revert(when);
  if (r.reverted_ns) rec.reverted_ns = r.reverted_ns;
  if (cycle != nullptr && r.reverted_ns) cycle->up_ns = r.reverted_ns;
  for (const std::string& e : r.errors) {
    if (rec.error.empty()) rec.error = e;
  }
}

bool FaultExecutor::RevertedEarly(State& f) {
  if (f.newest == nullptr) return false;
  auto rep = f.newest->ReplacedEarly();
  if (!rep) return false;
  for (auto& [cycle, h] : f.by_cycle) h->MarkReverted();
  if (!f.record.reverted_ns) f.record.reverted_ns = rep->at_ns;
  if (f.record.error.empty()) f.record.error = rep->why;
  return true;
}

void FaultExecutor::HealAll(std::vector<std::string>* harness_errors) {
  // Jepsen-style heal: every fault still in force is reverted, whatever happened before.
  for (State& f : faults_) {
    if (RevertedEarly(f)) {
      f.by_cycle.clear();
      continue;
    }
    for (auto& [cycle, h] : f.by_cycle) {
      if (!h->applied() || h->reverted()) continue;
      AppliedFault::HealResult r = h->Heal();
      if (r.reverted_ns) f.record.reverted_ns = r.reverted_ns;
      if (!r.problem.empty()) harness_errors->push_back("healing fault " + f.record.id + r.problem);
    }
    f.newest = nullptr;
    f.by_cycle.clear();
  }
  if (std::string e = site_->StopFaultService(); !e.empty()) harness_errors->push_back(e);
}

std::vector<FaultRecord> FaultExecutor::records() const {
  std::vector<FaultRecord> out;
  for (const State& f : faults_) out.push_back(f.record);
  return out;
}

}  // namespace faultline::runner
