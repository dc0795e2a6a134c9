// blackhole: silently drops every packet a device receives (netdev ingress, nftables); the
// link stays up and carrier is unaffected. JSON parameters: netns, dev.
#pragma once

#include <memory>

#include "injector/nft_fault.h"

namespace faultline {

struct BlackholeParams {
  std::string netns;
  std::string dev;
  static Result<BlackholeParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const { return {{"netns", netns}, {"dev", dev}}; }
};

class BlackholeFault final : public NftDropFault {
 public:
  explicit BlackholeFault(BlackholeParams p)
      : NftDropFault(p.netns, p.dev), params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  std::string_view Kind() const override { return "blackhole"; }
  nlohmann::json Params() const override { return params_.ToJson(); }

 private:
  std::string Rules() const override {
    return "    counter name \"seen\"\n    counter name \"dropped\" drop\n";
  }
  BlackholeParams params_;
};

}  // namespace faultline
