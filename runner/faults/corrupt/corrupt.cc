#include "runner/faults/corrupt/corrupt.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) { ReadPercent(y, true, &f->params.percent, ok); }

nlohmann::json Params(const FaultSpec& f, uint64_t) { return {{"percent", f.params.percent}}; }

}  // namespace

const FaultDescriptor& CorruptFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "corrupt";
    d.rdma_refused = kQdiscBypassedByRdma;
    d.target = TargetShape::kLink;
    d.hold = Hold::kFor;
    d.param_keys = {"percent"};
    d.parse = Parse;
    d.injector_params = Params;
    d.capacity = CapacityEffect::kUnknown;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
