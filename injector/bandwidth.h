// bandwidth: limits the egress rate of an interface with a root tbf.
//
// If the interface has only the kernel's default root qdisc, a tbf with kFaultHandle is
// created (NLM_F_EXCL) and deleted on revert. If the root is the project's own shaping tbf
// (kShapingHandle, created by the topology), its rate is changed and the exact previous
// parameters are restored on revert; a netem fault grafted under that tbf stays in place
// (see netem.h). A netem fault at the root of an unshaped interface is refused. Any other
// root qdisc belongs to the user: refused with AlreadyExists and never touched. Rates above
// 2^32 bytes/s go through TCA_TBF_RATE64.
// JSON parameters: netns, dev, rate ("100mbit"), burst (optional size, e.g. "64KiB").
#pragma once

#include <memory>
#include <optional>

#include "injector/fault.h"
#include "injector/netlink.h"
#include "injector/qdisc.h"

namespace faultline {

struct BandwidthParams {
  std::string netns;
  std::string dev;
  uint64_t rate_bits_per_s = 0;
  uint32_t burst_bytes = 0;  // 0: automatic
  static Result<BandwidthParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

class BandwidthFault final : public Fault {
 public:
  explicit BandwidthFault(BandwidthParams params) : params_(std::move(params)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  // Undo: {"netns","dev","mode":"create"} or {"netns","dev","mode":"change","saved":{...}}.
  static Status Undo(const nlohmann::json& undo);

  std::string_view Kind() const override { return "bandwidth"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;

 private:
  BandwidthParams params_;
  std::optional<NlSock> sock_;
  int ifindex_ = 0;
  bool change_shaping_ = false;
  nlohmann::json undo_;
};

}  // namespace faultline
