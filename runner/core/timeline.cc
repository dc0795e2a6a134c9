#include "runner/core/timeline.h"

#include <algorithm>

#include "base/units.h"
#include "runner/core/fault_kind.h"
#include "runner/core/split_mix64.h"

namespace faultline::runner {

const char* ActionTypeName(ActionType t) { return t == ActionType::kApply ? "apply" : "revert"; }

nlohmann::json TimelineAction::ToJson() const {
  return {{"at_ns", at_ns},    {"nominal_ns", nominal_ns},    {"action", ActionTypeName(type)},
          {"fault", fault_id}, {"type", kind}, {"injector_kind", injector_kind},
          {"cycle", cycle},    {"target", target.ToJson()},   {"params", params}};
}

uint64_t FaultSeed(uint64_t seed, const std::string& fault_id) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a of the id
  for (unsigned char c : fault_id) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  SplitMix64 mix(seed ^ h);
  return mix.Next();
}

Timeline BuildTimeline(const Scenario& scenario, uint64_t seed) {
  struct Keyed {
    TimelineAction action;
    size_t order;  // file order of the fault, then emission order
  };
  std::vector<Keyed> out;
  size_t order = 0;
  for (const FaultSpec& f : scenario.faults) {
    TimelineAction base;
    base.fault_id = f.id;
    base.kind = f.kind;
    base.target = f.target;
    base.injector_kind = f.kind;
    const faults::FaultDescriptor& d = f.descriptor();
    if (d.schedule != nullptr) {
      std::vector<TimelineAction> own;
      d.schedule(f, seed, base, &own);
      for (auto& a : own) out.push_back({std::move(a), order++});
      continue;
    }
    TimelineAction apply = base;
    apply.type = ActionType::kApply;
    apply.at_ns = apply.nominal_ns = f.at_ns;
    apply.params = d.injector_params(f, seed);
    out.push_back({apply, order++});
    if (!d.one_shot() && !f.Permanent() && f.for_ns) {
      TimelineAction revert = base;
      revert.type = ActionType::kRevert;
      revert.at_ns = revert.nominal_ns = f.at_ns + *f.for_ns;
      out.push_back({revert, order++});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Keyed& a, const Keyed& b) {
    if (a.action.at_ns != b.action.at_ns) return a.action.at_ns < b.action.at_ns;
    if (a.action.type != b.action.type) return a.action.type == ActionType::kRevert;
    return a.order < b.order;
  });
  Timeline tl;
  tl.seed = seed;
  for (auto& k : out) tl.actions.push_back(std::move(k.action));
  return tl;
}

}  // namespace faultline::runner
