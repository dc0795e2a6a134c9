#include "runner/faults/loss/loss.h"

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) { ReadPercent(y, true, &f->params.percent, ok); }

nlohmann::json Params(const FaultSpec& f, uint64_t run_seed) {
  // The drop pattern follows the fault's own random stream.
  return {{"percent", f.params.percent},
          {"seed", static_cast<int64_t>(FaultSeed(run_seed, f.id) >> 1)}};
}

}  // namespace

const FaultDescriptor& LossFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "loss";
    d.rdma_refused = kNftablesBypassedByRdma;
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
