// A scenario's `faults:`: each entry through its kind's descriptor (runner/core/fault_kind.h),
// the schedule of all of them, and what a FaultSpec says about its kind.
#include "runner/core/scenario_parser.h"

#include <algorithm>
#include <limits>
#include <set>

#include "runner/core/fault_kind.h"
#include "runner/core/fault_yaml.h"

namespace faultline::runner {
namespace scenario_internal {
namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

// Closed/half-open interval overlap where a zero-length interval is a single instant.
bool Overlaps(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
  if (e1 == s1 && e2 == s2) return s1 == s2;
  if (e1 == s1) return s2 <= s1 && s1 < e2;
  if (e2 == s2) return s1 <= s2 && s2 < e1;
  return s1 < e2 && s2 < e1;
}

}  // namespace

void ScenarioParser::ParseFaults(const YAML::Node& n, Scenario* s) {
  if (!n.IsSequence()) {
    Error(n, "faults must be a list, got " + Describe(n), "write '- {id: f1, at: 2s, ...}' items");
    return;
  }
  std::set<std::string> ids;
  for (const auto& item : n) {
    auto f = ParseFault(item, *s);
    if (!f) {
      faults_ok_ = false;
      continue;
    }
    if (!ids.insert(f->id).second) {
      Error(item["id"], "duplicate fault id '" + f->id + "'", "give every fault its own id");
      continue;
    }
    s->faults.push_back(std::move(*f));
    fault_at_locs_.push_back(Loc(item["at"]));
  }
}

std::optional<FaultSpec> ScenarioParser::ParseFault(const YAML::Node& n, const Scenario& s) {
  if (!ExpectMap(n, "a fault")) return std::nullopt;
  FaultSpec f;
  f.loc = Loc(n);
  bool ok = true;
  const faults::FaultDescriptor* kind = nullptr;
  if (Required(n, "type", "a fault", "add 'type: link_down' (or another fault kind)")) {
    if (auto v = Choice(n["type"], "fault type", faults::FaultKindNames())) {
      kind = faults::FindFaultDescriptor(*v);
    }
  }
  std::string what = "fault";
  if (Required(n, "id", "a fault", "add 'id: f1'")) {
    if (auto v = String(n["id"], "fault id")) {
      f.id = *v;
      what = "fault '" + f.id + "'";
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (kind) {
    if (!kind->takes_for()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        const YAML::Node key = it->first;
        if (key.IsScalar() && key.Scalar() == "for") {
          ok = false;
          Error(key, "'for' does not apply to " + std::string(kind->name),
                std::string(kind->for_refused_hint));
        }
      }
    }
    // 'for' on a kind that refuses it was reported above; keep it out of the unknown-key pass.
    std::vector<std::string> allowed = faults::FaultKeys(*kind);
    allowed.push_back("for");
    CheckKeys(n, allowed, what);
  } else {
    ok = false;
  }
  if (Required(n, "at", what, "add 'at: 2s' (time from the start of the workload)")) {
    if (auto v = Duration(n["at"], what + ".at")) {
      f.at_ns = *v;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (!kind) return std::nullopt;
  f.kind = std::string(kind->name);
  if (n["for"] && kind->takes_for()) {
    if (auto v = Duration(n["for"], what + ".for")) {
      if (*v <= 0) {
        Error(n["for"], what + ".for must be > 0", "leave 'for' out to last until the end");
        ok = false;
      } else {
        f.for_ns = *v;
      }
    } else {
      ok = false;
    }
  }
  faults::FaultYaml y{*this, n, what, s, topology_ok_};
  if (Required(n, "target", what, faults::TargetHint(kind->target))) {
    ok = faults::ParseTarget(y, n["target"], kind->target, &f) && ok;
  } else {
    ok = false;
  }
  if (kind->parse != nullptr) kind->parse(y, &f, &ok);
  if (!ok) return std::nullopt;
  if (topology_ok_ && s.topology.is_inventory()) {
    const size_t before = diags_.size();
    CheckRdmaRail(n, f, s);
    if (diags_.size() != before) return std::nullopt;
  }
  return f;
}

// A kind that acts in the kernel's datapath (nftables, qdiscs, kernel sockets) has no effect
// on a rail whose traffic is RDMA: the NIC moves it past the kernel.
void ScenarioParser::CheckRdmaRail(const YAML::Node& n, const FaultSpec& f, const Scenario& s) {
  const faults::FaultDescriptor& d = f.descriptor();
  if (d.rdma_refused.empty() || !f.target.rail) return;
  const InventoryRail* rail = s.topology.InventoryRailAt(f.target.host, *f.target.rail);
  if (rail == nullptr || !rail->is_rdma()) return;
  const std::string& host = s.topology.inventory[f.target.host].name;
  Error(n,
        "fault '" + f.id + "': " + std::string(d.name) + " cannot act on host '" + host +
            "' rail " + std::to_string(*f.target.rail) + " (" + rail->netdev + ", RDMA " +
            rail->rdma + " port " + std::to_string(rail->port) + "): " +
            std::string(d.rdma_refused),
        "on an RDMA rail use link_down, link_flap or port_drop (the netdev) or qp_error (the "
        "rank's fault hook); or target a rail without 'rdma'");
}

// Overlapping faults on one target and faults outside the run.
void ScenarioParser::CheckFaultSchedule(const Scenario& s) {
  const auto& faults = s.faults;
  auto end_of = [](const FaultSpec& f) { return f.LatestEndNs().value_or(kForever); };
  auto key_of = [](const FaultSpec& f) {
    if (f.target.port) {
      return "host " + std::to_string(f.target.host) + " rank " +
             std::to_string(f.target.rank.value_or(0)) + " rail " +
             std::to_string(f.target.rail.value_or(0));
    }
    if (f.target.rank) {
      return "host " + std::to_string(f.target.host) + " rank " + std::to_string(*f.target.rank);
    }
    return "host " + std::to_string(f.target.host) + " rail " +
           std::to_string(f.target.rail.value_or(0));
  };
  auto span = [&](const FaultSpec& f) {
    int64_t e = end_of(f);
    return Seconds(f.at_ns) + ".." + (e == kForever ? std::string("end of run") : Seconds(e));
  };
  for (size_t i = 0; i < faults.size(); ++i) {
    const FaultSpec& f = faults[i];
    if (s.workload.duration_ns) {
      const int64_t run = *s.workload.duration_ns;
      if (f.at_ns >= run) {
        Error(fault_at_locs_[i],
              "fault '" + f.id + "' starts at " + Seconds(f.at_ns) +
                  ", not before the run ends at " + Seconds(run),
              "move 'at' below " + Seconds(run) + " or lengthen workload.duration");
        continue;
      }
      const int64_t e = end_of(f);
      if (e != kForever && e > run) {
        Error(fault_at_locs_[i],
              "fault '" + f.id + "' lasts until " + Seconds(e) + ", beyond the end of the run at " +
                  Seconds(run),
              "shorten it, start it earlier, or lengthen workload.duration");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      const FaultSpec& g = faults[j];
      if (key_of(f) != key_of(g)) continue;
      if (Overlaps(g.at_ns, end_of(g), f.at_ns, end_of(f))) {
        Error(fault_at_locs_[i],
              "fault '" + f.id + "' (" + span(f) + ") overlaps fault '" + g.id + "' (" + span(g) +
                  ") on " + key_of(f),
              end_of(g) == kForever
                  ? "'" + g.id + "' holds its target until the end of the run; pick another target"
                  : "faults on one link or rank must not overlap; let '" + f.id + "' end by " +
                        Seconds(g.at_ns) + " or start at " + Seconds(end_of(g)) + " or later");
      }
    }
  }
}

}  // namespace scenario_internal

const faults::FaultDescriptor& FaultSpec::descriptor() const {
  return faults::DescriptorOf(kind);
}

bool FaultSpec::Permanent() const {
  switch (descriptor().hold) {
    case faults::Hold::kRestOfRun:
    case faults::Hold::kOnceForGood:
      return true;
    case faults::Hold::kOnce:
    case faults::Hold::kSchedule:
      return false;
    case faults::Hold::kFor:
      return !for_ns.has_value();
  }
  return false;
}

std::optional<int64_t> FaultSpec::LatestEndNs() const {
  if (Permanent()) return std::nullopt;
  const faults::FaultDescriptor& d = descriptor();
  if (d.one_shot()) return at_ns;
  if (d.schedule_end != nullptr) return d.schedule_end(*this);
  return at_ns + *for_ns;
}

}  // namespace faultline::runner
