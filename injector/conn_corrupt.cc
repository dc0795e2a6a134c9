#include "injector/conn_corrupt.h"

#include "injector/fault_hook.h"
#include "injector/hook_client.h"

namespace faultline {

Result<std::unique_ptr<Fault>> ConnCorruptFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(HookFaultParams params, HookFaultParams::FromJson(p));
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
  FL_ASSIGN_OR_RETURN(nlohmann::json r, HookCall(params_.hook, {{"op", hook::kOpConnCorrupt},
                                                                {"peer", params_.peer},
                                                                {"path", params_.path}}));
  (void)r;
  return Status::Ok();
}

Result<nlohmann::json> ConnCorruptFault::Observe() {
  FL_ASSIGN_OR_RETURN(nlohmann::json q, HookCall(params_.hook, {{"op", hook::kOpQuery},
                                                                {"peer", params_.peer},
                                                                {"path", params_.path}}));
  int64_t sent = q.value("corrupt_frames_sent", int64_t{0});
  return nlohmann::json{{"in_effect", sent > before_}, {"corrupt_frames_sent", sent}};
}

}  // namespace faultline
