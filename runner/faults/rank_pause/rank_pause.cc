#include "runner/faults/rank_pause/rank_pause.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {

const FaultDescriptor& RankPauseFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "rank_pause";
    d.target = TargetShape::kRank;
    d.hold = Hold::kFor;
    // The executor names the rank's pid and namespace.
    d.injector_params = [](const FaultSpec&, uint64_t) { return nlohmann::json::object(); };
    d.capacity = CapacityEffect::kUnknown;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
