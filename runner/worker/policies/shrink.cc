// shrink: the alternative to rerouting. A call failed by a lost rank is redone without it;
// while any member sees a path down at a boundary, the group goes on without the ranks behind
// the down paths (FaultMatrix::AffectedCover), whatever the fault. A fault already over by the
// boundary leaves nobody to drop.
#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {
namespace {

class ShrinkPolicy final : public Policy {
 public:
  const char* Name() const override { return "shrink"; }
  bool Flagged() const override { return true; }
  bool Flag(const LocalView& local) const override { return local.news || local.any_path_down; }
  Gather BoundaryGather() const override { return Gather::kFaultState; }
  Action AtBoundary(const GroupView& group) override {
    const std::vector<int64_t>& v = *group.state;
    if (v[FaultMatrix::kDown] == 0 || group.members.size() < 2) return {};
    return {Action::kShrinkAffected, "the shrink policy", {}};
  }
  Action OnFailedCall(bool can_shrink) const override {
    return {can_shrink ? Action::kShrinkLostRank : Action::kFail, "", {}};
  }
};

}  // namespace

std::unique_ptr<Policy> MakeShrinkPolicy() { return std::make_unique<ShrinkPolicy>(); }

}  // namespace faultline::runner::policies
