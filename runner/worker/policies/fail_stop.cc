// fail_stop: the first fault this rank sees (a fault event before or after a step, or a failed
// call) stops it for a restart of every rank from the last checkpoint. Faults reported while
// joining are the state the incarnation starts in: a restart would meet them again.
#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {
namespace {

class FailStopPolicy final : public Policy {
 public:
  const char* Name() const override { return "fail_stop"; }
  bool ForgetsStartupFaults() const override { return true; }
  Action AtStepEdge(const LocalView& local) const override {
    if (!local.news) return {};
    return {Action::kFailStop, "the library reported a fault", {}};
  }
  Action OnFailedCall(bool /*can_shrink*/) const override { return {Action::kFailStop, "", {}}; }
};

}  // namespace

std::unique_ptr<Policy> MakeFailStopPolicy() { return std::make_unique<FailStopPolicy>(); }

}  // namespace faultline::runner::policies
