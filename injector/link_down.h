// link_down: sets a link administratively down (IFF_UP cleared through rtnl_link_change) on
// the host side or the switch side (the veth peer: the host end stays up with NO-CARRIER).
// Revert restores IFF_UP. Observe reads the link flags back with a netlink query.
// JSON parameters: netns, dev, side ("host" | "switch").
#pragma once

#include <memory>
#include <optional>

#include "injector/fault.h"
#include "injector/link_target.h"
#include "injector/netlink.h"

namespace faultline {

struct LinkDownParams {
  LinkTarget target;
  static Result<LinkDownParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

class LinkDownFault final : public Fault {
 public:
  explicit LinkDownFault(LinkDownParams params) : params_(std::move(params)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  // Undo record: {"netns", "dev", "up": bool}.
  static Status Undo(const nlohmann::json& undo);

  std::string_view Kind() const override { return "link_down"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;

 private:
  LinkDownParams params_;
  LinkRef acted_;
  std::optional<NlSock> sock_;       // bound to acted_.netns
  std::optional<NlSock> host_sock_;  // bound to the target's netns (observes NO-CARRIER)
};

// Reads a link for observation: {"dev", "netns", "admin_up", "carrier", "operstate"}.
Result<nlohmann::json> ObserveLink(NlSock& sock, const LinkRef& ref);

}  // namespace faultline
