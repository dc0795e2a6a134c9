// wait: the library waits for a lost peer up to the wait bound; at a step boundary the ranks
// hold together while any of them has a path down that no hold has waited out, up to the bound.
#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {
namespace {

class WaitPolicy final : public Policy {
 public:
  const char* Name() const override { return "wait"; }
  bool Flagged() const override { return true; }
  bool Flag(const LocalView& local) const override { return local.path_to_wait_for; }
  bool WaitsForLostPeers() const override { return true; }
  Gather BoundaryGather() const override { return Gather::kWaitFlags; }
  Action AtBoundary(const GroupView& group) override {
    return group.any_waiting ? Action{Action::kHold, "", {}} : Action{};
  }
  Action OnFailedCall(bool /*can_shrink*/) const override { return {Action::kFail, "", {}}; }
};

}  // namespace

std::unique_ptr<Policy> MakeWaitPolicy() { return std::make_unique<WaitPolicy>(); }

HoldStep NextHoldStep(bool any_waiting, bool bound_passed) {
  if (!any_waiting) return HoldStep::kReturned;
  if (bound_passed) return HoldStep::kWaitedOut;
  return HoldStep::kHold;
}

}  // namespace faultline::runner::policies
