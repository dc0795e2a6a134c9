#include "runner/faults/reorder/reorder.h"

#include "base/units.h"
#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  ReadPercent(y, true, &f->params.percent, ok);
  f->params.delay_ns = 10'000'000;  // the injector's default
  ReadDuration(y, "delay", false, &f->params.delay_ns, ok);
}

nlohmann::json Params(const FaultSpec& f, uint64_t) {
  return {{"percent", f.params.percent}, {"delay", FormatDuration(f.params.delay_ns)}};
}

}  // namespace

const FaultDescriptor& ReorderFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "reorder";
    d.rdma_refused = kQdiscBypassedByRdma;
    d.target = TargetShape::kLink;
    d.hold = Hold::kFor;
    d.param_keys = {"percent", "delay"};
    d.parse = Parse;
    d.injector_params = Params;
    d.capacity = CapacityEffect::kUnknown;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
