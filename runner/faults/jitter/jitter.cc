#include "runner/faults/jitter/jitter.h"

#include <yaml-cpp/yaml.h>

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  ReadDuration(y, "jitter", true, &f->params.jitter_ns, ok);
  ReadDuration(y, "delay", false, &f->params.delay_ns, ok);
  if (!y.node["delay"]) f->params.delay_ns = f->params.jitter_ns;  // the injector's default
}

}  // namespace

const FaultDescriptor& JitterFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "jitter";
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
