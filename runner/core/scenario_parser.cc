// A scenario document: its top-level keys, `expect:` and `reproduce:`.
#include "runner/core/scenario_parser.h"

#include <algorithm>
#include <limits>

namespace faultline::runner::scenario_internal {

ParseOutcome ScenarioParser::Run(std::string_view text) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "YAML syntax error: " + e.msg,
          "check indentation, colons and brackets near this position");
    return {std::nullopt, diags_};
  }
  return RunRoot(loaded);
}

ParseOutcome ScenarioParser::RunRoot(const YAML::Node& root) {
  Scenario s;
  try {
    if (!root.IsMap()) {
      Error(root.IsNull() ? SourceLoc{1, 1} : Loc(root),
            "a scenario must be a mapping, got " + Describe(root),
            "start with 'name:', 'topology:', 'workload:'");
      return {std::nullopt, diags_};
    }
    CheckKeys(root,
              {"name", "description", "seed", "topology", "ccl", "ccl_options", "policy", "workload", "faults",
               "expect", "reproduce", "requires", "matrix"},
              "the scenario");
    if (root["requires"]) {
      const YAML::Node r = root["requires"];
      std::vector<std::string> known(std::begin(kKnownRequirements), std::end(kKnownRequirements));
      if (!r.IsSequence()) {
        Error(r, "requires must be a list, got " + Describe(r), "write 'requires: [sch_netem]'");
      } else {
        for (const auto& item : r) {
          auto v = Choice(item, "requirement", known);
          if (v && std::find(s.requirements.begin(), s.requirements.end(), *v) ==
                       s.requirements.end()) {
            s.requirements.push_back(*v);
          }
        }
      }
    }
    if (Required(root, "name", "the scenario", "add 'name: my-scenario'")) {
      if (auto v = String(root["name"], "name")) {
        if (v->empty()) Error(root["name"], "name must not be empty");
        s.name = *v;
      }
    }
    if (root["description"]) {
      if (auto v = String(root["description"], "description")) s.description = *v;
    }
    if (root["seed"]) {
      if (auto v = Int(root["seed"], "seed", 0, std::numeric_limits<int64_t>::max())) {
        s.seed = static_cast<uint64_t>(*v);
      }
    }
    if (root["ccl"]) {
      if (auto v = Choice(root["ccl"], "ccl", workload::adapters::CclNames())) {
        s.ccl = *CclNameFromString(*v);
      }
    }
    if (root["ccl_options"]) {
      const YAML::Node o = root["ccl_options"];
      const auto& row = workload::adapters::CclTraitsOf(s.ccl);
      if (!o.IsMap()) {
        Error(o, "ccl_options must be a mapping, got " + Describe(o),
              "write 'ccl_options: {pml: ob1}'");
      } else if (row.options.empty()) {
        Error(o, "ccl " + std::string(row.name) + " takes no ccl_options",
              "remove ccl_options (only libraries started by their own launcher take any)");
      } else {
        for (const auto& kv : o) {
          const std::string key = kv.first.as<std::string>();
          const workload::adapters::CclOption* opt = nullptr;
          std::vector<std::string> names;
          for (const auto& c : row.options) {
            names.emplace_back(c.name);
            if (c.name == key) opt = &c;
          }
          if (opt == nullptr) {
            std::string all;
            for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
            Error(kv.first, "ccl " + std::string(row.name) + " has no option '" + key + "'",
                  "its options: " + all);
            continue;
          }
          std::vector<std::string> values(opt->values.begin(), opt->values.end());
          if (auto v = Choice(kv.second, "ccl_options." + key, values)) s.ccl_options[key] = *v;
        }
      }
    }
    if (root["policy"]) {
      const YAML::Node p = root["policy"];
      if (auto v = Choice(p, "policy", {"failover", "shrink", "fail_stop", "wait", "adaptive"})) {
        s.policy = *v == "failover"    ? RecoveryPolicyName::kFailover
                   : *v == "shrink"    ? RecoveryPolicyName::kShrink
                   : *v == "fail_stop" ? RecoveryPolicyName::kFailStop
                   : *v == "wait"      ? RecoveryPolicyName::kWait
                                       : RecoveryPolicyName::kAdaptive;
      }
    }
    if (Required(root, "topology", "the scenario",
                 "add 'topology: {hosts: 2, ranks_per_host: 2, rails: 2}'")) {
      ParseTopology(root["topology"], &s);
    }
    if (Required(root, "workload", "the scenario",
                 "add 'workload: {op: allreduce, bytes: 16MiB, duration: 8s}'")) {
      ParseWorkload(root["workload"], &s);
    }
    if (root["faults"]) ParseFaults(root["faults"], &s);
    if (root["reproduce"]) ParseReproduce(root["reproduce"], &s);
    if (root["expect"]) {
      ParseExpect(root["expect"], &s);
      CheckExpectations(root["expect"], s);
    }
    CheckFaultSchedule(s);
    if (root["policy"]) CheckPolicy(root["policy"], s);
  } catch (const YAML::Exception& e) {
    Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "malformed scenario: " + e.msg);
  }
  // The scenario's own errors first, then those of a host file it names, each by position.
  std::stable_sort(diags_.begin(), diags_.end(), [&](const Diagnostic& a, const Diagnostic& b) {
    if ((a.file == file_) != (b.file == file_)) return a.file == file_;
    return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.column < b.loc.column;
  });
  if (!diags_.empty()) return {std::nullopt, diags_};
  return {std::move(s), {}};
}

