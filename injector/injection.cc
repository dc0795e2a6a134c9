#include "injector/injection.h"

#include <cstdio>

#include "injector/journal.h"
#include "injector/policy.h"

namespace faultline {

nlohmann::json StepTiming::ToJson() const {
  return {{"scheduled_ns", scheduled},
          {"applied_ns", applied},
          {"returned_ns", returned},
          {"observed_ns", observed},
          {"lateness_ns", applied - scheduled},
          {"call_ns", returned - applied},
          {"observed", observation}};
}

Result<std::unique_ptr<Injection>> Injection::Arm(std::unique_ptr<Fault> fault, Journal* journal,
                                                  const TargetPolicy& policy) {
  FL_CHECK(fault != nullptr && journal != nullptr);
  FL_ASSIGN_OR_RETURN(nlohmann::json undo, fault->Prepare(policy));
  FL_ASSIGN_OR_RETURN(std::string id, journal->Append(fault->Kind(), undo));
  return std::unique_ptr<Injection>(new Injection(std::move(fault), journal, std::move(id)));
}

Injection::~Injection() {
  if (apply_attempted_ && !reverted_) {
    Status st = RevertAt(0);
    if (!st.ok()) {
      std::fprintf(stderr, "faultline: revert of %s failed (left in the journal): %s\n",
                   std::string(fault_->Kind()).c_str(), st.ToString().c_str());
    }
  } else if (!apply_attempted_) {
    journal_->Remove(journal_id_).IgnoreError();
  }
}

Status Injection::ApplyAt(MonoNs scheduled) {
  if (apply_attempted_) return InvalidArgument("fault already applied");
  if (scheduled == 0) scheduled = MonoNow();
  SleepUntil(scheduled);
  apply_.scheduled = scheduled;
  apply_.applied = MonoNow();
  apply_attempted_ = true;
  Status st = fault_->Apply(scheduled);
  apply_.returned = MonoNow();
  if (!st.ok()) return st.WithContext(std::string("apply ") + std::string(fault_->Kind()));
  applied_ = true;
  auto obs = fault_->Observe();
  apply_.observed = MonoNow();
  if (!obs.ok()) return obs.status().WithContext("observe after apply");
  apply_.observation = *obs;
  if (fault_->Steady() && !obs->value("in_effect", false)) {
    return Internal(std::string(fault_->Kind()) +
                    " was applied but its effect is not observed: " + obs->dump());
  }
  return Status::Ok();
}

Status Injection::RevertAt(MonoNs scheduled) {
  if (!apply_attempted_) return InvalidArgument("fault was not applied");
  if (reverted_) return Status::Ok();
  if (scheduled == 0) scheduled = MonoNow();
  SleepUntil(scheduled);
  revert_.scheduled = scheduled;
  revert_.applied = MonoNow();
  Status st = fault_->Revert();
  revert_.returned = MonoNow();
  if (!st.ok()) return st.WithContext(std::string("revert ") + std::string(fault_->Kind()));
  auto obs = fault_->Observe();
  revert_.observed = MonoNow();
  if (!obs.ok()) return obs.status().WithContext("observe after revert");
  revert_.observation = *obs;
  if (fault_->Steady() && obs->value("in_effect", true)) {
    return Internal(std::string(fault_->Kind()) +
                    " was reverted but its effect is still observed: " + obs->dump());
  }
  reverted_ = true;
  return journal_->Remove(journal_id_);
}

nlohmann::json Injection::ToJson() const {
  nlohmann::json j = {{"kind", std::string(fault_->Kind())},
                      {"params", fault_->Params()},
                      {"journal_id", journal_id_}};
  if (apply_attempted_) j["apply"] = apply_.ToJson();
  if (reverted_) j["revert"] = revert_.ToJson();
  return j;
}

}  // namespace faultline
