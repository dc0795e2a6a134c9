#include "runner/faults/qp_error/qp_error.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) { ReadPeer(y, *f, &f->params.peer, ok); }

nlohmann::json Params(const FaultSpec& f, uint64_t) {
  return {{"peer", f.params.peer}, {"path", f.target.rail.value_or(0)}};
}

}  // namespace

const FaultDescriptor& QpErrorFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "qp_error";
    d.target = TargetShape::kRankPath;
    d.hold = Hold::kOnce;
    d.for_refused_hint = kActsOnceHint;
    d.param_keys = {"peer"};
    d.parse = Parse;
    d.injector_params = Params;
    d.requires_features = {"fault_hook", "verbs"};
    d.capacity = CapacityEffect::kNone;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