std::optional<double> ScenarioParser::MaxOf(const YAML::Node& n, const std::string& what, const char* key,
                                    double lo, double hi) {
  if (!ExpectMap(n, what)) return std::nullopt;
  CheckKeys(n, {key}, what);
  if (!Required(n, key, what, "write " + what + ": {" + key + ": N}")) return std::nullopt;
  return Number(n[key], what + "." + key, lo, hi);
}

void ScenarioParser::ParseExpect(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "expect")) return;
  CheckKeys(n,
            {"outcome", "wrong_results", "stall_ms", "failover_latency_ms", "failover_first_ms",
             "detection_ms", "recovery", "degraded_ratio", "goodput_loss_pct", "abort_within",
             "param_sha256"},
            "expect");
  Expectations& e = s->expect;
  const double kBig = 1e12;
  for (const auto& kv : n) {
    if (kv.first.IsScalar()) e.locations.emplace_back(kv.first.Scalar(), Loc(kv.second));
  }
  if (n["abort_within"]) {
    if (auto v = Duration(n["abort_within"], "expect.abort_within")) {
      if (*v <= 0) {
        Error(n["abort_within"], "expect.abort_within must be longer than 0",
              "write e.g. 'abort_within: 10s'");
      } else {
        e.abort_within_ns = *v;
      }
    }
  }
  if (n["outcome"]) {
    if (auto v = Choice(n["outcome"], "expected outcome", {"survive", "abort_clean"})) {
      e.outcome = *v == "survive" ? ExpectedOutcome::kSurvive : ExpectedOutcome::kAbortClean;
    }
  }
  if (n["param_sha256"]) {
    if (Choice(n["param_sha256"], "expect.param_sha256", {"twin"})) e.param_sha256_twin = true;
  }
  if (n["wrong_results"]) {
    e.wrong_results =
        Int(n["wrong_results"], "expect.wrong_results", 0, std::numeric_limits<int64_t>::max());
  }
  if (n["stall_ms"]) e.stall_ms_max = MaxOf(n["stall_ms"], "expect.stall_ms", "max", 0, kBig);
  if (n["failover_latency_ms"]) {
    e.failover_latency_ms_max =
        MaxOf(n["failover_latency_ms"], "expect.failover_latency_ms", "max", 0, kBig);
  }
  if (n["detection_ms"]) {
    e.detection_ms_max = MaxOf(n["detection_ms"], "expect.detection_ms", "max", 0, kBig);
  }
  if (n["failover_first_ms"]) {
    e.failover_first_ms_max =
        MaxOf(n["failover_first_ms"], "expect.failover_first_ms", "max", 0, kBig);
  }
  if (n["degraded_ratio"]) {
    e.degraded_ratio_min = MaxOf(n["degraded_ratio"], "expect.degraded_ratio", "min", 0, 1);
  }
  if (n["goodput_loss_pct"]) {
    e.goodput_loss_pct_max = MaxOf(n["goodput_loss_pct"], "expect.goodput_loss_pct", "max", 0, 100);
  }
  if (n["recovery"]) {
    const YAML::Node r = n["recovery"];
    if (ExpectMap(r, "expect.recovery")) {
      CheckKeys(r, {"pct", "within_ms", "sustain_ms"}, "expect.recovery");
      Expectations::Recovery rec;
      bool ok = true;
      if (Required(r, "pct", "expect.recovery", "add 'pct: 90'")) {
        auto v = Number(r["pct"], "expect.recovery.pct", 1, 100);
        ok = ok && v.has_value();
        if (v) rec.pct = *v;
      } else {
        ok = false;
      }
      if (Required(r, "within_ms", "expect.recovery", "add 'within_ms: 1000'")) {
        auto v = Number(r["within_ms"], "expect.recovery.within_ms", 0, kBig);
        ok = ok && v.has_value();
        if (v) rec.within_ms = *v;
      } else {
        ok = false;
      }
      if (r["sustain_ms"]) {
        auto v = Number(r["sustain_ms"], "expect.recovery.sustain_ms", 1, kBig);
        ok = ok && v.has_value();
        if (v) rec.sustain_ms = *v;
      }
      if (ok) e.recovery = rec;
    }
  }
}

