#include "runner/faults/port_drop/port_drop.h"

#include <yaml-cpp/yaml.h>

#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  const YAML::Node& n = y.node;
  if (!n["remove"]) return;
  if (auto v = y.reader.Bool(n["remove"], y.what + ".remove")) {
    f->params.remove = *v;
  } else {
    *ok = false;
    return;
  }
  // The namespace topology's port is a veth it built, which it can delete and re-create. A real
  // NIC's netdev cannot be deleted: only its PCI function can be unbound from the driver, which
  // takes every port of that NIC (both rails of a dual-port card) and needs a rebind, which
  // may fail, to heal. The runner does not do that to a host it does not own.
  if (f->params.remove && y.scenario.topology.is_inventory()) {
    y.reader.Error(n["remove"], "remove: true does not apply to an inventory host",
                   "a real NIC's netdev cannot be deleted (only its PCI function unbound, which "
                   "takes every port of the card); drop 'remove' to take the port down for the "
                   "rest of the run");
    *ok = false;
  }
}

nlohmann::json Params(const FaultSpec& f, uint64_t) {
  nlohmann::json j = SideParams(f);
  j["remove"] = f.params.remove;
  return j;
}

}  // namespace

const FaultDescriptor& PortDropFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "port_drop";
    d.target = TargetShape::kLink;
    d.hold = Hold::kRestOfRun;
    d.for_refused_hint = "a dropped port stays down for the rest of the run";
    d.param_keys = {"remove"};
    d.parse = Parse;
    d.injector_params = Params;
    d.capacity = CapacityEffect::kPort;
    d.port_share = NoShareLeft;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
