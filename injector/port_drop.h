// port_drop: the port goes down for the rest of the run. With remove=true the device is also
// moved out of its namespace into a parking namespace that faultline creates, so it
// disappears (as a NIC that fell off the bus). Revert moves it back, restores its addresses,
// its bridge master and IFF_UP, and deletes the parking namespace. Routes other than those
// implied by the addresses are not restored.
// JSON parameters: netns, dev, side, remove (bool).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "injector/fault.h"
#include "injector/link_target.h"
#include "injector/netlink.h"

namespace faultline {

struct PortDropParams {
  LinkTarget target;
  bool remove = false;
  static Result<PortDropParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

class PortDropFault final : public Fault {
 public:
  explicit PortDropFault(PortDropParams params) : params_(std::move(params)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  // Undo record: {"netns", "dev", "up", "park_netns" (or ""), "addresses", "master"}.
  static Status Undo(const nlohmann::json& undo);

  std::string_view Kind() const override { return "port_drop"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;

 private:
  PortDropParams params_;
  LinkRef acted_;
  std::optional<NlSock> sock_;
  nlohmann::json undo_;
};

}  // namespace faultline
