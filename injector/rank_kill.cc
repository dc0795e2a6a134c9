#include "injector/rank_kill.h"

#include <signal.h>

#include "injector/policy.h"

namespace faultline {

Result<std::unique_ptr<Fault>> RankKillFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(RankSignalParams params, RankSignalParams::FromJson(p));
  return std::unique_ptr<Fault>(new RankKillFault(std::move(params)));
}

Result<nlohmann::json> RankKillFault::Prepare(const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(CheckProcessTarget(params_.pid, params_.netns, policy));
  FL_ASSIGN_OR_RETURN(ref_, LookupProcess(params_.pid));
  return nlohmann::json{{"pid", ref_.pid}};
}

Status RankKillFault::Apply(MonoNs) { return SignalProcess(ref_, SIGKILL); }

Result<nlohmann::json> RankKillFault::Observe() {
  char state = WaitProcessState(ref_.pid, 'X', 1'000'000'000);
  return nlohmann::json{{"in_effect", state == 'X' || state == 'Z'},
                        {"pid", ref_.pid},
                        {"state", std::string(1, state)}};
}

}  // namespace faultline
