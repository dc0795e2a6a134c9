#include "injector/port_drop.h"

#include <unistd.h>

#include <atomic>

#include "injector/link_down.h"
#include "injector/netns.h"
#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {
namespace {
std::atomic<int> g_park_seq{0};
}  // namespace

Result<PortDropParams> PortDropParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "dev", "side", "remove"}));
  PortDropParams out;
  FL_ASSIGN_OR_RETURN(out.target, LinkTargetFromJson(p));
  FL_ASSIGN_OR_RETURN(out.remove, params::Bool(p, "remove", false));
  return out;
}

nlohmann::json PortDropParams::ToJson() const {
  return {{"netns", target.netns},
          {"dev", target.dev},
          {"side", LinkSideName(target.side)},
          {"remove", remove}};
}

Result<std::unique_ptr<Fault>> PortDropFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(PortDropParams params, PortDropParams::FromJson(p));
  return std::unique_ptr<Fault>(new PortDropFault(std::move(params)));
}

Result<nlohmann::json> PortDropFault::Prepare(const TargetPolicy& policy) {
  FL_ASSIGN_OR_RETURN(acted_, ResolveLinkTarget(params_.target, policy));
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(acted_.netns));
  FL_ASSIGN_OR_RETURN(LinkState s, GetLink(sock, acted_.dev));
  if (!s.admin_up && !params_.remove) {
    return InvalidArgument("'" + acted_.dev + "' in '" + acted_.netns +
                           "' is already administratively down; nothing to inject");
  }
  FL_ASSIGN_OR_RETURN(std::vector<std::string> addrs, ListAddresses(sock, s.ifindex));
  std::string master;
  if (s.master_ifindex != 0) {
    FL_ASSIGN_OR_RETURN(LinkState m, GetLinkByIndex(sock, s.master_ifindex));
    master = m.name;
  }
  std::string park;
  if (params_.remove) {
    park = std::string(kProjectNetnsPrefix) + "park-" + std::to_string(::getpid()) + "-" +
           std::to_string(g_park_seq++);
  }
  sock_.emplace(std::move(sock));
  undo_ = {{"netns", acted_.netns}, {"dev", acted_.dev},  {"up", s.admin_up},
           {"park_netns", park},    {"addresses", addrs}, {"master", master}};
  return undo_;
}

Status PortDropFault::Apply(MonoNs) {
  FL_RETURN_IF_ERROR(SetLinkUp(*sock_, acted_.dev, false));
  if (!params_.remove) return Status::Ok();
  std::string park = undo_["park_netns"];
  FL_RETURN_IF_ERROR(CreateNetns(park));
  FL_ASSIGN_OR_RETURN(UniqueFd fd, OpenNetns(park));
  return MoveLinkToNetns(*sock_, acted_.dev, fd.get());
}

Status PortDropFault::Undo(const nlohmann::json& undo) {
  std::string netns = undo.value("netns", "");
  std::string dev = undo.value("dev", "");
  std::string park = undo.value("park_netns", "");
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(netns));
  if (!park.empty() && NetnsExists(park)) {
    FL_ASSIGN_OR_RETURN(NlSock park_sock, NlSock::ConnectInNetns(park));
    if (GetLink(park_sock, dev).ok()) {
      FL_ASSIGN_OR_RETURN(UniqueFd home, OpenNetns(netns));
      FL_RETURN_IF_ERROR(MoveLinkToNetns(park_sock, dev, home.get()));
    }
    FL_ASSIGN_OR_RETURN(LinkState s, GetLink(sock, dev));
    for (const auto& a : undo.value("addresses", nlohmann::json::array())) {
      Status st = AddAddress(sock, s.ifindex, a.get<std::string>());
      if (!st.ok() && st.code() != Code::kAlreadyExists) return st;
    }
    std::string master = undo.value("master", "");
    if (!master.empty()) FL_RETURN_IF_ERROR(SetMaster(sock, dev, master));
    FL_RETURN_IF_ERROR(DeleteNetns(park));
  }
  return SetLinkUp(sock, dev, undo.value("up", true));
}

Status PortDropFault::Revert() { return Undo(undo_); }

Result<nlohmann::json> PortDropFault::Observe() {
  auto link = ObserveLink(*sock_, acted_);
  if (!link.ok()) {
    if (link.status().code() != Code::kNotFound) return link.status();
    return nlohmann::json{
        {"in_effect", true}, {"present", false}, {"netns", acted_.netns}, {"dev", acted_.dev}};
  }
  bool up = (*link)["admin_up"].get<bool>();
  return nlohmann::json{{"in_effect", !up}, {"present", true}, {"link", *link}};
}

}  // namespace faultline
