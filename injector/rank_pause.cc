#include "injector/rank_pause.h"

#include <signal.h>

#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {
namespace {
constexpr int64_t kStateWaitNs = 1'000'000'000;
}  // namespace

Result<RankSignalParams> RankSignalParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "pid"}));
  RankSignalParams out;
  FL_ASSIGN_OR_RETURN(out.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(int64_t pid, params::Int(p, "pid", std::nullopt));
  out.pid = static_cast<int>(pid);
  return out;
}

Result<std::unique_ptr<Fault>> RankPauseFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(RankSignalParams params, RankSignalParams::FromJson(p));
  return std::unique_ptr<Fault>(new RankPauseFault(std::move(params)));
}

Status RankPauseFault::Undo(const nlohmann::json& undo) {
  ProcessRef ref{undo.value("pid", 0), undo.value("start_time", uint64_t{0})};
  Status st = SignalProcess(ref, SIGCONT);
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Result<nlohmann::json> RankPauseFault::Prepare(const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(CheckProcessTarget(params_.pid, params_.netns, policy));
  FL_ASSIGN_OR_RETURN(ref_, LookupProcess(params_.pid));
  return nlohmann::json{{"pid", ref_.pid}, {"start_time", ref_.start_time}};
}

Status RankPauseFault::Apply(MonoNs) {
  FL_RETURN_IF_ERROR(SignalProcess(ref_, SIGSTOP));
  paused_ = true;
  return Status::Ok();
}

Status RankPauseFault::Revert() {
  FL_RETURN_IF_ERROR(SignalProcess(ref_, SIGCONT));
  paused_ = false;
  return Status::Ok();
}

Result<nlohmann::json> RankPauseFault::Observe() {
  char state = WaitProcessState(ref_.pid, paused_ ? 'T' : 'R', kStateWaitNs);
  return nlohmann::json{{"in_effect", state == 'T' || state == 't'},
                        {"pid", ref_.pid},
                        {"state", std::string(1, state)}};
}

}  // namespace faultline
