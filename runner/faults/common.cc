#include "runner/faults/common.h"

#include <yaml-cpp/yaml.h>

#include <limits>
#include <optional>

#include "base/units.h"

namespace faultline::runner::faults {

void ReadDuration(FaultYaml& y, const char* key, bool required, int64_t* out, bool* ok) {
  const YAML::Node& n = y.node;
  if (!n[key]) {
    if (required) {
      y.reader.Error(n, "missing required key '" + std::string(key) + "' in " + y.what,
                     "add '" + std::string(key) + ": 200ms'");
      *ok = false;
    }
    return;
  }
  if (auto v = y.reader.Duration(n[key], y.what + "." + key)) {
    *out = *v;
  } else {
    *ok = false;
  }
}

void ReadPercent(FaultYaml& y, bool required, double* out, bool* ok) {
  const YAML::Node& n = y.node;
  if (!n["percent"]) {
    if (required) {
      y.reader.Error(n, "missing required key 'percent' in " + y.what, "add 'percent: 5%'");
      *ok = false;
    }
    return;
  }
  if (auto v = y.reader.Percent(n["percent"], y.what + ".percent")) {
    *out = *v;
  } else {
    *ok = false;
  }
}

void ReadPeer(FaultYaml& y, const FaultSpec& f, int* out, bool* ok) {
  const YAML::Node& n = y.node;
  const Topology& t = y.scenario.topology;
  if (!n["peer"]) {
    y.reader.Error(n, "missing required key 'peer' in " + y.what,
                   "add 'peer: N' (the global rank on the other end of the connection)");
    *ok = false;
    return;
  }
  auto v = y.reader.Int(n["peer"], y.what + ".peer", 0, std::numeric_limits<int>::max());
  if (!v) {
    *ok = false;
    return;
  }
  *out = static_cast<int>(*v);
  if (y.topology_ok && *out >= t.world_size()) {
    y.reader.Error(n["peer"],
                   y.what + ": peer rank " + std::to_string(*out) + " does not exist (world of " +
                       std::to_string(t.world_size()) + " ranks)",
                   "peer must be in 0.." + std::to_string(t.world_size() - 1));
    *ok = false;
  } else if (y.topology_ok && f.target.GlobalRank(t) == *out) {
    y.reader.Error(n["peer"], y.what + ": peer is the target rank itself",
                   "name the rank on the other end of the connection");
    *ok = false;
  }
}

nlohmann::json SideParams(const FaultSpec& f) { return {{"side", LinkSideString(f.target.side)}}; }

nlohmann::json DelayJitterParams(const FaultSpec& f, uint64_t) {
  return {{"delay", FormatDuration(f.params.delay_ns)},
          {"jitter", FormatDuration(f.params.jitter_ns)}};
}

double NoShareLeft(const FaultSpec&, double) { return 0; }

}  // namespace faultline::runner::faults
