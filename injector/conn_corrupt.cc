#include "injector/conn_corrupt.h"

#include "injector/fault_hook.h"
#include "injector/hook_client.h"

namespace faultline {

Result<std::unique_ptr<Fault>> ConnCorruptFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(HookFaultParams params, HookFaultParams::FromJson(p, "conn_corrupt"));
  return std::unique_ptr<Fault>(new ConnCorruptFault(std::move(params)));
}

Result<nlohmann::json> ConnCorruptFault::Prepare(const TargetPolicy&) {
  FL_ASSIGN_OR_RETURN(nlohmann::json q, HookCall(params_.hook, {{"op", hook::kOpQuery},
                                                                {"peer", params_.peer},
                                                                {"path", params_.path}}));
  before_ = q.value("corrupt_frames_sent", int64_t{0});
  return nlohmann::json{{"hook", params_.hook}};
}

Status ConnCorruptFault::Apply(MonoNs) {
  nlohmann::json req = {
      {"op", hook::kOpConnCorrupt}, {"peer", params_.peer}, {"path", params_.path}};
  if (!params_.part.empty()) req["part"] = params_.part;
  FL_ASSIGN_OR_RETURN(reply_, HookCall(params_.hook, std::move(req)));
  return Status::Ok();
}

Result<nlohmann::json> ConnCorruptFault::Observe() {
  auto r = HookCall(params_.hook,
                    {{"op", hook::kOpQuery}, {"peer", params_.peer}, {"path", params_.path}});
  if (!r.ok() && reverted_ && r.status().code() == Code::kUnavailable) {
    // After the run: the rank closed its hook when it ended, which leaves nothing in effect.
    return nlohmann::json{{"in_effect", false}, {"hook", "closed: the rank has ended"}};
  }
  FL_ASSIGN_OR_RETURN(nlohmann::json q, std::move(r));
  int64_t sent = q.value("corrupt_frames_sent", int64_t{0});
  // rank_applied_ns: when the rank wrote the damaged frame (or armed it, if none went out yet).
  return nlohmann::json{{"in_effect", sent > before_},
                        {"corrupt_frames_sent", sent},
                        {"rank_applied_ns", reply_.value("applied_ns", int64_t{0})}};
}

}  // namespace faultline
