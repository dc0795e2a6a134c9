#include "runner/sim/calibration.h"

#include <algorithm>
#include <map>
#include <utility>

#include "reports/metric_table.h"
#include "reports/schema.h"

namespace faultline::sim {
namespace {

std::optional<double> Num(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string Str(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

nlohmann::json Opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

int KindCalibration::Survived() const {
  return static_cast<int>(
      std::count_if(samples.begin(), samples.end(), [](const FaultSample& s) { return s.survived; }));
}

const KindCalibration* Calibration::Find(const std::string& ccl, const std::string& kind,
                                         const std::string& policy) const {
  for (const auto& e : entries) {
    if (e.ccl == ccl && e.kind == kind && e.policy == policy) return &e;
  }
  return nullptr;
}

Status AddReport(const nlohmann::json& r, const std::string& source, Calibration* cal) {
  if (!r.is_object() || !r.contains("schema")) return InvalidArgument("not a report.json");
  if (r["schema"] != reports::kReportSchema) {
    return InvalidArgument("schema " + r["schema"].dump() + ", not " + reports::kReportSchema +
                           " (the metrics' meaning changes with the schema)");
  }
  if (!r.contains("ccl") || !r["ccl"].is_string() || !r.contains("faults") ||
      !r["faults"].is_array() || !r.contains("per_fault") || !r["per_fault"].is_array()) {
    return InvalidArgument("a report without ccl, faults or per_fault");
  }
  cal->sources.push_back(source);
  const std::string ccl = r["ccl"].get<std::string>();
  const std::string outcome = Str(r, "outcome");
  const std::string policy = Str(r, "policy").empty() ? "failover" : Str(r, "policy");
  // A training run's own figures, the same for each of its faults.
  FaultSample train;
  if (r.contains("train") && r["train"].is_object()) {
    const nlohmann::json& t = r["train"];
    train.goodput_ratio = Num(t, reports::kGoodputRatio);
    if (t.contains("restarts") && t["restarts"].is_array()) {
      double sum = 0;
      int costed = 0;
      for (const auto& rs : t["restarts"]) {
        ++train.restarts;
        if (auto ms = Num(rs, "cost_ms")) {
          sum += *ms;
          ++costed;
        }
      }
      if (costed > 0) train.restart_cost_ms = sum / costed;
    }
    if (t.contains("decisions") && t["decisions"].is_array()) {
      for (const auto& d : t["decisions"]) {
        if (!Str(d, "chosen").empty()) train.decisions.push_back(Str(d, "chosen"));
      }
    }
  }
  std::optional<double> rail_gbps;
  if (r.contains("environment") && r["environment"].is_object() &&
      r["environment"].contains("knobs")) {
    rail_gbps = Num(r["environment"]["knobs"], "rail_gbps");
  }
  // A run that "survived" with a wrong result did not survive its faults.
  const bool wrong = r.contains("correctness") && Num(r["correctness"], "wrong").value_or(0) > 0;
  std::map<std::string, const nlohmann::json*> per_fault;
  for (const auto& pf : r["per_fault"]) {
    if (pf.is_object() && pf.contains("id") && pf["id"].is_string()) {
      per_fault[pf["id"].get<std::string>()] = &pf;
    }
  }
  for (const auto& f : r["faults"]) {
    if (!f.is_object() || !Num(f, "applied_s")) continue;  // never applied: no cost to learn
    const std::string kind = Str(f, "type");
    const std::string id = Str(f, "id");
    if (kind.empty()) continue;
    FaultSample s = train;
    s.outcome = outcome;
    s.survived = outcome == "survived" && !wrong;
    s.source = source;
    s.rail_gbps = rail_gbps;
    if (auto rev = Num(f, "reverted_s")) s.fault_for_s = *rev - *Num(f, "applied_s");
    if (auto it = per_fault.find(id); it != per_fault.end()) {
      const nlohmann::json& pf = *it->second;
      // The report's per-fault metrics (reports/metric_table.h).
      s.stall_ms = Num(pf, reports::kStallMs);
      s.convergence_ms = Num(pf, reports::kFailoverLatencyMs);
      s.recovery_ms = Num(pf, reports::kRecoveryMs);
      s.degraded_ratio = Num(pf, reports::kDegradedRatio);
    }
    auto e = std::find_if(cal->entries.begin(), cal->entries.end(), [&](const KindCalibration& k) {
      return k.ccl == ccl && k.kind == kind && k.policy == policy;
    });
    if (e == cal->entries.end()) {
      cal->entries.push_back({ccl, kind, policy, {}});
      e = cal->entries.end() - 1;
    }
    e->samples.push_back(std::move(s));
  }
  std::sort(cal->entries.begin(), cal->entries.end(),
            [](const KindCalibration& a, const KindCalibration& b) {
              return std::tie(a.ccl, a.kind, a.policy) < std::tie(b.ccl, b.kind, b.policy);
            });
  return Status();
}

nlohmann::json Calibration::ToJson() const {
  nlohmann::json es = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& s : e.samples) {
      samples.push_back({{"survived", s.survived},
                         {"outcome", s.outcome},
                         {"stall_ms", Opt(s.stall_ms)},
                         {"convergence_ms", Opt(s.convergence_ms)},
                         {"recovery_ms", Opt(s.recovery_ms)},
                         {"degraded_ratio", Opt(s.degraded_ratio)},
                         {"fault_for_s", Opt(s.fault_for_s)},
                         {"goodput_ratio", Opt(s.goodput_ratio)},
                         {"restarts", s.restarts},
                         {"restart_cost_ms", Opt(s.restart_cost_ms)},
                         {"decisions", s.decisions},
                         {"rail_gbps", Opt(s.rail_gbps)},
                         {"source", s.source}});
    }
    es.push_back({{"ccl", e.ccl},
                  {"kind", e.kind},
                  {"policy", e.policy},
                  {"faults", e.samples.size()},
                  {"survived", e.Survived()},
                  {"samples", std::move(samples)}});
  }
  return {{"schema", kCalibrationSchema},
          {"entries", std::move(es)},
          {"sources", sources},
          {"skipped", skipped}};
}

Result<Calibration> Calibration::FromJson(const nlohmann::json& j) {
  if (Str(j, "schema") != kCalibrationSchema) {
    return InvalidArgument(std::string("not a calibration file (schema ") + kCalibrationSchema +
                           "; write one with faultline calibrate)");
  }
  Calibration c;
  try {
    for (const auto& e : j.at("entries")) {
      KindCalibration k;
      k.ccl = e.at("ccl").get<std::string>();
      k.kind = e.at("kind").get<std::string>();
      // Files written before the policy was recorded hold runs of failover.
      if (e.contains("policy")) k.policy = e.at("policy").get<std::string>();
      for (const auto& s : e.at("samples")) {
        FaultSample f;
        f.survived = s.at("survived").get<bool>();
        f.outcome = Str(s, "outcome");
        f.stall_ms = Num(s, "stall_ms");
        f.convergence_ms = Num(s, "convergence_ms");
        f.recovery_ms = Num(s, "recovery_ms");
        f.degraded_ratio = Num(s, "degraded_ratio");
        f.fault_for_s = Num(s, "fault_for_s");
        f.source = Str(s, "source");
        f.rail_gbps = Num(s, "rail_gbps");
        f.goodput_ratio = Num(s, "goodput_ratio");
        if (s.contains("restarts")) f.restarts = s.at("restarts").get<int>();
        f.restart_cost_ms = Num(s, "restart_cost_ms");
        if (s.contains("decisions")) f.decisions = s.at("decisions").get<std::vector<std::string>>();
        if ((f.stall_ms && *f.stall_ms < 0) || (f.degraded_ratio && *f.degraded_ratio < 0)) {
          return InvalidArgument("entry " + k.ccl + "/" + k.kind + ": a negative cost");
        }
        k.samples.push_back(std::move(f));
      }
      c.entries.push_back(std::move(k));
    }
    if (j.contains("sources")) c.sources = j["sources"].get<std::vector<std::string>>();
    if (j.contains("skipped")) c.skipped = j["skipped"].get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("malformed calibration: ") + e.what());
  }
  return c;
}

}  // namespace faultline::sim
