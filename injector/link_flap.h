// link_flap: `count` cycles of down for `down`, then up for `up`, on the host or switch side.
// Every transition happens at an absolute CLOCK_MONOTONIC time computed from the scheduled
// start (no drift), optionally perturbed by a seeded uniform jitter in [-jitter, +jitter].
// Each transition records scheduled/applied/returned times and the link state read back.
// Revert brings the link up. JSON parameters: netns, dev, side, down, up, count, jitter, seed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "injector/fault.h"
#include "injector/link_target.h"
#include "injector/netlink.h"

namespace faultline {

struct LinkFlapParams {
  LinkTarget target;
  int64_t down_ns = 200'000'000;
  int64_t up_ns = 300'000'000;
  int64_t count = 1;
  int64_t jitter_ns = 0;
  uint64_t seed = 0;
  bool observe_each = true;  // read the link back after every transition
  static Result<LinkFlapParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

struct FlapTransition {
  bool up = false;
  MonoNs scheduled = 0;
  MonoNs applied = 0;
  MonoNs returned = 0;
  bool observed_ok = false;  // the link read back in the intended state
};

class LinkFlapFault final : public Fault {
 public:
  explicit LinkFlapFault(LinkFlapParams params) : params_(std::move(params)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);

  std::string_view Kind() const override { return "link_flap"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;
  bool Steady() const override { return false; }

  const std::vector<FlapTransition>& transitions() const { return transitions_; }

 private:
  LinkFlapParams params_;
  LinkRef acted_;
  std::optional<NlSock> sock_;
  std::vector<FlapTransition> transitions_;
};

}  // namespace faultline
