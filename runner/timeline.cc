#include "runner/timeline.h"

#include <algorithm>

#include "base/units.h"

namespace faultline::runner {
namespace {

// SplitMix64: a small generator whose output is fixed by its definition (unlike the standard
// distributions, whose algorithms differ between library implementations).
class SplitMix64 final {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-bound, +bound] up to a modulo bias below span/2^64 (negligible for
  // durations in nanoseconds). bound <= 0 gives 0.
  int64_t Symmetric(int64_t bound) {
    if (bound <= 0) return 0;
    const uint64_t span = static_cast<uint64_t>(bound) * 2 + 1;
    return static_cast<int64_t>(Next() % span) - bound;
  }

 private:
  uint64_t state_;
};

nlohmann::json ApplyParams(const FaultSpec& f, uint64_t run_seed) {
  const FaultParams& p = f.params;
  nlohmann::json j = nlohmann::json::object();
  switch (f.kind) {
    case FaultKind::kLinkDown:
    case FaultKind::kLinkFlap:
      j["side"] = LinkSideString(f.target.side);
      break;
    case FaultKind::kBlackhole:
      break;
    case FaultKind::kPortDrop:
      j["side"] = LinkSideString(f.target.side);
      j["remove"] = p.remove;
      break;
    case FaultKind::kBandwidth:
      j["rate"] = FormatRate(p.rate_bps);
      if (p.burst_bytes > 0) j["burst"] = p.burst_bytes;
      break;
    case FaultKind::kLoss:
      j["percent"] = p.percent;
      j["seed"] = static_cast<int64_t>(FaultSeed(run_seed, f.id) >> 1);
      break;
    case FaultKind::kDelay:
    case FaultKind::kJitter:
      j["delay"] = FormatDuration(p.delay_ns);
      j["jitter"] = FormatDuration(p.jitter_ns);
      break;
    case FaultKind::kCorrupt:
      j["percent"] = p.percent;
      break;
    case FaultKind::kReorder:
      j["percent"] = p.percent;
      j["delay"] = FormatDuration(p.delay_ns);
      break;
    case FaultKind::kConnReset:
      break;
    case FaultKind::kConnCorrupt:
    case FaultKind::kQpError:
      j["peer"] = p.peer;
      j["path"] = f.target.rail.value_or(0);
      if (!p.part.empty()) j["part"] = p.part;
      break;
    case FaultKind::kRankPause:
    case FaultKind::kRankKill:
      break;
  }
  // Qdisc and nftables kinds take netns/dev only: the executor picks the namespace and
  // device of the target's side.
  return j;
}

}  // namespace

const char* ActionTypeName(ActionType t) { return t == ActionType::kApply ? "apply" : "revert"; }

nlohmann::json TimelineAction::ToJson() const {
  return {{"at_ns", at_ns},    {"nominal_ns", nominal_ns},    {"action", ActionTypeName(type)},
          {"fault", fault_id}, {"type", FaultKindName(kind)}, {"injector_kind", injector_kind},
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
    base.injector_kind = FaultKindName(f.kind);
    if (f.kind == FaultKind::kLinkFlap) {
      // Mirrors injector/link_flap.cc: each period is base + U[-jitter, +jitter], >= 0, and
      // every transition is timed from the previous scheduled one (no drift).
      SplitMix64 rng(FaultSeed(seed, f.id));
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
        down.params = {{"side", LinkSideString(f.target.side)}};
        out.push_back({down, order++});
        t += std::max<int64_t>(p.down_ns + rng.Symmetric(p.jitter_ns), 0);
        nominal += p.down_ns;
        TimelineAction up = base;
        up.injector_kind = "link_down";
        up.type = ActionType::kRevert;
        up.cycle = static_cast<int>(c);
        up.at_ns = t;
        up.nominal_ns = nominal;
        out.push_back({up, order++});
        t += std::max<int64_t>(p.up_ns + rng.Symmetric(p.jitter_ns), 0);
        nominal += p.up_ns;
      }
      continue;
    }
    TimelineAction apply = base;
    apply.type = ActionType::kApply;
    apply.at_ns = apply.nominal_ns = f.at_ns;
    apply.params = ApplyParams(f, seed);
    out.push_back({apply, order++});
    if (!IsOneShot(f.kind) && !f.Permanent() && f.for_ns) {
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
