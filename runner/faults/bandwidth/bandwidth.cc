#include "runner/faults/bandwidth/bandwidth.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "base/units.h"
#include "runner/faults/common.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  const YAML::Node& n = y.node;
  FaultParams& p = f->params;
  if (!n["rate"]) {
    y.reader.Error(n, "missing required key 'rate' in " + y.what, "add 'rate: 100Mbps'");
    *ok = false;
  } else if (auto v = y.reader.Rate(n["rate"], y.what + ".rate")) {
    p.rate_bps = *v;
  } else {
    *ok = false;
  }
  if (n["burst"]) {
    if (auto v = y.reader.Size(n["burst"], y.what + ".burst")) {
      p.burst_bytes = *v;
    } else {
      *ok = false;
    }
  }
}

nlohmann::json Params(const FaultSpec& f, uint64_t) {
  nlohmann::json j = {{"rate", FormatRate(f.params.rate_bps)}};
  if (f.params.burst_bytes > 0) j["burst"] = f.params.burst_bytes;
  return j;
}

// The port keeps min(rate, its own rate).
double Share(const FaultSpec& f, double port_bps) {
  return std::min(1.0, static_cast<double>(f.params.rate_bps) / port_bps);
}

}  // namespace

const FaultDescriptor& BandwidthFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "bandwidth";
    d.rdma_refused = kQdiscBypassedByRdma;
    d.target = TargetShape::kLink;
    d.hold = Hold::kFor;
    d.param_keys = {"rate", "burst"};
    d.parse = Parse;
    d.injector_params = Params;
    d.capacity = CapacityEffect::kPort;
    d.port_share = Share;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
