// Which end of a link a link fault acts on.
//
// A rail is a veth pair: the host-side end is the NIC port, the peer end is the switch port.
// side=host acts on --dev itself; side=switch acts on its veth peer (wherever it lives), which
// leaves the host end administratively up with NO-CARRIER, like a cable or switch fault.
// Both the named interface and the one acted on must pass the target policy.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace faultline {

class TargetPolicy;

enum class LinkSide { kHost, kSwitch };

Result<LinkSide> ParseLinkSide(std::string_view text);
const char* LinkSideName(LinkSide side);

struct LinkTarget {
  std::string netns;  // the host namespace that holds `dev`
  std::string dev;
  LinkSide side = LinkSide::kHost;
};

// A concrete interface in a concrete namespace.
struct LinkRef {
  std::string netns;
  std::string dev;
  int ifindex = 0;
};

// Reads netns/dev/side from JSON parameters.
Result<LinkTarget> LinkTargetFromJson(const nlohmann::json& p);
// The interface a fault on `target` acts on, after policy checks.
Result<LinkRef> ResolveLinkTarget(const LinkTarget& target, const TargetPolicy& policy);
// The other end of veth `dev` in `netns`: the same namespace or any named namespace.
Result<LinkRef> FindVethPeer(std::string_view netns, std::string_view dev);

}  // namespace faultline
