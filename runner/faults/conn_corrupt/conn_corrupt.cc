#include "runner/faults/conn_corrupt/conn_corrupt.h"

#include <yaml-cpp/yaml.h>

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  ReadPeer(y, *f, &f->params.peer, ok);
  const YAML::Node& n = y.node;
  if (n["part"]) {
    if (auto v = y.reader.Choice(n["part"], y.what + ".part", {"payload", "header"})) {
      f->params.part = *v;
    } else {
      *ok = false;
    }
  }
}

nlohmann::json Params(const FaultSpec& f, uint64_t) {
  nlohmann::json j = {{"peer", f.params.peer}, {"path", f.target.rail.value_or(0)}};
  if (!f.params.part.empty()) j["part"] = f.params.part;
  return j;
}

}  // namespace

const FaultDescriptor& ConnCorruptFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "conn_corrupt";
    d.target = TargetShape::kRankPath;
    d.hold = Hold::kOnce;
    d.for_refused_hint = kActsOnceHint;
    d.param_keys = {"peer", "part"};
    d.parse = Parse;
    d.injector_params = Params;
    d.requires_features = {"fault_hook"};
    d.capacity = CapacityEffect::kNone;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
