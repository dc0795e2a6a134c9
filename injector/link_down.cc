#include "injector/link_down.h"

#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {

Result<LinkDownParams> LinkDownParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "dev", "side"}));
  LinkDownParams out;
  FL_ASSIGN_OR_RETURN(out.target, LinkTargetFromJson(p));
  return out;
}

nlohmann::json LinkDownParams::ToJson() const {
  return {{"netns", target.netns}, {"dev", target.dev}, {"side", LinkSideName(target.side)}};
}

Result<std::unique_ptr<Fault>> LinkDownFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(LinkDownParams params, LinkDownParams::FromJson(p));
  return std::unique_ptr<Fault>(new LinkDownFault(std::move(params)));
}

Status LinkDownFault::Undo(const nlohmann::json& undo) {
  std::string netns = undo.value("netns", "");
  std::string dev = undo.value("dev", "");
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(netns));
  return SetLinkUp(sock, dev, undo.value("up", true));
}

Result<nlohmann::json> ObserveLink(NlSock& sock, const LinkRef& ref) {
  FL_ASSIGN_OR_RETURN(LinkState s, GetLink(sock, ref.dev));
  return nlohmann::json{{"netns", ref.netns},
                        {"dev", ref.dev},
                        {"admin_up", s.admin_up},
                        {"carrier", s.carrier},
                        {"operstate", s.operstate}};
}

Result<nlohmann::json> LinkDownFault::Prepare(const TargetPolicy& policy) {
  FL_ASSIGN_OR_RETURN(acted_, ResolveLinkTarget(params_.target, policy));
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(acted_.netns));
  FL_ASSIGN_OR_RETURN(LinkState s, GetLink(sock, acted_.dev));
  if (!s.admin_up) {
    return InvalidArgument("'" + acted_.dev + "' in '" + acted_.netns +
                           "' is already administratively down; nothing to inject");
  }
  sock_.emplace(std::move(sock));
  FL_ASSIGN_OR_RETURN(NlSock host, NlSock::ConnectInNetns(params_.target.netns));
  host_sock_.emplace(std::move(host));
  return nlohmann::json{{"netns", acted_.netns}, {"dev", acted_.dev}, {"up", true}};
}

Status LinkDownFault::Apply(MonoNs) { return SetLinkUp(*sock_, acted_.dev, false); }

Status LinkDownFault::Revert() { return SetLinkUp(*sock_, acted_.dev, true); }

Result<nlohmann::json> LinkDownFault::Observe() {
  FL_ASSIGN_OR_RETURN(nlohmann::json acted, ObserveLink(*sock_, acted_));
  nlohmann::json out = {{"in_effect", !acted["admin_up"].get<bool>()}, {"link", acted}};
  if (params_.target.side == LinkSide::kSwitch) {
    LinkRef host{params_.target.netns, params_.target.dev, 0};
    FL_ASSIGN_OR_RETURN(nlohmann::json h, ObserveLink(*host_sock_, host));
    out["host_link"] = h;
  }
  return out;
}

}  // namespace faultline
