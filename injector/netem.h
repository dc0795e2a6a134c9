// delay, jitter, corrupt, reorder: a root netem qdisc (kFaultHandle) through libnl.
//
// The four kinds share this unit because they are one kernel object with different knobs.
// Prepare first probes, in a private throwaway namespace, whether the kernel can create a
// netem qdisc at all; where it cannot (no CONFIG_NET_SCH_NETEM) the fault fails with
// Unavailable naming the missing feature, before anything is journaled or changed. A root
// qdisc the user created is refused (AlreadyExists) as for bandwidth.
// JSON parameters: netns, dev, and per kind: delay (duration); jitter (duration, with an
// optional base delay); corrupt (percent); reorder (percent, optional delay, default 10ms).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "injector/fault.h"
#include "injector/netlink.h"

namespace faultline {

struct NetemParams {
  std::string kind;  // delay | jitter | corrupt | reorder
  std::string netns;
  std::string dev;
  int64_t delay_ns = 0;
  int64_t jitter_ns = 0;
  double percent = 0;  // corrupt / reorder probability
  static Result<NetemParams> FromJson(std::string_view kind, const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

// Ok when the kernel can create a netem qdisc; Unavailable (with the reason) otherwise.
Status ProbeNetem();

class NetemFault final : public Fault {
 public:
  explicit NetemFault(NetemParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> CreateDelay(const nlohmann::json& p);
  static Result<std::unique_ptr<Fault>> CreateJitter(const nlohmann::json& p);
  static Result<std::unique_ptr<Fault>> CreateCorrupt(const nlohmann::json& p);
  static Result<std::unique_ptr<Fault>> CreateReorder(const nlohmann::json& p);
  // Undo record: {"netns", "dev"}: delete the root qdisc with kFaultHandle.
  static Status Undo(const nlohmann::json& undo);

  std::string_view Kind() const override { return params_.kind; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;

 private:
  NetemParams params_;
  std::optional<NlSock> sock_;
  int ifindex_ = 0;
};

}  // namespace faultline
