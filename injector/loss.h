// loss: drops a given percentage of the IP packets a device receives (netdev ingress,
// nftables). The drop pattern is seeded and deterministic: of every 1000 consecutive IP
// packets (numgen inc mod 1000), the slots chosen by a seeded shuffle are dropped, so
// percent has a resolution of 0.1% and a run with the same seed drops the same packets.
// Non-IP traffic (ARP) is not dropped. JSON parameters: netns, dev, percent, seed.
#pragma once

#include <cstdint>
#include <memory>

#include "injector/nft_fault.h"

namespace faultline {

struct LossParams {
  std::string netns;
  std::string dev;
  double percent = 0;
  uint64_t seed = 0;
  static Result<LossParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

class LossFault final : public NftDropFault {
 public:
  explicit LossFault(LossParams p) : NftDropFault(p.netns, p.dev), params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  std::string_view Kind() const override { return "loss"; }
  nlohmann::json Params() const override { return params_.ToJson(); }

 private:
  std::string Rules() const override;
  LossParams params_;
};

}  // namespace faultline
