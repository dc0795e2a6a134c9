#include "runner/faults/link_flap/link_flap.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "base/units.h"
#include "runner/faults/common.h"
#include "runner/core/split_mix64.h"

namespace faultline::runner::faults {
namespace {

void Parse(FaultYaml& y, FaultSpec* f, bool* ok) {
  const YAML::Node& n = y.node;
  FaultParams& p = f->params;
  ReadDuration(y, "down", true, &p.down_ns, ok);
  ReadDuration(y, "up", true, &p.up_ns, ok);
  ReadDuration(y, "jitter", false, &p.jitter_ns, ok);
  if (n["count"]) {
    if (auto v = y.reader.Int(n["count"], y.what + ".count", 1, 100000)) {
      p.count = *v;
    } else {
      *ok = false;
    }
  }
  if (*ok && (p.down_ns <= 0 || p.up_ns <= 0)) {
    y.reader.Error(n[p.down_ns <= 0 ? "down" : "up"], y.what + ": down and up must be > 0");
    *ok = false;
  }
  if (*ok && p.jitter_ns > 0 && p.jitter_ns >= std::min(p.down_ns, p.up_ns)) {
    y.reader.Error(n["jitter"],
                   y.what + ": jitter " + FormatDuration(p.jitter_ns) + " is not below down/up (" +
                       FormatDuration(p.down_ns) + "/" + FormatDuration(p.up_ns) + ")",
                   "jitter must be smaller than both periods so transitions keep their order");
    *ok = false;
  }
}

// The final "up" follows 2*count-1 periods, each stretched by at most `jitter`.
int64_t End(const FaultSpec& f) {
  const FaultParams& p = f.params;
  return f.at_ns + p.count * p.down_ns + (p.count - 1) * p.up_ns + (2 * p.count - 1) * p.jitter_ns;
}

// `count` link_down apply/revert pairs. Mirrors injector/link_flap.cc: each period is
// base + U[-jitter, +jitter], >= 0, and every transition is timed from the previous
// scheduled one (no drift).
void Schedule(const FaultSpec& f, uint64_t run_seed, const TimelineAction& base,
              std::vector<TimelineAction>* out) {
  SplitMix64 rng(FaultSeed(run_seed, f.id));
  const FaultParams& p = f.params;
  int64_t t = f.at_ns;
  int64_t nominal = f.at_ns;
  for (int64_t c = 0; c < p.count; ++c) {
    TimelineAction down = base;
    down.injector_kind = "link_down";
    down.type = ActionType::kApply;
    down.cycle = static_cast<int>(c);
    down.at_ns = t;
    down.nominal_ns = nominal;
    down.params = SideParams(f);
    out->push_back(down);
    t += std::max<int64_t>(p.down_ns + rng.Symmetric(p.jitter_ns), 0);
    nominal += p.down_ns;
    TimelineAction up = base;
    up.injector_kind = "link_down";
    up.type = ActionType::kRevert;
    up.cycle = static_cast<int>(c);
    up.at_ns = t;
    up.nominal_ns = nominal;
    out->push_back(up);
    t += std::max<int64_t>(p.up_ns + rng.Symmetric(p.jitter_ns), 0);
    nominal += p.up_ns;
  }
}

}  // namespace

const FaultDescriptor& LinkFlapFault() {
  static const FaultDescriptor d = [] {
    FaultDescriptor d;
    d.name = "link_flap";
    d.target = TargetShape::kLink;
    d.hold = Hold::kSchedule;
    d.for_refused_hint = "a flap lasts count x (down + up)";
    d.param_keys = {"down", "up", "count", "jitter"};
    d.parse = Parse;
    d.injector_params = [](const FaultSpec& f, uint64_t) { return SideParams(f); };
    d.schedule_end = End;
    d.schedule = Schedule;
    d.capacity = CapacityEffect::kNone;
    return d;
  }();
  return d;
}

}  // namespace faultline::runner::faults
