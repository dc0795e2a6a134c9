#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {

std::unique_ptr<Policy> MakePolicy(std::string_view name) {
  if (name == "failover") return MakeFailoverPolicy();
  if (name == "fail_stop") return MakeFailStopPolicy();
  if (name == "wait") return MakeWaitPolicy();
  if (name == "shrink") return MakeShrinkPolicy();
  if (name == "adaptive") return MakeAdaptivePolicy();
  return nullptr;
}

}  // namespace faultline::runner::policies
