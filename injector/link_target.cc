#include "injector/link_target.h"

#include <dirent.h>

#include <vector>

#include "injector/netlink.h"
#include "injector/netns.h"
#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {

Result<LinkSide> ParseLinkSide(std::string_view text) {
  if (text == "host" || text == "nic") return LinkSide::kHost;
  if (text == "switch" || text == "peer") return LinkSide::kSwitch;
  return InvalidArgument("unknown side '" + std::string(text) + "' (expected host or switch)");
}

const char* LinkSideName(LinkSide side) { return side == LinkSide::kHost ? "host" : "switch"; }

Result<LinkTarget> LinkTargetFromJson(const nlohmann::json& p) {
  LinkTarget t;
  FL_ASSIGN_OR_RETURN(t.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(t.dev, params::String(p, "dev", std::nullopt));
  FL_ASSIGN_OR_RETURN(std::string side, params::String(p, "side", "host"));
  FL_ASSIGN_OR_RETURN(t.side, ParseLinkSide(side));
  return t;
}

Result<LinkRef> FindVethPeer(std::string_view netns, std::string_view dev) {
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(netns));
  FL_ASSIGN_OR_RETURN(LinkState self, GetLink(sock, dev));
  if (self.kind != "veth" || self.link_ifindex == 0) {
    return InvalidArgument("side=switch needs a veth: '" + std::string(dev) + "' in '" +
                           std::string(netns) + "' is " +
                           (self.kind.empty() ? "not a veth" : "a " + self.kind));
  }
  if (self.link_netnsid < 0) {
    FL_ASSIGN_OR_RETURN(LinkState peer, GetLinkByIndex(sock, self.link_ifindex));
    return LinkRef{std::string(netns), peer.name, peer.ifindex};
  }
  std::vector<std::string> names;
  if (DIR* d = ::opendir(kNetnsRunDir)) {
    while (dirent* de = ::readdir(d)) {
      std::string n = de->d_name;
      if (n != "." && n != ".." && n != netns) names.push_back(n);
    }
    ::closedir(d);
  }
  // Interface indexes repeat across namespaces, so a namespace qualifies only when its id as
  // seen from `netns` is the veth's link netnsid.
  for (const std::string& n : names) {
    auto fd = OpenNetns(n);
    if (!fd.ok()) continue;
    auto nsid = GetNsid(sock, fd->get());
    if (!nsid.ok() || *nsid != self.link_netnsid) continue;
    auto s = NlSock::ConnectInNetns(n);
    if (!s.ok()) continue;
    auto peer = GetLinkByIndex(*s, self.link_ifindex);
    if (!peer.ok()) continue;
    if (peer->kind == "veth" && peer->link_ifindex == self.ifindex && peer->link_netnsid >= 0) {
      return LinkRef{n, peer->name, peer->ifindex};
    }
  }
  return NotFound("the veth peer of '" + std::string(dev) + "' in '" + std::string(netns) +
                  "' is not in any named network namespace");
}

Result<LinkRef> ResolveLinkTarget(const LinkTarget& target, const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(policy.CheckInterface(target.netns, target.dev));
  if (target.side == LinkSide::kHost) {
    FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(target.netns));
    FL_ASSIGN_OR_RETURN(LinkState s, GetLink(sock, target.dev));
    return LinkRef{target.netns, target.dev, s.ifindex};
  }
  FL_ASSIGN_OR_RETURN(LinkRef peer, FindVethPeer(target.netns, target.dev));
  FL_RETURN_IF_ERROR(
      policy.CheckInterface(peer.netns, peer.dev).WithContext("switch side of " + target.dev));
  return peer;
}

}  // namespace faultline
