// failover: the library's own recovery (reroute, rebalance, relay); the loop adds nothing at
// the boundaries, and a failed call ends the rank, after which the runner's supervisor
// restarts the job from its last checkpoint (library failover plus a job restart on rank
// loss, as a production job runs).
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
