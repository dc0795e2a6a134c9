#include "runner/faults/rank_kill/rank_kill.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {

const FaultDescriptor& RankKillFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "rank_kill";
    d.target = TargetShape::kRank;
    d.hold = Hold::kOnceForGood;
    d.for_refused_hint = kActsOnceHint;
    d.injector_params = [](const FaultSpec&, uint64_t) { return nlohmann::json::object(); };
    d.kills_rank = true;
    // The survivors' share of the capacity depends on what the library does without the rank.
    d.capacity = CapacityEffect::kUnknown;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