void ScenarioParser::ParseReproduce(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "reproduce")) return;
  CheckKeys(n, {"ccl", "outcome", "ranks", "within"}, "reproduce");
  Reproduce r;
  r.loc = Loc(n);
  bool ok = true;
  if (Required(n, "ccl", "reproduce", "add 'ccl: gloo' (the fail-stop library of the replay)")) {
    if (auto v = Choice(n["ccl"], "reproduce.ccl", workload::adapters::CclNames())) {
      r.ccl = *CclNameFromString(*v);
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (Required(n, "outcome", "reproduce", "add 'outcome: aborted_clean'")) {
    if (auto v = Choice(n["outcome"], "reproduce.outcome", {"aborted_clean", "hung", "crashed"})) {
      r.outcome = *v;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (n["within"]) {
    if (auto v = Duration(n["within"], "reproduce.within")) {
      if (*v <= 0) {
        Error(n["within"], "reproduce.within must be longer than 0", "write e.g. 'within: 30s'");
        ok = false;
      } else {
        r.within_ns = *v;
      }
    } else {
      ok = false;
    }
  }
  if (n["ranks"]) {
    const YAML::Node list = n["ranks"];
    const int world = s->topology.world_size();
    if (!list.IsSequence()) {
      Error(list, "reproduce.ranks must be a list of ranks, got " + Describe(list),
            "write e.g. 'ranks: [3, 7]'");
      ok = false;
    } else {
      for (const auto& item : list) {
        auto v = Int(item, "reproduce.ranks[]", 0, std::numeric_limits<int>::max());
        if (!v) {
          ok = false;
          continue;
        }
        if (world > 0 && *v >= world) {
          Error(item, "reproduce.ranks: rank " + std::to_string(*v) + " is not in the topology (" +
                          std::to_string(world) + " ranks)",
                "map the production ranks to ranks below " + std::to_string(world));
          ok = false;
          continue;
        }
        if (std::find(r.ranks.begin(), r.ranks.end(), static_cast<int>(*v)) == r.ranks.end()) {
          r.ranks.push_back(static_cast<int>(*v));
        }
      }
    }
  }
  if (ok) s->reproduce = r;
}

// Expectations that can never be measured in this scenario.
void ScenarioParser::CheckExpectations(const YAML::Node& n, const Scenario& s) {
  const Expectations& e = s.expect;
  if (!n.IsMap()) return;
  for (Diagnostic& d : ExpectationsUnmeasurable(s, s.ccl, "")) Error(d.loc, d.message, d.hint);
  if (n["wrong_results"] && !s.workload.check) {
    Error(n["wrong_results"], "expect.wrong_results needs the results checked, and "
          "workload.check is false",
          "remove wrong_results, or set 'check: true' under workload");
  }
  if (n["param_sha256"] && (s.workload.kind != WorkloadKind::kTrain || s.faults.empty())) {
    Error(n["param_sha256"],
          "expect.param_sha256 compares a train job's parameters with its "
          "fault-free twin's, and this scenario has no train workload with faults",
          "remove param_sha256, or use 'workload: {kind: train, ...}' with faults");
  }
  if (!faults_ok_) return;  // judged once the faults themselves are valid
  if (e.degraded_ratio_min && std::none_of(s.faults.begin(), s.faults.end(),
                                           [](const FaultSpec& f) { return f.Permanent(); })) {
    Error(n["degraded_ratio"], "expect.degraded_ratio needs a permanent fault, and none is",
          "add a fault without 'for' (or a port_drop), or remove degraded_ratio");
  }
  if (s.faults.empty()) {
    for (const char* key :
         {"detection_ms", "failover_first_ms", "failover_latency_ms", "recovery"}) {
      if (n[key]) {
        Error(n[key], std::string("expect.") + key + " needs a fault, and the scenario has none",
              "add a fault under 'faults:' or remove this expectation");
      }
    }
  }
}

}  // namespace faultline::runner::scenario_internal
