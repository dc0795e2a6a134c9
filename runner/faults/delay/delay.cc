#include "runner/faults/delay/delay.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  ReadDuration(y, "delay", true, &f->params.delay_ns, ok);
  ReadDuration(y, "jitter", false, &f->params.jitter_ns, ok);
}

}  // namespace

const FaultDescriptor& DelayFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "delay";
    d.rdma_refused = kQdiscBypassedByRdma;
    d.target = TargetShape::kLink;
    d.hold = Hold::kFor;
    d.param_keys = {"delay", "jitter"};
    d.parse = Parse;
    d.injector_params = DelayJitterParams;
    d.capacity = CapacityEffect::kUnknown;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
