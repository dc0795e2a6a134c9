#include "reports/run_report.h"

#include <utility>

#include "reports/run_data.h"

namespace faultline::reports {
namespace {

using nlohmann::json;

// Moves obj[key] into *out when it is a string (then erases it from obj).
void TakeString(json& obj, const char* key, std::optional<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return;
  *out = it->get<std::string>();
  obj.erase(it);
}

void TakeBool(json& obj, const char* key, std::optional<bool>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean()) return;
  *out = it->get<bool>();
  obj.erase(it);
}

void TakeUnsigned(json& obj, const char* key, std::optional<uint64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_unsigned()) return;
  *out = it->get<uint64_t>();
  obj.erase(it);
}

void TakeAny(json& obj, const char* key, std::optional<json>* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return;
  *out = std::move(*it);
  obj.erase(it);
}

template <typename T>
void Put(json& obj, const char* key, const std::optional<T>& v) {
  if (v) obj[key] = *v;
}

bool ArrayOfObjects(const json& j) {
  if (!j.is_array()) return false;
  for (const auto& e : j) {
    if (!e.is_object()) return false;
  }
  return true;
}

bool ArrayOfStrings(const json& j) {
  if (!j.is_array()) return false;
  for (const auto& e : j) {
    if (!e.is_string()) return false;
  }
  return true;
}

ReportScenario ScenarioFrom(json obj) {
  ReportScenario s;
  TakeString(obj, "name", &s.name);
  TakeString(obj, "file", &s.file);
  TakeUnsigned(obj, "seed", &s.seed);
  TakeString(obj, "sha256", &s.sha256);
  s.rest = std::move(obj);
  return s;
}

json ScenarioJson(const ReportScenario& s) {
  json out = s.rest;
  Put(out, "name", s.name);
  Put(out, "file", s.file);
  Put(out, "seed", s.seed);
  Put(out, "sha256", s.sha256);
  return out;
}

ReportFault FaultFrom(json obj) {
  ReportFault f;
  TakeString(obj, "id", &f.id);
  TakeString(obj, "type", &f.type);
  TakeString(obj, "error", &f.error);
  f.rest = std::move(obj);
  return f;
}

json FaultJson(const ReportFault& f) {
  json out = f.rest;
  Put(out, "id", f.id);
  Put(out, "type", f.type);
  Put(out, "error", f.error);
  return out;
}

ReportExpectation ExpectationFrom(json obj) {
  ReportExpectation e;
  TakeString(obj, "name", &e.name);
  TakeAny(obj, "limit", &e.limit);
  TakeAny(obj, "value", &e.value);
  TakeBool(obj, "pass", &e.pass);
  e.rest = std::move(obj);
  return e;
}

json ExpectationJson(const ReportExpectation& e) {
  json out = e.rest;
  Put(out, "name", e.name);
  Put(out, "limit", e.limit);
  Put(out, "value", e.value);
  Put(out, "pass", e.pass);
  return out;
}

ReportFileNames FilesFrom(json obj) {
  ReportFileNames f;
  TakeString(obj, "timeseries", &f.timeseries);
  TakeString(obj, "events", &f.events);
  TakeString(obj, "junit", &f.junit);
  TakeString(obj, "html", &f.html);
  TakeString(obj, "rails", &f.rails);
  f.rest = std::move(obj);
  return f;
}

json FilesJson(const ReportFileNames& f) {
  json out = f.rest;
  Put(out, "timeseries", f.timeseries);
  Put(out, "events", f.events);
  Put(out, "junit", f.junit);
  Put(out, "html", f.html);
  Put(out, "rails", f.rails);
  return out;
}

}  // namespace

Result<RunReport> RunReport::FromJson(const json& report) {
  FL_RETURN_IF_ERROR(CheckReport(report));
  json obj = report;
  RunReport r;
  r.schema = obj.at("schema").get<std::string>();
  obj.erase("schema");
  if (auto it = obj.find("scenario"); it != obj.end() && it->is_object()) {
    r.scenario = ScenarioFrom(std::move(*it));
    obj.erase(it);
  }
  TakeString(obj, "ccl", &r.ccl);
  TakeString(obj, "outcome", &r.outcome);
  TakeString(obj, "judged_by", &r.judged_by);
  if (auto it = obj.find("faults"); it != obj.end() && ArrayOfObjects(*it)) {
    r.faults.emplace();
    for (auto& f : *it) r.faults->push_back(FaultFrom(std::move(f)));
    obj.erase(it);
  }
  TakeAny(obj, "metrics", &r.metrics);
  TakeAny(obj, "per_fault", &r.per_fault);
  if (auto it = obj.find("expectations"); it != obj.end() && ArrayOfObjects(*it)) {
    r.expectations.emplace();
    for (auto& e : *it) r.expectations->push_back(ExpectationFrom(std::move(e)));
    obj.erase(it);
  }
  if (auto it = obj.find("harness_errors"); it != obj.end() && ArrayOfStrings(*it)) {
    r.harness_errors = it->get<std::vector<std::string>>();
    obj.erase(it);
  }
  if (auto it = obj.find("files"); it != obj.end() && it->is_object()) {
    r.files = FilesFrom(std::move(*it));
    obj.erase(it);
  }
  r.rest = std::move(obj);
  return r;
}

json RunReport::ToJson() const {
  json out = rest;
  out["schema"] = schema;
  if (scenario) out["scenario"] = ScenarioJson(*scenario);
  Put(out, "ccl", ccl);
  Put(out, "outcome", outcome);
  Put(out, "judged_by", judged_by);
  if (faults) {
    json a = json::array();
    for (const auto& f : *faults) a.push_back(FaultJson(f));
    out["faults"] = std::move(a);
  }
  Put(out, "metrics", metrics);
  Put(out, "per_fault", per_fault);
  if (expectations) {
    json a = json::array();
    for (const auto& e : *expectations) a.push_back(ExpectationJson(e));
    out["expectations"] = std::move(a);
  }
  Put(out, "harness_errors", harness_errors);
  if (files) out["files"] = FilesJson(*files);
  return out;
}

}  // namespace faultline::reports
