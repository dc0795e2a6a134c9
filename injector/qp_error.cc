#include "injector/qp_error.h"

#include "injector/fault_hook.h"
#include "injector/hook_client.h"
#include "injector/params.h"

namespace faultline {

Result<HookFaultParams> HookFaultParams::FromJson(const nlohmann::json& p, std::string_view kind) {
  if (kind == "conn_corrupt") {
    FL_RETURN_IF_ERROR(params::CheckKeys(p, {"hook", "peer", "path", "netns", "part"}));
  } else {
    FL_RETURN_IF_ERROR(params::CheckKeys(p, {"hook", "peer", "path", "netns"}));
  }
  HookFaultParams out;
  FL_ASSIGN_OR_RETURN(out.hook, params::String(p, "hook", std::nullopt));
  FL_ASSIGN_OR_RETURN(int64_t peer, params::Int(p, "peer", std::nullopt));
  FL_ASSIGN_OR_RETURN(int64_t path, params::Int(p, "path", 0));
  if (peer < 0 || path < 0) return InvalidArgument("peer and path must be >= 0");
  out.peer = static_cast<int>(peer);
  out.path = static_cast<int>(path);
  if (p.contains("part")) {
    FL_ASSIGN_OR_RETURN(out.part, params::String(p, "part", std::nullopt));
    if (out.part != "payload" && out.part != "header") {
      return InvalidArgument("part must be \"payload\" or \"header\", got \"" + out.part + "\"");
    }
  }
  return out;
}

Result<std::unique_ptr<Fault>> QpErrorFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(HookFaultParams params, HookFaultParams::FromJson(p, "qp_error"));
  return std::unique_ptr<Fault>(new QpErrorFault(std::move(params)));
}

Result<nlohmann::json> QpErrorFault::Prepare(const TargetPolicy&) {
  FL_ASSIGN_OR_RETURN(nlohmann::json pong, HookCall(params_.hook, {{"op", hook::kOpPing}}));
  return nlohmann::json{{"hook", params_.hook}, {"rank", pong.value("rank", -1)}};
}

Status QpErrorFault::Apply(MonoNs) {
  FL_ASSIGN_OR_RETURN(
      reply_, HookCall(params_.hook,
                       {{"op", hook::kOpQpError}, {"peer", params_.peer}, {"path", params_.path}}));
  return Status::Ok();
}

Result<nlohmann::json> QpErrorFault::Observe() {
  auto r = HookCall(params_.hook,
                    {{"op", hook::kOpQuery}, {"peer", params_.peer}, {"path", params_.path}});
  if (!r.ok() && reverted_ && r.status().code() == Code::kUnavailable) {
    return nlohmann::json{{"in_effect", false}, {"hook", "closed: the rank has ended"}};
  }
  FL_ASSIGN_OR_RETURN(nlohmann::json q, std::move(r));
  std::string state = q.value("qp_state", "");
  return nlohmann::json{{"in_effect", state == "ERR"},
                        {"qp_state", state},
                        {"rank_applied_ns", reply_.value("applied_ns", int64_t{0})}};
}

}  // namespace faultline
