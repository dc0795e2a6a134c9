#include "runner/explore/fault_space.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "base/sha256.h"
#include "runner/core/yaml_reader.h"

namespace faultline::runner::explore {
namespace {

constexpr const char* kBaseKeys[] = {"name", "description", "topology", "ccl", "workload"};
constexpr const char* kSpaceKeys[] = {"faults_per_run", "max_concurrent", "start", "gap",
                                      "horizon",        "targets",        "kinds", "invariants"};

std::string Ms(int64_t ns) { return std::to_string(ns / 1'000'000) + "ms"; }

class SpaceParser final : public YamlReader {
 public:
  explicit SpaceParser(std::string file) : YamlReader(std::move(file)) {}

  SpaceOutcome Run(std::string_view text);

 private:
  // A {min, max} mapping (or one plain value: min == max) read by `read`.
  template <typename T, typename Read>
  std::optional<T> Range(const YAML::Node& n, const std::string& what, Read read);
  std::optional<IntRange> DurationRange(const YAML::Node& n, const std::string& what,
                                        int64_t min_ns);
  void ParseKinds(const YAML::Node& n, FaultSpace* s);
  void ParseTargets(const YAML::Node& n, FaultSpace* s);
  void ParseInvariants(const YAML::Node& n, FaultSpace* s);
  void CheckFit(const YAML::Node& root, const FaultSpace& s);
};

template <typename T, typename Read>
std::optional<T> SpaceParser::Range(const YAML::Node& n, const std::string& what, Read read) {
  if (!n.IsMap()) {
    auto v = read(n, what);
    if (!v) return std::nullopt;
    return T{*v, *v};
  }
  CheckKeys(n, {"min", "max"}, what);
  if (!Required(n, "min", what, "write {min: ..., max: ...}") ||
      !Required(n, "max", what, "write {min: ..., max: ...}")) {
    return std::nullopt;
  }
  auto lo = read(n["min"], what + ".min");
  auto hi = read(n["max"], what + ".max");
  if (!lo || !hi) return std::nullopt;
  if (*hi < *lo) {
    Error(n["max"], what + ".max is below its min",
          "swap them, or make them equal for a fixed value");
    return std::nullopt;
  }
  return T{*lo, *hi};
}

std::optional<IntRange> SpaceParser::DurationRange(const YAML::Node& n, const std::string& what,
                                                   int64_t min_ns) {
  auto r = Range<IntRange>(
      n, what, [&](const YAML::Node& v, const std::string& w) { return Duration(v, w); });
  if (r && r->lo < min_ns) {
    Error(n, what + " must be at least " + Ms(min_ns),
          "a shorter one is below what the timeline can apply");
    return std::nullopt;
  }
  return r;
}

void SpaceParser::ParseKinds(const YAML::Node& n, FaultSpace* s) {
  if (!n.IsSequence() || n.size() == 0) {
    Error(n, "kinds must be a non-empty list, got " + Describe(n),
          "e.g. kinds: [{type: link_down, weight: 1, duration: {min: 100ms, max: 1s}}]");
    return;
  }
  const std::vector<std::string> known(std::begin(kSpaceKinds), std::end(kSpaceKinds));
  int64_t total = 0;
  for (const auto& k : n) {
    if (!ExpectMap(k, "a kind")) continue;
    KindSpec spec;
    spec.loc = Loc(k);
    if (!Required(k, "type", "a kind", "add type: link_down")) continue;
    auto type = Choice(k["type"], "type", known);
    if (!type) continue;
    spec.type = *type;
    for (const auto& other : s->kinds) {
      if (other.type == spec.type)
        Error(k["type"], "kind " + spec.type + " is listed twice", "merge the two entries");
    }
    const std::string what = "kind " + spec.type;
    std::vector<std::string> keys = {"type", "weight"};
    if (spec.type == "link_flap") {
      keys.insert(keys.end(), {"down", "up", "count"});
    } else if (!spec.Permanent() && !spec.OneShot()) {
      keys.push_back("duration");
    }
    if (spec.type == "loss") keys.push_back("percent");
    if (spec.type == "bandwidth") keys.push_back("rate");
    if (spec.type == "conn_corrupt") keys.push_back("parts");
    CheckKeys(k, keys, what);
    if (k["weight"]) {
      if (auto w = Int(k["weight"], what + ".weight", 0, 1000)) spec.weight = *w;
    }
    total += spec.weight;
    bool ok = true;
    auto need = [&](const char* key, const char* hint) {
      if (!Required(k, key, what, hint)) ok = false;
      return k[key];
    };
    if (spec.type == "link_flap") {
      const auto d = need("down", "add down: {min: 50ms, max: 200ms}");
      const auto u = need("up", "add up: {min: 50ms, max: 200ms}");
      const auto c = need("count", "add count: {min: 1, max: 3}");
      if (!ok) continue;
      auto dr = DurationRange(d, what + ".down", 10'000'000);
      auto ur = DurationRange(u, what + ".up", 10'000'000);
      auto cr = Range<IntRange>(c, what + ".count", [&](const YAML::Node& v, const std::string& w) {
        return Int(v, w, 1, 100);
      });
      if (!dr || !ur || !cr) continue;
      spec.down_ns = *dr;
      spec.up_ns = *ur;
      spec.count = *cr;
    } else if (!spec.Permanent() && !spec.OneShot()) {
      const auto d = need("duration", "add duration: {min: 100ms, max: 1s}");
      if (!ok) continue;
      auto dr = DurationRange(d, what + ".duration", 10'000'000);
      if (!dr) continue;
      spec.duration_ns = *dr;
    }
    if (spec.type == "loss") {
      const auto p = need("percent", "add percent: {min: 1, max: 20}");
      if (!ok) continue;
      auto pr = Range<RealRange>(
          p, what + ".percent",
          [&](const YAML::Node& v, const std::string& w) { return Percent(v, w); });
      if (!pr) continue;
      if (pr->lo <= 0) {
        Error(p, what + ".percent must be above 0", "a loss of 0% is no fault");
        continue;
      }
      spec.percent = *pr;
    }
    if (spec.type == "bandwidth") {
      const auto r = need("rate", "add rate: {min: 50Mbps, max: 500Mbps}");
      if (!ok) continue;
      auto rr = Range<IntRange>(
          r, what + ".rate",
          [&](const YAML::Node& v, const std::string& w) -> std::optional<int64_t> {
            auto bps = Rate(v, w);
            if (!bps) return std::nullopt;
            if (*bps < 1'000'000 || *bps % 1'000'000 != 0) {
              Error(v, w + " must be a whole number of Mbps, at least 1Mbps", "e.g. 100Mbps");
              return std::nullopt;
            }
            return static_cast<int64_t>(*bps / 1'000'000);
          });
      if (!rr) continue;
      spec.rate_mbps = *rr;
    }
    if (spec.type == "conn_corrupt" && k["parts"]) {
      const YAML::Node& pn = k["parts"];
      if (!pn.IsSequence() || pn.size() == 0) {
        Error(pn,
              what + ".parts must list payload, header or both, got " +
                  (pn.IsSequence() ? std::string("an empty list") : Describe(pn)),
              "e.g. parts: [payload, header]");
        continue;
      }
      spec.parts.clear();
      for (const auto& one : pn) {
        auto part = Choice(one, what + ".parts", {"payload", "header"});
        if (!part) {
          ok = false;
          continue;
        }
        if (std::find(spec.parts.begin(), spec.parts.end(), *part) != spec.parts.end()) {
          Error(one, what + ".parts names " + *part + " twice", "list each part once");
          ok = false;
        }
        spec.parts.push_back(*part);
      }
      if (!ok) continue;
    }
    s->kinds.push_back(spec);
  }
  if (total == 0 && !s->kinds.empty()) {
    Error(n, "every kind has weight 0: nothing could be drawn",
          "give one kind a weight of 1 or more");
  }
}

void SpaceParser::ParseTargets(const YAML::Node& n, FaultSpace* s) {
  if (!ExpectMap(n, "targets")) return;
  CheckKeys(n, {"hosts", "rails", "ranks", "sides"}, "targets");
  const Topology& t = s->base.topology;
  auto indices = [&](const char* key, int count, std::vector<int>* out) {
    out->clear();
    if (!n[key]) {
      for (int i = 0; i < count; ++i) out->push_back(i);
      return;
    }
    const YAML::Node l = n[key];
    if (!l.IsSequence() || l.size() == 0) {
      Error(l, std::string("targets.") + key + " must be a non-empty list, got " + Describe(l),
            std::string("e.g. ") + key + ": [0, 1]");
      return;
    }
    for (const auto& v : l) {
      auto i = Int(v, std::string("targets.") + key, 0, std::max(0, count - 1));
      if (!i) continue;
      if (std::find(out->begin(), out->end(), *i) != out->end()) {
        Error(v, std::string("targets.") + key + " lists " + std::to_string(*i) + " twice");
        continue;
      }
      out->push_back(static_cast<int>(*i));
    }
  };
  indices("hosts", t.hosts, &s->targets.hosts);
  indices("rails", t.rails, &s->targets.rails);
  if (n["ranks"]) {
    if (!t.per_rank_nics()) {
      Error(n["ranks"],
            "targets.ranks needs nics: per_rank: on shared NICs a host's ranks share "
            "its ports",
            "drop targets.ranks, or give the topology nics: per_rank");
    } else {
      indices("ranks", t.ranks_per_host, &s->targets.ranks);
    }
  }
  if (n["sides"]) {
    s->targets.sides.clear();
    const YAML::Node l = n["sides"];
    if (!l.IsSequence() || l.size() == 0) {
      Error(l, "targets.sides must be a non-empty list, got " + Describe(l),
            "e.g. sides: [host, switch]");
      return;
    }
    for (const auto& v : l) {
      if (auto c = Choice(v, "targets.sides", {"host", "switch"})) {
        const LinkSide side = *c == "host" ? LinkSide::kHost : LinkSide::kSwitch;
        if (std::find(s->targets.sides.begin(), s->targets.sides.end(), side) !=
            s->targets.sides.end()) {
          Error(v, "targets.sides lists " + *c + " twice");
          continue;
        }
        s->targets.sides.push_back(side);
      }
    }
  }
}

void SpaceParser::ParseInvariants(const YAML::Node& n, FaultSpace* s) {
  if (!ExpectMap(n, "invariants")) return;
  CheckKeys(n,
            {"exact_results", "no_silent_hang", "liveness_after_heal", "lossless", "ccl_sequence",
             "nothing_left_behind"},
            "invariants");
  InvariantSettings& inv = s->invariants;
  // `key: true|false`, or a mapping of its settings (on).
  auto onoff = [&](const char* key, bool* on, const std::vector<std::string>& settings) {
    const YAML::Node v = n[key];
    if (!v) return YAML::Node();
    if (v.IsMap()) {
      *on = true;
      CheckKeys(v, settings, std::string("invariants.") + key);
      return v;
    }
    if (auto b = Bool(v, std::string("invariants.") + key)) *on = *b;
    return YAML::Node();
  };
  onoff("exact_results", &inv.exact_results, {});
  onoff("nothing_left_behind", &inv.nothing_left_behind, {});
  onoff("lossless", &inv.lossless, {});
  onoff("ccl_sequence", &inv.ccl_sequence, {});
  if (auto m = onoff("no_silent_hang", &inv.no_silent_hang, {"abort_within"});
      m && m["abort_within"]) {
    if (auto d = Duration(m["abort_within"], "no_silent_hang.abort_within")) {
      if (*d <= 0) {
        Error(m["abort_within"], "abort_within must be above 0");
      } else {
        inv.abort_within_ns = *d;
      }
    }
  }
  if (auto m = onoff("liveness_after_heal", &inv.liveness_after_heal,
                     {"pct", "within", "stall_x", "stall_plus"});
      m) {
    if (m["stall_x"]) {
      if (auto x = Number(m["stall_x"], "liveness_after_heal.stall_x", 1, 1e6)) inv.stall_x = *x;
    }
    if (m["stall_plus"]) {
      if (auto d = Duration(m["stall_plus"], "liveness_after_heal.stall_plus")) {
        if (*d < 0) {
          Error(m["stall_plus"], "liveness_after_heal.stall_plus must not be negative");
        } else {
          inv.stall_plus_ns = *d;
        }
      }
    }
    if (m["stall_plus"] && !m["stall_x"]) {
      Error(m["stall_plus"], "liveness_after_heal.stall_plus needs stall_x",
            "e.g. stall_x: 20, stall_plus: 500ms");
    }
    if (m["pct"]) {
      if (auto p = Percent(m["pct"], "liveness_after_heal.pct")) {
        if (*p <= 0) {
          Error(m["pct"], "liveness_after_heal.pct must be above 0", "e.g. pct: 50");
        } else {
          inv.liveness_pct = *p;
        }
      }
    }
    if (m["within"]) {
      if (auto d = Duration(m["within"], "liveness_after_heal.within")) {
        if (*d <= 0) {
          Error(m["within"], "liveness_after_heal.within must be above 0");
        } else {
          inv.liveness_within_ns = *d;
        }
      }
    }
  }
}

// What only the whole file can tell: the faults fit between the start and the horizon, the
// horizon leaves the liveness window before the run ends, the first fault leaves a baseline.
void SpaceParser::CheckFit(const YAML::Node& root, const FaultSpace& s) {
  const Workload& w = s.base.workload;
  const int64_t run_ns = w.duration_ns.value_or(0);
  if (s.horizon_ns > run_ns) {
    Error(root["horizon"],
          "the horizon " + Ms(s.horizon_ns) + " is past the workload's end (" + Ms(run_ns) + ")",
          "every fault must end before the run does");
    return;
  }
  if (s.invariants.liveness_after_heal && s.horizon_ns + s.invariants.liveness_within_ns > run_ns) {
    Error(root["horizon"],
          "the horizon " + Ms(s.horizon_ns) + " plus liveness_after_heal.within " +
              Ms(s.invariants.liveness_within_ns) + " is past the workload's end (" + Ms(run_ns) +
              ")",
          "move the horizon earlier, lengthen the workload, or shorten 'within'");
  }
  if (s.start_ns.lo <= w.warmup_ns) {
    Error(root["start"],
          "the first fault may start at " + Ms(s.start_ns.lo) + ", within the warm-up (" +
              Ms(w.warmup_ns) + "): no baseline",
          "let start.min be after workload.warmup");
  }
  if (s.start_ns.hi >= s.horizon_ns) {
    Error(root["start"],
          "start.max " + Ms(s.start_ns.hi) + " is not before the horizon " + Ms(s.horizon_ns));
  }
  // The first fault of a run always fits: the longest of every kind, started last.
  for (const auto& k : s.kinds) {
    if (k.type == "conn_corrupt" && s.base.topology.hosts < 2) {
      Error(k.loc,
            "kind conn_corrupt corrupts a frame to a rank on another host: the topology has 1",
            "use hosts: 2 or more");
    }
    int64_t longest = 0;
    if (k.type == "link_flap") {
      longest = k.count.hi * k.down_ns.hi + (k.count.hi - 1) * k.up_ns.hi;
    } else if (!k.Permanent() && !k.OneShot()) {
      longest = k.duration_ns.hi;
    }
    if (s.start_ns.hi + longest > s.horizon_ns) {
      Error(k.loc,
            "kind " + k.type + " lasts up to " + Ms(longest) + ": started at start.max " +
                Ms(s.start_ns.hi) + " it ends after the horizon " + Ms(s.horizon_ns),
            "shorten it, start earlier or move the horizon");
    }
  }
}

SpaceOutcome SpaceParser::Run(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "YAML syntax error: " + e.msg,
          "check indentation, colons and brackets near this position");
    return {std::nullopt, diags_};
  }
  FaultSpace s;
  s.file = file_;
  try {
    if (!root.IsMap()) {
      Error(root.IsNull() ? SourceLoc{1, 1} : Loc(root),
            "a fault space must be a mapping, got " + Describe(root),
            "start with 'name:', 'topology:', 'workload:', 'kinds:'");
      return {std::nullopt, diags_};
    }
    std::vector<std::string> allowed(std::begin(kBaseKeys), std::end(kBaseKeys));
    allowed.insert(allowed.end(), std::begin(kSpaceKeys), std::end(kSpaceKeys));
    CheckKeys(root, allowed, "the fault space");
    // The scenario part, validated by the scenario parser at its own positions.
    YAML::Node base(YAML::NodeType::Map);
    for (const char* k : kBaseKeys) {
      if (root[k]) base[k] = root[k];
    }
    ParseOutcome parsed = ParseScenarioNode(base, file_);
    for (auto& d : parsed.diagnostics) diags_.push_back(std::move(d));
    const bool base_ok = parsed.ok();
    if (base_ok) {
      s.base = std::move(*parsed.scenario);
      const Topology& t = s.base.topology;
      if (t.is_inventory()) {
        Error(root["topology"], "a fault space runs on the namespace topology",
              "drop kind: inventory");
      }
      if (s.base.workload.kind != WorkloadKind::kCollectives) {
        Error(root["workload"], "a fault space runs the collectives workload",
              "drop workload.kind");
      } else if (!s.base.workload.duration_ns) {
        Error(root["workload"], "a fault space needs workload.duration (the horizon is a time)",
              "replace iters with duration: 6s");
      }
    }
    if (Required(root, "kinds", "the fault space",
                 "add kinds: [{type: link_down, duration: 1s}]")) {
      ParseKinds(root["kinds"], &s);
    }
    if (base_ok) {
      const YAML::Node t = root["targets"] ? root["targets"] : YAML::Node(YAML::NodeType::Map);
      ParseTargets(t, &s);
    }
    if (root["faults_per_run"]) {
      if (auto r = Range<IntRange>(
              root["faults_per_run"], "faults_per_run",
              [&](const YAML::Node& v, const std::string& w) { return Int(v, w, 1, 64); })) {
        s.faults_per_run = *r;
      }
    }
    if (root["max_concurrent"]) {
      if (auto v = Int(root["max_concurrent"], "max_concurrent", 1, 64)) {
        s.max_concurrent = static_cast<int>(*v);
      }
    }
    bool timing_ok = true;
    if (Required(root, "start", "the fault space", "add start: {min: 1s, max: 2s}")) {
      if (auto r = DurationRange(root["start"], "start", 0))
        s.start_ns = *r;
      else
        timing_ok = false;
    } else {
      timing_ok = false;
    }
    if (root["gap"]) {
      if (auto r = DurationRange(root["gap"], "gap", 0))
        s.gap_ns = *r;
      else
        timing_ok = false;
    }
    if (Required(root, "horizon", "the fault space",
                 "add horizon: 4s (every fault ends by then)")) {
      if (auto d = Duration(root["horizon"], "horizon"))
        s.horizon_ns = *d;
      else
        timing_ok = false;
    } else {
      timing_ok = false;
    }
    if (root["invariants"]) ParseInvariants(root["invariants"], &s);
    if (base_ok && timing_ok && diags_.empty()) CheckFit(root, s);
  } catch (const YAML::Exception& e) {
    Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "malformed fault space: " + e.msg);
  }
  std::stable_sort(diags_.begin(), diags_.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.column < b.loc.column;
  });
  if (!diags_.empty()) return {std::nullopt, diags_};
  s.sha256 = Sha256Hex(std::string(text));
  return {std::move(s), {}};
}

}  // namespace

bool KindSpec::HasSide() const { return type != "conn_reset" && type != "conn_corrupt"; }
bool KindSpec::Permanent() const { return type == "port_drop"; }
bool KindSpec::OneShot() const { return type == "conn_reset" || type == "conn_corrupt"; }

SpaceOutcome ParseFaultSpace(std::string_view yaml_text, const std::string& file) {
  SpaceParser p(file);
  return p.Run(yaml_text);
}

SpaceOutcome ParseFaultSpaceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {std::nullopt, {{path, {0, 0}, "cannot read the fault space file", ""}}};
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseFaultSpace(ss.str(), path);
}

}  // namespace faultline::runner::explore
