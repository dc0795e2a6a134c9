// failover: the library's own recovery (reroute, rebalance, relay); the loop adds nothing at
// the boundaries, and a failed call ends the rank.
#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {
namespace {

class FailoverPolicy final : public Policy {
 public:
  const char* Name() const override { return "failover"; }
  Action OnFailedCall(bool /*can_shrink*/) const override { return {Action::kFail, "", {}}; }
};

}  // namespace

std::unique_ptr<Policy> MakeFailoverPolicy() { return std::make_unique<FailoverPolicy>(); }

}  // namespace faultline::runner::policies
